"""A tidb-operator stand-in: TidbCluster (pingcap.com/v1alpha1) -> pd, tikv and tidb pods.

For each component with a spec (`spec.pd`, `spec.tikv`, `spec.tidb`) it keeps pods named
`<tc>-<component>-<ordinal>` for ordinals 0..replicas-1, like the StatefulSets the real
operator makes: scaling out fills the lowest missing ordinals, scaling in deletes the highest.
Pods carry tidb-operator's labels (`app.kubernetes.io/name: tidb-cluster`,
`app.kubernetes.io/managed-by: tidb-operator`, `app.kubernetes.io/instance: <tc>`,
`app.kubernetes.io/component: <component>`), every `tidb.pingcap.com/*` label of their
TidbCluster, the component's requests/limits (storage is a volume, not a container request)
and its nodeSelector/tolerations; they are owned by the TidbCluster, so deleting it deletes
them. The scheduler and KWOK of sim/kube then place and start them.

Status per component: `status.<component>.phase` (Normal, or Scale while pods are missing or
extra) and `status.<component>.statefulSet` {replicas, readyReplicas, currentReplicas,
updatedReplicas}, the fields the real operator mirrors from its StatefulSets; `replicas`
counts the pods that exist, including those still being removed.

Scaling TiKV in is not instant on a real cluster: PD first moves the store's regions away
(the store is Offline), and only a Tombstone store's pod is deleted. With `tikv_offline_s` > 0
a running TiKV pod above the wanted replicas is annotated `tidb.sim/store-state: Offline` and
deleted that many seconds later; the fake PD reports its store as Offline meanwhile.

Simplifications: no rolling update (a changed template applies to new pods only), no PVCs, no
PD membership or store lifecycle (the fake PD in sim/tidb/pd.py derives stores from pods).
"""

from __future__ import annotations

import time
from collections import defaultdict
from typing import Any

from sim.kube.actor import Actor
from sim.kube.errors import ApiError
from sim.kube.store import Obj, ResourceType, Store, clone

GROUP = "pingcap.com"
VERSION = "v1alpha1"
TC_PLURAL = "tidbclusters"
TAC_PLURAL = "tidbclusterautoscalers"
COMPONENTS = ("pd", "tikv", "tidb")
LABEL_NAME = "app.kubernetes.io/name"
LABEL_MANAGED_BY = "app.kubernetes.io/managed-by"
LABEL_INSTANCE = "app.kubernetes.io/instance"
LABEL_COMPONENT = "app.kubernetes.io/component"
COPIED_LABEL_PREFIX = "tidb.pingcap.com/"
DEFAULT_VERSION = "v8.5.0"
STORE_STATE_ANNOTATION = "tidb.sim/store-state"


def pod_name(cluster: str, component: str, ordinal: int) -> str:
    return f"{cluster}-{component}-{ordinal}"


def ordinal_of(name: str, cluster: str, component: str) -> int | None:
    prefix = f"{cluster}-{component}-"
    tail = name[len(prefix) :] if name.startswith(prefix) else ""
    return int(tail) if tail.isdigit() else None


def _ready(pod: Obj) -> bool:
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in (pod.get("status") or {}).get("conditions") or []
    )


def _replicas(spec: Obj) -> int:
    try:
        return max(0, int(spec.get("replicas", 0)))
    except (TypeError, ValueError):
        return 0


def _container_resources(spec: Obj) -> Obj:
    """tidb-operator's ComponentSpec inlines ResourceRequirements: spec.<c>.requests / limits."""
    out: Obj = {}
    for key in ("requests", "limits"):
        values = {k: v for k, v in (spec.get(key) or {}).items() if k != "storage"}
        if values:
            out[key] = values
    return out


