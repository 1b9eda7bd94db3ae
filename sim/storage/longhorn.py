"""A Longhorn stand-in for the simulated cluster, with `kubernetes-cluster-autoscaler-enabled`.

It plays the parts of Longhorn that decide whether a node may be removed (seed 003: attached
volumes, a last healthy replica and backing-image or share managers keep a node), acting
only through the Kubernetes API over HTTP (httpx, bearer token), like the real manager:

- CRDs longhorn.io/v1beta2 volumes, replicas, engines, instancemanagers, settings,
  backingimagemanagers; the CRs mirror the stand-in's state on every reconcile pass.
- One instance-manager pod per node in longhorn-system, bound to the node, owned by an
  InstanceManager CR (not a controller kind Cluster Autoscaler knows) and, with the setting
  on, annotated `cluster-autoscaler.kubernetes.io/safe-to-evict: "true"`.
- Instance-manager PDBs (minAvailable 1, selecting that node's instance-manager pod):
  * a node whose manager runs instances (engine or replica of an attached volume) keeps one,
    except an unschedulable node running only replicas whose volumes have a protected healthy
    replica on another schedulable node;
  * for a detached volume, exactly one schedulable node holding a healthy replica keeps one
    (preferring the node it was last attached to, then a node that already has one); if no
    schedulable node holds a healthy replica, every node holding one keeps its PDB;
  * unless `allow-node-drain-with-last-healthy-replica` is set;
  * with the autoscaler setting off, every instance manager has a PDB (the old behaviour).
  One manager per node runs engines and replicas (Longhorn >= 1.5 "aio"), so one PDB per node
  carries both the engine and the replica rules.
- Volumes with N replicas on distinct schedulable nodes. Their data lives here, one copy per
  replica: `write()` writes every healthy replica, `read()`/`checksum()` read one. A replica
  whose node is deleted fails and loses its copy; when no healthy copy remains, reads raise
  VolumeDataLost, so data loss is detectable.
- `attach(volume, node)` rebuilds a replica on that node if it has none (copying the data);
  while attached, missing replicas are rebuilt on other schedulable nodes up to N.
- Optional backing-image-manager pods (never marked safe to evict).

Simplifications: no status subresource on the CRDs (status is written with the object);
an instance-manager pod deleted from a node that is cordoned or tainted for deletion is not
recreated (the drain is taking the node away); a volume whose engine node disappears is
simply detached (the real one faults and is salvaged).
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any

import httpx

from sim.kube.kubeconfig import Endpoint

Obj = dict[str, Any]

GROUP = "longhorn.io"
VERSION = "v1beta2"
NAMESPACE = "longhorn-system"
SAFE_TO_EVICT = "cluster-autoscaler.kubernetes.io/safe-to-evict"
TO_BE_DELETED_TAINT = "ToBeDeletedByClusterAutoscaler"
SETTING_AUTOSCALER = "kubernetes-cluster-autoscaler-enabled"
SETTING_LAST_REPLICA = "allow-node-drain-with-last-healthy-replica"
LABEL_COMPONENT = "longhorn.io/component"
LABEL_NODE = "longhorn.io/node"
LABEL_MANAGED_BY = "longhorn.io/managed-by"
IM_COMPONENT = "instance-manager"
BIM_COMPONENT = "backing-image-manager"

_KINDS = {
    "volumes": "Volume",
    "replicas": "Replica",
    "engines": "Engine",
    "instancemanagers": "InstanceManager",
    "settings": "Setting",
    "backingimagemanagers": "BackingImageManager",
}


class LonghornError(Exception):
    pass


class VolumeDataLost(LonghornError):
    """No healthy replica of the volume remains: its data is gone."""


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _node_ready(node: Obj) -> bool:
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in (node.get("status") or {}).get("conditions") or []
    )


def node_schedulable(node: Obj) -> bool:
    """Longhorn's view: ready, not cordoned, not tainted by the autoscaler for deletion."""
    spec = node.get("spec") or {}
    if spec.get("unschedulable"):
        return False
    if any(t.get("key") == TO_BE_DELETED_TAINT for t in spec.get("taints") or []):
        return False
    return _node_ready(node)


