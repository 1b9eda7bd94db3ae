"""KWOK-like kubelet stand-in: fake nodes turn Ready, pods bound to them start Running.

A node is ours when it carries the annotation `kwok.x-k8s.io/node: fake`, as with KWOK.
It becomes Ready `node_ready_delay` seconds after this loop first sees it, unless its name
matches a never-ready fault glob. Pods bound to a Ready fake node become Running and Ready
`pod_start_delay` seconds after they were first seen bound.
"""

from __future__ import annotations

import hashlib
import time
from typing import Any

from sim.kube.actor import Actor
from sim.kube.control import FakeControl
from sim.kube.follow import Follower
from sim.kube.store import Obj, Store, now_rfc3339

KWOK_ANNOTATION = "kwok.x-k8s.io/node"
DEFAULT_CAPACITY = {"cpu": "32", "memory": "256Gi", "pods": "110", "ephemeral-storage": "100Gi"}


def is_fake(node: Obj) -> bool:
    return ((node.get("metadata") or {}).get("annotations") or {}).get(KWOK_ANNOTATION) == "fake"


def is_ready(node: Obj) -> bool:
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in (node.get("status") or {}).get("conditions") or []
    )


def _fake_ip(seed: str, prefix: str) -> str:
    # Addresses are data only (nothing is ever sent to them); derived so they are stable.
    digest = hashlib.sha256(seed.encode()).digest()
    return f"{prefix}.{digest[0]}.{digest[1]}.{max(1, digest[2] % 255)}"