class TidbOperator(Actor):
    name = "tidb-operator"

    def __init__(self, store: Store, interval: float = 0.1, tikv_offline_s: float = 0.0) -> None:
        super().__init__(lambda: interval)
        self.store = store
        self.pods = store.builtin("pods")
        self.tikv_offline_s = tikv_offline_s
        self._last_rv = -1
        self._offline: dict[str, float] = {}  # TiKV pod uid -> when its store went Offline

    def tc_type(self) -> ResourceType | None:
        """None until the TidbCluster CRD is installed."""
        return self.store.lookup(GROUP, VERSION, TC_PLURAL)

    def step(self) -> None:
        rt = self.tc_type()
        if rt is None or (self.store.rv == self._last_rv and not self._offline):
            return
        self._last_rv = self.store.rv
        owned: dict[str, list[Obj]] = defaultdict(list)
        pods = self.store.all(self.pods)
        live = {p["metadata"]["uid"] for p in pods}
        self._offline = {uid: t for uid, t in self._offline.items() if uid in live}
        for pod in pods:
            for ref in pod["metadata"].get("ownerReferences") or []:
                if ref.get("controller") and ref.get("kind") == "TidbCluster":
                    owned[ref.get("uid", "")].append(pod)
        for tc in self.store.all(rt):
            if tc["metadata"].get("deletionTimestamp"):
                continue
            self.sync(rt, tc, owned.get(tc["metadata"]["uid"], []))

    def sync(self, rt: ResourceType, tc: Obj, pods: list[Obj]) -> None:
        meta, spec = tc["metadata"], tc.get("spec") or {}
        ns, name = meta["namespace"], meta["name"]
        status: Obj = {}
        for component in COMPONENTS:
            mine = [p for p in pods if (p["metadata"].get("labels") or {}).get(LABEL_COMPONENT) == component]
            cspec = spec.get(component)
            if not isinstance(cspec, dict):
                for pod in mine:  # the component was removed from the spec
                    self._delete(ns, pod["metadata"]["name"])
                continue
            want = _replicas(cspec)
            by_ordinal = {ordinal_of(p["metadata"]["name"], name, component): p for p in mine}
            for ordinal, pod in by_ordinal.items():
                if ordinal is None or ordinal >= want:
                    self._remove(ns, component, pod)
            for ordinal in range(want):
                if ordinal not in by_ordinal:
                    self._create(ns, self._pod(tc, component, cspec, ordinal))
                elif by_ordinal[ordinal]["metadata"]["uid"] in self._offline:
                    self._back_up(ns, by_ordinal[ordinal])
            ready = sum(1 for p in mine if _ready(p))
            status[component] = {
                "phase": "Normal" if len(mine) == want else "Scale",
                "statefulSet": {
                    "replicas": len(mine),
                    "readyReplicas": ready,
                    "currentReplicas": len(mine),
                    "updatedReplicas": len(mine),
                },
            }

        def update(current: Obj) -> Obj:
            merged = {**(current.get("status") or {}), **status}
            for component in COMPONENTS:
                if component not in status:
                    merged.pop(component, None)
            merged["observedGeneration"] = current["metadata"].get("generation", 1)
            current["status"] = merged
            return current

        self.store.mutate(rt, ns, name, update, "status")

    def _pod(self, tc: Obj, component: str, cspec: Obj, ordinal: int) -> Obj:
        meta, spec = tc["metadata"], tc.get("spec") or {}
        labels = {k: v for k, v in (meta.get("labels") or {}).items() if k.startswith(COPIED_LABEL_PREFIX)}
        labels.update(
            {
                LABEL_NAME: "tidb-cluster",
                LABEL_MANAGED_BY: "tidb-operator",
                LABEL_INSTANCE: meta["name"],
                LABEL_COMPONENT: component,
            }
        )
        version = cspec.get("version") or spec.get("version") or DEFAULT_VERSION
        container: Obj = {"name": component, "image": f"pingcap/{component}:{version}"}
        resources = _container_resources(cspec)
        if resources:
            container["resources"] = resources
        pod_spec: Obj = {
            "containers": [container],
            "hostname": pod_name(meta["name"], component, ordinal),
            "subdomain": f"{meta['name']}-{component}-peer",
        }
        selector = {**(spec.get("nodeSelector") or {}), **(cspec.get("nodeSelector") or {})}
        if selector:
            pod_spec["nodeSelector"] = selector
        tolerations = list(spec.get("tolerations") or []) + list(cspec.get("tolerations") or [])
        if tolerations:
            pod_spec["tolerations"] = clone(tolerations)
        return {
            "metadata": {
                "name": pod_name(meta["name"], component, ordinal),
                "namespace": meta["namespace"],
                "labels": labels,
                "ownerReferences": [
                    {
                        "apiVersion": f"{GROUP}/{VERSION}",
                        "kind": "TidbCluster",
                        "name": meta["name"],
                        "uid": meta["uid"],
                        "controller": True,
                        "blockOwnerDeletion": True,
                    }
                ],
            },
            "spec": pod_spec,
        }

    def _remove(self, ns: str, component: str, pod: Obj) -> None:
        """Delete a pod above the wanted replicas; a running TiKV's store goes Offline first."""
        if component != "tikv" or self.tikv_offline_s <= 0 or not _ready(pod):
            self._delete(ns, pod["metadata"]["name"])
            return
        now = time.monotonic()
        since = self._offline.setdefault(pod["metadata"]["uid"], now)
        if since == now:

            def offline(current: Obj) -> Obj:
                current["metadata"].setdefault("annotations", {})[STORE_STATE_ANNOTATION] = "Offline"
                return current

            self.store.mutate(self.pods, ns, pod["metadata"]["name"], offline)
        elif now - since >= self.tikv_offline_s:
            self._delete(ns, pod["metadata"]["name"])

    def _back_up(self, ns: str, pod: Obj) -> None:
        """Wanted again before it went: its store comes back Up."""
        del self._offline[pod["metadata"]["uid"]]

        def up(current: Obj) -> Obj:
            (current["metadata"].get("annotations") or {}).pop(STORE_STATE_ANNOTATION, None)
            return current

        self.store.mutate(self.pods, ns, pod["metadata"]["name"], up)

    def _create(self, ns: str, body: Obj) -> None:
        try:
            self.store.create(self.pods, ns, body)
        except ApiError:
            pass  # the old pod of that ordinal is still going away: the next pass retries

    def _delete(self, ns: str, name: str) -> None:
        try:
            self.store.delete(self.pods, ns, name)
        except ApiError:
            pass