@dataclass
class _Replica:
    name: str
    volume: str
    node: str
    data: bytes | None = None
    healthy_at: str = ""
    failed_at: str = ""

    @property
    def healthy(self) -> bool:
        return bool(self.healthy_at) and not self.failed_at


@dataclass
class _Volume:
    name: str
    replicas_wanted: int
    size: int
    state: str = "detached"
    node: str | None = None
    last_node: str | None = None
    started: bool = False  # replicas start (become healthy) on the first attach
    seq: int = 0
    replicas: list[_Replica] = field(default_factory=list)

    def healthy(self) -> list[_Replica]:
        return [r for r in self.replicas if r.healthy]

    def new_replica(self, node: str) -> _Replica:
        self.seq += 1
        rep = _Replica(name=f"{self.name}-r-{self.seq:03d}", volume=self.name, node=node)
        self.replicas.append(rep)
        return rep


class _Api:
    """Just enough of a Kubernetes client over httpx: JSON in, JSON out, 404 -> None."""

    def __init__(self, endpoint: Endpoint, timeout: float) -> None:
        self.http = httpx.Client(
            base_url=endpoint.url,
            headers={"Authorization": f"Bearer {endpoint.token}"},
            timeout=timeout,
            verify=endpoint.ssl_context(),
        )

    def close(self) -> None:
        self.http.close()

    def _check(self, r: httpx.Response, ok_missing: bool = False) -> Obj | None:
        if r.status_code == 404 and ok_missing:
            return None
        if r.status_code >= 400:
            raise LonghornError(f"{r.request.method} {r.request.url.path}: {r.status_code} {r.text[:300]}")
        return r.json()

    def get(self, path: str, **params: str) -> Obj | None:
        return self._check(self.http.get(path, params=params or None), ok_missing=True)

    def items(self, path: str, **params: str) -> list[Obj]:
        got = self.get(path, **params)
        return list((got or {}).get("items") or [])

    def create(self, path: str, body: Obj) -> Obj:
        r = self.http.post(path, json=body)
        if r.status_code == 409:
            existing = self.get(f"{path}/{body['metadata']['name']}")
            if existing is not None:
                return existing
        result = self._check(r)
        assert result is not None
        return result

    def put(self, path: str, body: Obj) -> Obj | None:
        """None on 409 (stale resourceVersion): the next pass retries from a fresh read."""
        r = self.http.put(path, json=body)
        if r.status_code == 409:
            return None
        return self._check(r)

    def merge_patch(self, path: str, body: Obj) -> Obj | None:
        r = self.http.patch(path, content=json.dumps(body), headers={"Content-Type": "application/merge-patch+json"})
        return self._check(r, ok_missing=True)

    def delete(self, path: str) -> None:
        self._check(self.http.delete(path), ok_missing=True)


def _crd(plural: str, kind: str) -> Obj:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{GROUP}", "labels": {LABEL_MANAGED_BY: "longhorn-manager"}},
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": {"plural": plural, "singular": kind.lower(), "kind": kind, "listKind": f"{kind}List"},
            "versions": [
                {
                    "name": VERSION,
                    "served": True,
                    "storage": True,
                    "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
                }
            ],
        },
    }


