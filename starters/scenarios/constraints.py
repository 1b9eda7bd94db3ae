"""constraints: workloads the kube-scheduler's filters constrain (issue 29), on three zones.

GPU pods (nvidia.com/gpu), a zone anti-affine database (db-0..2, StatefulSet-like pods that
avoid each other per zone), web pods affine to a cache on the hostname, host-port agents (one
per node), a pod whose PersistentVolume is pinned to zone kwok-b, and one pod no pool can hold.
The scenario waits until every pod runs or growth gave a reason for it, nothing is in flight and
a few loops changed nothing; its summary counts
- wasted_nodes: nodes growth bought that received none of the pods they were bought for (the
  scenario's pods, all pending when growth starts buying: the scheduler places them as its
  scoring prefers, not as the planner packed them);
- unreported_pending: pods Pending at the end with no reason from growth (a NotTriggerScaleUp
  Event on the pod, or a problem naming it in the autoscaler's status).
Both must be 0.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kubernetes import client

from scaling.nodes.models import LABEL_GROUP
from scaling.nodes.providers.kwok import kwok_catalogue
from starters.kube import deployment, node_group
from starters.scenarios.base import Scenario
from starters.scenarios.progress import RequestLog

if TYPE_CHECKING:
    from starters.demo import Demo

ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"
ZONES = ("kwok-a", "kwok-b", "kwok-c")
GPU = "nvidia.com/gpu"
STABLE_LOOPS = 3  # loops with nothing in flight and nothing changed before the scenario ends


def gpu_types() -> list[str]:
    """The KWOK catalogue's types that offer GPUs (none: the GPU pods are reported instead)."""
    return [t.name for t in kwok_catalogue() if t.allocatable.amount(GPU) > 0]


def required(kind: str, app: str, key: str) -> dict[str, Any]:
    terms = [{"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": key}]
    return {kind: {"requiredDuringSchedulingIgnoredDuringExecution": terms}}


def bare_pod(name: str, app: str, cpu: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": app}},
        "spec": {
            "containers": [
                {
                    "name": "app",
                    "image": "registry.k8s.io/pause:3.9",
                    "resources": {"requests": {"cpu": cpu, "memory": "256Mi"}},
                }
            ],
            **spec,
        },
    }