class Kwok(Actor):
    name = "kwok"

    def __init__(self, store: Store, control: FakeControl, interval: float = 0.05) -> None:
        super().__init__(lambda: interval)
        self.store = store
        self.control = control
        self.node_seen: dict[str, float] = {}
        self.pod_seen: dict[str, float] = {}
        # Pods bound to a node and not started yet, by (namespace, name) -> (uid, node), kept
        # from the store's events: a step looks at these, not at every pod (twenty steps a
        # second over 10,000 running pods was a tenth of the simulator's CPU in a burst).
        self.starting: dict[tuple[str, str], tuple[str, str]] = {}
        self.follower = Follower(store, store.builtin("pods").gr, self._reset_pods, self._pod_changed)
        # Fake nodes by name, in creation order: those not Ready (name -> uid) and those Ready,
        # from the node events too (a step over a thousand nodes twenty times a second was most
        # of this loop's time once the nodes had joined).
        self.not_ready: dict[str, str] = {}
        self.ready: set[str] = set()
        self.node_follower = Follower(store, store.builtin("nodes").gr, self._reset_nodes, self._node_changed)

    def _reset_nodes(self, nodes: list[Obj]) -> None:
        self.not_ready, self.ready = {}, set()
        for node in nodes:
            self._node_changed(None, node)
        live = {n["metadata"]["uid"] for n in nodes}
        self.node_seen = {u: t for u, t in self.node_seen.items() if u in live}

    def _node_changed(self, old: Obj | None, new: Obj | None) -> None:
        if old is not None:
            self.not_ready.pop(old["metadata"]["name"], None)
            self.ready.discard(old["metadata"]["name"])
            if new is None:
                self.node_seen.pop(old["metadata"]["uid"], None)
        if new is not None and is_fake(new):
            if is_ready(new):
                self.ready.add(new["metadata"]["name"])
            else:
                self.not_ready[new["metadata"]["name"]] = new["metadata"]["uid"]

    def _reset_pods(self, pods: list[Obj]) -> None:
        self.starting = {}
        for pod in pods:
            self._pod_changed(None, pod)

    def _pod_changed(self, old: Obj | None, new: Obj | None) -> None:
        if old is not None:
            self.starting.pop((old["metadata"].get("namespace", ""), old["metadata"]["name"]), None)
        if new is not None:
            node_name = (new.get("spec") or {}).get("nodeName")
            if (
                node_name
                and (new.get("status") or {}).get("phase") == "Pending"
                and not new["metadata"].get("deletionTimestamp")
            ):
                meta = new["metadata"]
                self.starting[(meta.get("namespace", ""), meta["name"])] = (meta["uid"], node_name)

    def step(self) -> None:
        nodes_rt = self.store.builtin("nodes")
        pods_rt = self.store.builtin("pods")
        now = time.monotonic()
        self.node_follower.catch_up()
        ready_fake = self.ready  # its node events follow: adding a node here first changes nothing
        for name, uid in list(self.not_ready.items()):
            seen = self.node_seen.setdefault(uid, now)
            if self.control.never_ready(name) or now - seen < self.control.node_ready_delay:
                continue
            if self.store.mutate(nodes_rt, "", name, self._ready_node, "status"):
                ready_fake.add(name)
        live_pods: set[str] = set()
        self.follower.catch_up()
        for (namespace, name), (uid, node_name) in list(self.starting.items()):
            if node_name not in ready_fake:
                continue
            live_pods.add(uid)
            seen = self.pod_seen.setdefault(uid, now)
            if now - seen >= self.control.pod_start_delay:
                self.store.mutate(pods_rt, namespace, name, self._running_pod, "status")
        self.pod_seen = {u: t for u, t in self.pod_seen.items() if u in live_pods}

    @staticmethod
    def _ready_node(node: Obj) -> Obj:
        stamp = now_rfc3339()
        status: dict[str, Any] = node.setdefault("status", {})
        status.setdefault("capacity", dict(DEFAULT_CAPACITY))
        status.setdefault("allocatable", dict(status["capacity"]))
        name = node["metadata"]["name"]

        def condition(kind: str, value: str, reason: str, message: str) -> Obj:
            return {
                "type": kind,
                "status": value,
                "reason": reason,
                "message": message,
                "lastHeartbeatTime": stamp,
                "lastTransitionTime": stamp,
            }

        status["conditions"] = [
            condition("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
            condition(
                "MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"
            ),
            condition("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
            condition("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
            condition("NetworkUnavailable", "False", "RouteCreated", "route created"),
        ]
        status.setdefault(
            "addresses",
            [{"type": "InternalIP", "address": _fake_ip(name, "10")}, {"type": "Hostname", "address": name}],
        )
        status.setdefault(
            "nodeInfo",
            {
                "architecture": "amd64",
                "bootID": "",
                "containerRuntimeVersion": "kwok",
                "kernelVersion": "kwok",
                "kubeProxyVersion": "kwok",
                "kubeletVersion": "fake",
                "machineID": "",
                "operatingSystem": "linux",
                "osImage": "kwok",
                "systemUUID": "",
            },
        )
        status["phase"] = "Running"
        return node

    @staticmethod
    def _running_pod(pod: Obj) -> Obj | None:
        if pod["status"].get("phase") != "Pending" or not pod["spec"].get("nodeName"):
            return None
        stamp = now_rfc3339()
        status = pod["status"]
        scheduled = next(
            (c for c in status.get("conditions") or [] if c.get("type") == "PodScheduled"),
            {"type": "PodScheduled", "status": "True", "lastProbeTime": None, "lastTransitionTime": stamp},
        )
        status["conditions"] = [
            {"type": kind, "status": "True", "lastProbeTime": None, "lastTransitionTime": stamp}
            for kind in ("Initialized", "Ready", "ContainersReady")
        ] + [scheduled]
        ip = _fake_ip(pod["metadata"]["uid"], "10")
        status.update(
            {
                "phase": "Running",
                "podIP": ip,
                "podIPs": [{"ip": ip}],
                "hostIP": _fake_ip(pod["spec"]["nodeName"], "10"),
                "hostIPs": [{"ip": _fake_ip(pod["spec"]["nodeName"], "10")}],
                "startTime": stamp,
                "containerStatuses": [
                    {
                        "name": c["name"],
                        "image": c.get("image", ""),
                        "imageID": "",
                        "ready": True,
                        "restartCount": 0,
                        "started": True,
                        "containerID": f"kwok://{c['name']}",
                        "state": {"running": {"startedAt": stamp}},
                    }
                    for c in pod["spec"].get("containers") or []
                ],
            }
        )
        return pod