class FakeLonghorn:
    """The stand-in. Use `start()`/`stop()` (or `with`), then the volume API below."""

    def __init__(
        self,
        api_url: str,
        token: str,
        *,
        ca_pem: bytes | None = None,
        autoscaler_enabled: bool = True,
        allow_drain_with_last_healthy_replica: bool = False,
        interval: float = 0.1,
        timeout: float = 10.0,
    ) -> None:
        self.api = _Api(Endpoint(api_url, token, ca_pem), timeout)
        self.interval = interval
        self._initial_settings = {
            SETTING_AUTOSCALER: "true" if autoscaler_enabled else "false",
            SETTING_LAST_REPLICA: "true" if allow_drain_with_last_healthy_replica else "false",
        }
        self._lock = threading.RLock()
        self._volumes: dict[str, _Volume] = {}
        self._bim_nodes: set[str] = set()
        self._written: dict[str, str] = {}  # CR path -> JSON of spec+status last written
        self._objs: dict[str, Obj] = {}  # CR path -> the object as last written
        self._seen_im_nodes: set[str] = set()  # nodes that have had an instance-manager pod
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._installed = False
        self.passes = 0
        self.last_error: str | None = None
        self.errors = 0  # failed passes

    # ---- lifecycle ----------------------------------------------------------------------

    def install(self) -> None:
        """Namespace, CRDs and settings; idempotent."""
        if self._installed:
            return
        self.api.create("/api/v1/namespaces", {"metadata": {"name": NAMESPACE}})
        for plural, kind in _KINDS.items():
            self.api.create("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", _crd(plural, kind))
        for name, value in self._initial_settings.items():
            self.api.create(
                self._cr_path("settings"),
                {
                    "apiVersion": f"{GROUP}/{VERSION}",
                    "kind": "Setting",
                    "metadata": {"name": name, "namespace": NAMESPACE},
                    "value": value,
                },
            )
        self._installed = True

    @classmethod
    def from_kubeconfig(cls, path: str | Path, **kwargs: Any) -> FakeLonghorn:
        """Talk to the cluster a kubeconfig names (server, token and CA)."""
        endpoint = Endpoint.from_kubeconfig(path)
        return cls(endpoint.url, endpoint.token, ca_pem=endpoint.ca_pem, **kwargs)

    def start(self) -> FakeLonghorn:
        self.install()
        self.reconcile()
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="sim-longhorn", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join(timeout=10)
            self._thread = None
        self.api.close()

    def __enter__(self) -> FakeLonghorn:
        return self.start()

    def __exit__(self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.reconcile()
                self.last_error = None
            except Exception as exc:  # keep reconciling; the next pass starts from fresh reads
                self.last_error = repr(exc)
                self.errors += 1
            self._stop.wait(self.interval)

    # ---- the volume API (tests and the demo) --------------------------------------------

    def set_setting(self, name: str, value: bool) -> None:
        path = f"{self._cr_path('settings')}/{name}"
        self.api.merge_patch(path, {"value": "true" if value else "false"})

    def create_volume(self, name: str, replicas: int = 2, size: int = 1 << 30) -> list[str]:
        """Creates the volume and places its replicas on distinct schedulable nodes."""
        with self._lock:
            if name in self._volumes:
                raise LonghornError(f"volume {name} exists")
            vol = _Volume(name=name, replicas_wanted=replicas, size=size)
            nodes = sorted(n["metadata"]["name"] for n in self._nodes().values() if node_schedulable(n))
            for node in nodes[:replicas]:
                vol.new_replica(node)
            self._volumes[name] = vol
            return [r.node for r in vol.replicas]

    def attach(self, name: str, node: str) -> None:
        with self._lock:
            vol = self._vol(name)
            if vol.state == "attached":
                if vol.node == node:
                    return
                raise LonghornError(f"volume {name} is attached to {vol.node}")
            if self.api.get(f"/api/v1/nodes/{node}") is None:
                raise LonghornError(f"node {node} does not exist")
            if not vol.started:
                # First attach: the replicas start empty and become healthy.
                if not vol.replicas:
                    vol.new_replica(node)
                stamp = _now()
                for r in vol.replicas:
                    r.healthy_at, r.data = stamp, b""
                vol.started = True
            source = next(iter(vol.healthy()), None)
            if source is None:
                raise VolumeDataLost(f"volume {name} has no healthy replica")
            if not any(r.node == node and r.healthy for r in vol.replicas):
                rebuilt = vol.new_replica(node)
                rebuilt.data, rebuilt.healthy_at = source.data, _now()
            vol.state, vol.node, vol.last_node = "attached", node, node

    def detach(self, name: str) -> None:
        with self._lock:
            vol = self._vol(name)
            vol.state, vol.node = "detached", None

    def write(self, name: str, data: bytes) -> None:
        with self._lock:
            vol = self._vol(name)
            if vol.state != "attached":
                raise LonghornError(f"volume {name} is not attached")
            healthy = vol.healthy()
            if not healthy:
                raise VolumeDataLost(f"volume {name} has no healthy replica")
            for r in healthy:
                r.data = bytes(data)

    def read(self, name: str) -> bytes:
        with self._lock:
            vol = self._vol(name)
            healthy = vol.healthy()
            if not vol.started:
                return b""
            if not healthy:
                raise VolumeDataLost(f"volume {name} has no healthy replica: its data is lost")
            return healthy[0].data or b""

    def checksum(self, name: str) -> str:
        return hashlib.sha256(self.read(name)).hexdigest()

    def volume(self, name: str) -> Obj:
        """A snapshot: state, node and replicas as (node, healthy)."""
        with self._lock:
            vol = self._vol(name)
            return {
                "name": vol.name,
                "state": vol.state,
                "node": vol.node,
                "replicas": [(r.node, r.healthy) for r in vol.replicas],
            }

    def add_backing_image_manager(self, node: str) -> str:
        with self._lock:
            self._bim_nodes.add(node)
        return f"{BIM_COMPONENT}-{node}"

    def remove_backing_image_manager(self, node: str) -> None:
        with self._lock:
            self._bim_nodes.discard(node)

    def pdb_nodes(self) -> set[str]:
        """Nodes whose instance-manager PDB exists in the API server now."""
        pdbs = self.api.items(
            f"/apis/policy/v1/namespaces/{NAMESPACE}/poddisruptionbudgets",
            labelSelector=f"{LABEL_COMPONENT}={IM_COMPONENT}",
        )
        return {p["metadata"]["labels"][LABEL_NODE] for p in pdbs}

    def wait_until(self, predicate: Callable[[], bool], timeout: float = 30.0) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate():
                return True
            time.sleep(0.02)
        return predicate()

    def _vol(self, name: str) -> _Volume:
        vol = self._volumes.get(name)
        if vol is None:
            raise LonghornError(f"volume {name} not found")
        return vol

    # ---- reconcile ------------------------------------------------------------------------

    def _nodes(self) -> dict[str, Obj]:
        return {n["metadata"]["name"]: n for n in self.api.items("/api/v1/nodes")}

    def _setting(self, name: str) -> bool:
        obj = self.api.get(f"{self._cr_path('settings')}/{name}")
        value = (obj or {}).get("value", self._initial_settings.get(name, "false"))
        return str(value).lower() == "true"

    @staticmethod
    def _cr_path(plural: str) -> str:
        return f"/apis/{GROUP}/{VERSION}/namespaces/{NAMESPACE}/{plural}"

    def reconcile(self) -> None:
        """One pass: observe nodes and pods, update volumes, PDBs, pods and CRs."""
        with self._lock:
            self.install()
            nodes = self._nodes()
            schedulable = {n for n, obj in nodes.items() if node_schedulable(obj)}
            ca_enabled = self._setting(SETTING_AUTOSCALER)
            last_replica_ok = self._setting(SETTING_LAST_REPLICA)
            self._lose_gone_nodes(set(nodes))
            self._rebuild(schedulable)
            engines, replica_nodes = self._instances()
            im_pods = self._ensure_instance_managers(nodes, schedulable, engines, replica_nodes, ca_enabled)
            pdbs = self._current_pdbs()
            if ca_enabled:
                want = self._wanted_pdbs(set(nodes), schedulable, engines, replica_nodes, set(pdbs), last_replica_ok)
            else:
                want = set(nodes)
            want &= im_pods  # no instance manager pod, no PDB
            for node in sorted(want - set(pdbs)):  # create before delete: no unprotected gap
                self.api.create(f"/apis/policy/v1/namespaces/{NAMESPACE}/poddisruptionbudgets", self._pdb(node))
            for node in sorted(set(pdbs) - want):
                self.api.delete(f"/apis/policy/v1/namespaces/{NAMESPACE}/poddisruptionbudgets/{pdbs[node]}")
            self._ensure_backing_image_managers(nodes)
            self._mirror_crs()
            self.passes += 1

    def _lose_gone_nodes(self, existing: set[str]) -> None:
        stamp = _now()
        for vol in self._volumes.values():
            if vol.node is not None and vol.node not in existing:
                vol.state, vol.node = "detached", None  # the engine went with its node
            for r in vol.replicas:
                if r.node not in existing and not r.failed_at:
                    r.failed_at, r.data = stamp, None  # the disk went with the node

    def _rebuild(self, schedulable: set[str]) -> None:
        """An attached volume short of healthy replicas rebuilds them on free schedulable nodes."""
        for vol in self._volumes.values():
            if vol.state != "attached":
                continue
            healthy = vol.healthy()
            if not healthy:
                continue
            have = {r.node for r in healthy}
            for node in sorted(schedulable - have):
                if len(vol.healthy()) >= vol.replicas_wanted:
                    break
                rep = vol.new_replica(node)
                rep.data, rep.healthy_at = healthy[0].data, _now()
            if len(vol.healthy()) >= vol.replicas_wanted:
                vol.replicas = [r for r in vol.replicas if not r.failed_at]

    def _instances(self) -> tuple[dict[str, set[str]], dict[str, set[str]]]:
        """node -> volumes with an engine there; node -> volumes with a running replica there."""
        engines: dict[str, set[str]] = {}
        replicas: dict[str, set[str]] = {}
        for vol in self._volumes.values():
            if vol.state != "attached" or vol.node is None:
                continue
            engines.setdefault(vol.node, set()).add(vol.name)
            for r in vol.healthy():
                replicas.setdefault(r.node, set()).add(vol.name)
        return engines, replicas

    def _wanted_pdbs(
        self,
        existing: set[str],
        schedulable: set[str],
        engines: dict[str, set[str]],
        replica_nodes: dict[str, set[str]],
        current: set[str],
        last_replica_ok: bool,
    ) -> set[str]:
        want: set[str] = set(engines)
        for node in replica_nodes:
            if node in schedulable or node in engines:
                want.add(node)
        # Unschedulable nodes running only replicas keep their PDB unless each of their volumes
        # has a healthy replica on a schedulable node that has (or will have) a PDB.
        for node, vols in replica_nodes.items():
            if node in want or last_replica_ok:
                continue
            for name in vols:
                others = {r.node for r in self._volumes[name].healthy()} - {node}
                if not others & schedulable & want:
                    want.add(node)
                    break
        if last_replica_ok:
            return want
        for vol in sorted(self._volumes.values(), key=lambda v: v.name):
            if vol.state == "attached" or not vol.started:
                continue
            holders = {r.node for r in vol.healthy()} & existing
            if not holders:
                continue
            ok = holders & schedulable
            if not ok:
                want |= holders  # every last copy sits on a leaving node: hold them all
                continue
            if ok & want:
                continue  # already protected through another volume's or an instance's PDB
            if vol.last_node in ok:
                keeper = vol.last_node
            elif ok & current:
                keeper = sorted(ok & current)[0]
            else:
                keeper = sorted(ok)[0]
            want.add(keeper)
        return want

    def _current_pdbs(self) -> dict[str, str]:
        pdbs = self.api.items(
            f"/apis/policy/v1/namespaces/{NAMESPACE}/poddisruptionbudgets",
            labelSelector=f"{LABEL_COMPONENT}={IM_COMPONENT}",
        )
        return {p["metadata"]["labels"][LABEL_NODE]: p["metadata"]["name"] for p in pdbs}

    @staticmethod
    def _im_labels(node: str) -> dict[str, str]:
        return {LABEL_COMPONENT: IM_COMPONENT, LABEL_NODE: node, LABEL_MANAGED_BY: "longhorn-manager"}

    def _pdb(self, node: str) -> Obj:
        return {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": f"instance-manager-{node}", "namespace": NAMESPACE, "labels": self._im_labels(node)},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {LABEL_COMPONENT: IM_COMPONENT, LABEL_NODE: node}}},
        }

    def _ensure_instance_managers(
        self,
        nodes: dict[str, Obj],
        schedulable: set[str],
        engines: dict[str, set[str]],
        replica_nodes: dict[str, set[str]],
        ca_enabled: bool,
    ) -> set[str]:
        """One InstanceManager CR and pod per node; returns nodes whose pod exists."""
        pods = {
            p["metadata"]["labels"][LABEL_NODE]: p
            for p in self.api.items(
                f"/api/v1/namespaces/{NAMESPACE}/pods", labelSelector=f"{LABEL_COMPONENT}={IM_COMPONENT}"
            )
            if not p["metadata"].get("deletionTimestamp")
        }
        have: set[str] = set()
        for node in sorted(nodes):
            im = self._upsert_cr(
                "instancemanagers",
                f"instance-manager-{node}",
                {"nodeID": node, "type": "aio", "image": "longhornio/longhorn-instance-manager:sim"},
                self._im_status(node, engines, replica_nodes),
            )
            pod = pods.get(node)
            if pod is None:
                if node not in schedulable and node in self._seen_im_nodes:
                    continue  # drained away from a leaving node: let it go
                pod = self.api.create(f"/api/v1/namespaces/{NAMESPACE}/pods", self._im_pod(node, im, ca_enabled))
            else:
                annotated = (pod["metadata"].get("annotations") or {}).get(SAFE_TO_EVICT) == "true"
                if annotated != ca_enabled:
                    self.api.merge_patch(
                        f"/api/v1/namespaces/{NAMESPACE}/pods/{pod['metadata']['name']}",
                        {"metadata": {"annotations": {SAFE_TO_EVICT: "true" if ca_enabled else None}}},
                    )
            self._seen_im_nodes.add(node)
            have.add(node)
        self._seen_im_nodes &= set(nodes)
        prefix = f"{self._cr_path('instancemanagers')}/instance-manager-"
        for path in [p for p in self._written if p.startswith(prefix)]:
            if path[len(prefix) :] not in nodes:
                # Deleting the owner also garbage-collects a leftover pod.
                self._delete_cr("instancemanagers", f"instance-manager-{path[len(prefix) :]}")
        return have

    def _im_status(self, node: str, engines: dict[str, set[str]], replica_nodes: dict[str, set[str]]) -> Obj:
        eng = {f"{v}-e-0": {"spec": {"name": f"{v}-e-0"}} for v in sorted(engines.get(node, ()))}
        reps = {
            r.name: {"spec": {"name": r.name}}
            for v in sorted(replica_nodes.get(node, ()))
            for r in self._volumes[v].healthy()
            if r.node == node
        }
        return {"currentState": "running", "ownerID": node, "instanceEngines": eng, "instanceReplicas": reps}

    def _im_pod(self, node: str, im: Obj, ca_enabled: bool) -> Obj:
        annotations = {SAFE_TO_EVICT: "true"} if ca_enabled else {}
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": f"instance-manager-{node}",
                "namespace": NAMESPACE,
                "labels": self._im_labels(node),
                "annotations": annotations,
                "ownerReferences": [
                    {
                        "apiVersion": f"{GROUP}/{VERSION}",
                        "kind": "InstanceManager",
                        "name": im["metadata"]["name"],
                        "uid": im["metadata"]["uid"],
                        "controller": True,
                        "blockOwnerDeletion": True,
                    }
                ],
            },
            "spec": {
                "nodeName": node,
                "containers": [
                    {
                        "name": "instance-manager",
                        "image": "longhornio/longhorn-instance-manager:sim",
                        "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}},
                        "volumeMounts": [{"name": "dev", "mountPath": "/host/dev"}],
                    }
                ],
                # hostPath mounts: what Cluster Autoscaler calls local storage, which blocks a
                # scale-down unless the pod is annotated safe-to-evict (seed 003).
                "volumes": [{"name": "dev", "hostPath": {"path": "/dev"}}],
                "tolerations": [{"operator": "Exists"}],
            },
        }

    def _ensure_backing_image_managers(self, nodes: dict[str, Obj]) -> None:
        existing = {
            p["metadata"]["labels"][LABEL_NODE]: p["metadata"]["name"]
            for p in self.api.items(
                f"/api/v1/namespaces/{NAMESPACE}/pods", labelSelector=f"{LABEL_COMPONENT}={BIM_COMPONENT}"
            )
        }
        for node in sorted(self._bim_nodes & set(nodes)):
            if node in existing:
                continue
            owner = self._upsert_cr("backingimagemanagers", f"{BIM_COMPONENT}-{node}", {"nodeID": node}, {})
            self.api.create(
                f"/api/v1/namespaces/{NAMESPACE}/pods",
                {
                    "metadata": {
                        "name": f"{BIM_COMPONENT}-{node}",
                        "namespace": NAMESPACE,
                        # Never annotated safe-to-evict, so that its data is not lost: Longhorn
                        # keeps this node (seed 003).
                        "labels": {
                            LABEL_COMPONENT: BIM_COMPONENT,
                            LABEL_NODE: node,
                            LABEL_MANAGED_BY: "longhorn-manager",
                        },
                        "ownerReferences": [
                            {
                                "apiVersion": f"{GROUP}/{VERSION}",
                                "kind": "BackingImageManager",
                                "name": owner["metadata"]["name"],
                                "uid": owner["metadata"]["uid"],
                                "controller": True,
                            }
                        ],
                    },
                    "spec": {
                        "nodeName": node,
                        "containers": [
                            {
                                "name": "backing-image-manager",
                                "image": "longhornio/backing-image-manager:sim",
                                "resources": {"requests": {"cpu": "10m", "memory": "32Mi"}},
                            }
                        ],
                    },
                },
            )
        for node, pod in existing.items():
            if node not in self._bim_nodes:
                self.api.delete(f"/api/v1/namespaces/{NAMESPACE}/pods/{pod}")
                self._delete_cr("backingimagemanagers", f"{BIM_COMPONENT}-{node}")

    # ---- CR mirroring ---------------------------------------------------------------------

    def _upsert_cr(self, plural: str, name: str, spec: Obj, status: Obj) -> Obj:
        path = f"{self._cr_path(plural)}/{name}"
        fingerprint = json.dumps([spec, status], sort_keys=True)
        if self._written.get(path) == fingerprint and path in self._objs:
            return self._objs[path]
        current = self.api.get(path)
        body = {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": _KINDS[plural],
            "metadata": {"name": name, "namespace": NAMESPACE, "labels": {LABEL_MANAGED_BY: "longhorn-manager"}},
            "spec": spec,
            "status": status,
        }
        if current is None:
            obj = self.api.create(self._cr_path(plural), body)
        else:
            body["metadata"] = {**current["metadata"], **body["metadata"]}
            put = self.api.put(path, body)
            if put is None:  # someone wrote in between: retry on the next pass
                return current
            obj = put
        self._written[path] = fingerprint
        self._objs[path] = obj
        return obj

    def _delete_cr(self, plural: str, name: str) -> None:
        path = f"{self._cr_path(plural)}/{name}"
        self.api.delete(path)
        self._written.pop(path, None)
        self._objs.pop(path, None)

    def _mirror_crs(self) -> None:
        want: dict[str, set[str]] = {"volumes": set(), "replicas": set(), "engines": set()}
        for vol in self._volumes.values():
            healthy = len(vol.healthy())
            robustness = (
                "unknown"
                if not vol.started
                else "faulted"
                if healthy == 0
                else "degraded"
                if healthy < vol.replicas_wanted
                else "healthy"
            )
            self._upsert_cr(
                "volumes",
                vol.name,
                {"numberOfReplicas": vol.replicas_wanted, "size": str(vol.size), "nodeID": vol.node or ""},
                {"state": vol.state, "currentNodeID": vol.node or "", "robustness": robustness},
            )
            want["volumes"].add(vol.name)
            running = vol.state == "attached"
            for r in vol.replicas:
                state = "error" if r.failed_at else ("running" if running and r.healthy else "stopped")
                self._upsert_cr(
                    "replicas",
                    r.name,
                    {
                        "volumeName": vol.name,
                        "nodeID": r.node,
                        "healthyAt": r.healthy_at,
                        "failedAt": r.failed_at,
                        "desireState": "running" if running else "stopped",
                    },
                    {"currentState": state, "ownerID": r.node},
                )
                want["replicas"].add(r.name)
            if running and vol.node:
                self._upsert_cr(
                    "engines",
                    f"{vol.name}-e-0",
                    {"volumeName": vol.name, "nodeID": vol.node, "desireState": "running"},
                    {"currentState": "running", "ownerID": vol.node},
                )
                want["engines"].add(f"{vol.name}-e-0")
        for plural, names in want.items():
            prefix = f"{self._cr_path(plural)}/"
            for path in [p for p in self._written if p.startswith(prefix)]:
                if path[len(prefix) :] not in names:
                    self._delete_cr(plural, path[len(prefix) :])