def workloads() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(deployments, pods) of the scenario."""
    gpu = deployment("gpu-train", 2, cpu="500m", memory="1Gi")
    gpu["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"] = {GPU: "1"}
    agents = deployment("agent", 3, cpu="100m", memory="64Mi")
    agents["spec"]["template"]["spec"]["containers"][0]["ports"] = [{"containerPort": 9100, "hostPort": 9100}]
    deployments = [
        gpu,
        deployment("cache", 2, cpu="500m", memory="512Mi"),
        deployment("web", 2, cpu="500m", memory="512Mi", affinity=required("podAffinity", "cache", HOST)),
        agents,
    ]
    pods = [bare_pod(f"db-{i}", "db", "1", affinity=required("podAntiAffinity", "db", ZONE)) for i in range(3)]
    pods.append(
        bare_pod(
            "reports", "reports", "250m", volumes=[{"name": "data", "persistentVolumeClaim": {"claimName": "reports"}}]
        )
    )
    pods.append(bare_pod("impossible", "impossible", "64"))  # more cores than any type of the group has
    return deployments, pods


def volume_objects() -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """A local StorageClass, a PV pinned to zone kwok-b and the claim bound to it."""
    sc = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": "local"},
        "provisioner": "kubernetes.io/no-provisioner",
        "volumeBindingMode": "WaitForFirstConsumer",
    }
    pv = {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": "reports-pv", "labels": {ZONE: "kwok-b"}},
        "spec": {
            "capacity": {"storage": "10Gi"},
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": "local",
            "claimRef": {"namespace": "default", "name": "reports"},
            "local": {"path": "/mnt/reports"},
            "nodeAffinity": {
                "required": {
                    "nodeSelectorTerms": [{"matchExpressions": [{"key": ZONE, "operator": "In", "values": ["kwok-b"]}]}]
                }
            },
        },
    }
    pvc = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": "reports"},
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "10Gi"}},
            "storageClassName": "local",
            "volumeName": "reports-pv",
        },
    }
    return sc, pv, pvc


class ConstraintsScenario(Scenario):
    name = "constraints"

    def providers(self, workdir: Path, extra: dict[str, Any]) -> dict[str, dict[str, Any]]:
        return {"kwok": {}}

    def node_groups(self) -> list[dict[str, Any]]:
        pools = [
            {"provider": "kwok", "serverType": ["cx22", "cx32"], "priority": 50, "config": {"zone": z}} for z in ZONES
        ]
        if types := gpu_types():
            pools += [{"provider": "kwok", "serverType": types, "priority": 50, "config": {"zone": z}} for z in ZONES]
        return [node_group("constraints", pools, maxNodes=30)]

    async def run(self, demo: Demo) -> dict[str, Any]:
        core, apps, storage = client.CoreV1Api(demo.api), client.AppsV1Api(demo.api), client.StorageV1Api(demo.api)
        sc, pv, pvc = volume_objects()
        await asyncio.to_thread(storage.create_storage_class, sc)
        await asyncio.to_thread(core.create_persistent_volume, pv)
        await asyncio.to_thread(core.create_namespaced_persistent_volume_claim, "default", pvc)
        deployments, pods = workloads()
        for d in deployments:
            await asyncio.to_thread(apps.create_namespaced_deployment, "default", d)
        for p in pods:
            await asyncio.to_thread(core.create_namespaced_pod, "default", p)
        log = RequestLog()
        requests: dict[str, Any] = {}  # request id -> its last status (node, pods it was for)
        t0 = time.monotonic()
        deadline = t0 + self.args.timeout
        stable_since: tuple[Any, int] | None = None  # (what the last check saw, the loop it saw it)
        while True:
            status = await demo.status()
            log.update(status)
            for r in [*status.recent, *status.in_flight]:
                requests[r.id] = r
            view = await asyncio.to_thread(self._view, demo, core, status, requests)
            seen = (view["placed"], view["reported"], len(requests), bool(status.in_flight))
            if stable_since is None or stable_since[0] != seen:
                stable_since = (seen, status.iterations)
            settled = not status.in_flight and not view["unreported"]
            if settled and status.iterations - stable_since[1] >= STABLE_LOOPS:
                break
            if time.monotonic() > deadline:
                print(f"  timed out; still pending without a reason: {view['unreported']}", flush=True)
                break
            await asyncio.sleep(1.0)
        nodes = await asyncio.to_thread(core.list_node, label_selector=LABEL_GROUP)
        for name, why in sorted(view["pending"].items()):
            print(f"  pending {name}: {why}", flush=True)
        wasted, unreported = view["wasted"], view["unreported"]
        return {
            "scenario": self.name,
            "pods": view["total"],
            "pods_running": view["running"],
            "pods_pending": len(view["pending"]),
            "pending": view["pending"],
            "nodes_created": len(nodes.items),
            "wasted_nodes": len(wasted),
            "wasted": wasted,
            "unreported_pending": len(unreported),
            "unreported": unreported,
            "requests": status.requests_by_phase,
            "seconds": round(time.monotonic() - t0, 2),
            "_ok": not wasted and not unreported,
        }

    @staticmethod
    def _view(demo: Demo, core: client.CoreV1Api, status: Any, requests: dict[str, Any]) -> dict[str, Any]:
        """Where every pod is, which bought nodes got none of their pods, which pending pods have
        no reason from growth."""
        pods = [demo.api.sanitize_for_serialization(p) for p in core.list_namespaced_pod("default").items]
        events = core.list_namespaced_event("default").items
        reasons = {e.involved_object.uid: f"{e.reason}: {e.message}" for e in events if e.reason == "NotTriggerScaleUp"}
        problems = [*status.problems, *status.never_satisfiable]
        reasons.update({p.uid: f"{p.reason}: {p.message}" for p in problems})
        placed = {p["metadata"]["uid"]: p["spec"].get("nodeName") for p in pods}
        names = {p["metadata"]["uid"]: p["metadata"]["name"] for p in pods}
        # Every pod of the scenario is pending when growth starts buying, and the scheduler places
        # them on the new nodes as its scoring prefers, not as the planner packed them: a node
        # that runs none of them is one nobody needed.
        busy = set(placed.values())
        wasted = {
            r.node_name: sorted(names.get(u, u) for u in r.pod_uids)  # the pods its request was for
            for r in requests.values()
            if r.node_name and r.phase.value == "Ready" and r.node_name not in busy
        }
        scheduler = {
            p["metadata"]["uid"]: next(
                (
                    c.get("message", "")
                    for c in (p.get("status") or {}).get("conditions") or []
                    if c["type"] == "PodScheduled"
                ),
                "",
            )
            for p in pods
        }
        pending = {}
        unreported = []
        for uid, node in placed.items():
            if node:
                continue
            why = reasons.get(uid)  # a shape's pods are named up to SHAPE_SAMPLE (5): each has its own
            pending[names[uid]] = f"{why or 'no reason'} (scheduler: {scheduler[uid]})"
            if why is None:
                unreported.append(names[uid])
        return {
            "total": len(pods),
            "running": sum(1 for p in pods if (p.get("status") or {}).get("phase") == "Running"),
            "placed": tuple(sorted((names[u], n or "") for u, n in placed.items())),
            "reported": tuple(sorted(pending.items())),
            "pending": pending,
            "wasted": wasted,
            "unreported": sorted(unreported),
        }