def cluster_of(pod: Obj) -> str | None:
    """The TidbCluster a pod belongs to (its app.kubernetes.io/instance label)."""
    labels = pod["metadata"].get("labels") or {}
    if labels.get(LABEL_MANAGED_BY) != "tidb-operator":
        return None
    return labels.get(LABEL_INSTANCE)


def component_of(pod: Obj) -> str | None:
    return (pod["metadata"].get("labels") or {}).get(LABEL_COMPONENT)


def base_of(tc: Obj) -> tuple[str, str]:
    """(namespace, name) of the cluster whose PD this TidbCluster joins.

    A heterogeneous cluster made by an autoscaler refers to its base with spec.cluster (as the
    real operator does); the label tidb.pingcap.com/base-tc is the fallback."""
    meta, spec = tc["metadata"], tc.get("spec") or {}
    ref = spec.get("cluster") or {}
    if isinstance(ref, dict) and ref.get("name"):
        return ref.get("namespace") or meta["namespace"], ref["name"]
    base = (meta.get("labels") or {}).get("tidb.pingcap.com/base-tc")
    return meta["namespace"], base or meta["name"]


def tidb_clusters(store: Store) -> list[Obj]:
    rt = store.lookup(GROUP, VERSION, TC_PLURAL)
    return store.all(rt) if rt is not None else []


def config_labels(tc: Obj, component: str) -> dict[str, str]:
    """Store/server labels the component is configured with (what PD sees on its instances).

    TiKV: spec.tikv.config.server.labels; TiDB: spec.tidb.config.labels. tidb-operator writes
    them as nested objects ("server.labels.group" -> {"server": {"labels": {"group": ...}}});
    dotted keys at the top of config are accepted too."""
    cspec = (tc.get("spec") or {}).get(component) or {}
    config = cspec.get("config") if isinstance(cspec, dict) else None
    if not isinstance(config, dict):
        return {}
    path = ("server", "labels") if component == "tikv" else ("labels",)
    node: Any = config
    for key in path:
        node = node.get(key) if isinstance(node, dict) else None
    labels = {str(k): str(v) for k, v in node.items()} if isinstance(node, dict) else {}
    dotted = ".".join(path) + "."
    for key, value in config.items():
        if isinstance(key, str) and key.startswith(dotted):
            labels[key[len(dotted) :]] = str(value)
    return labels
