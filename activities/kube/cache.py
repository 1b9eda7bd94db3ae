"""What a worker keeps of each cluster it serves: one informer per kind the node loop reads
(pods, nodes, DaemonSets, PodDisruptionBudgets, NodeGroupsWithPriority, Longhorn's objects),
started on first use and kept for the worker's life.

Each worker replica keeps its own: the cache is process memory owned by the activities, never
state Temporal sees. A loop's observation names the resourceVersions it saw; the next one asks
for at least those (`fresh`), so a loop never acts on an older view than the one it acted on,
even when its activity lands on another replica whose watch lags (it waits for the watch up
to `WAIT_S`, then lists that kind).
"""

from __future__ import annotations

import os
import threading
import uuid
from collections.abc import Callable, Iterable
from typing import Any

from kubernetes import client

from activities.kube.informer import Index, Informer, Obj, wait_fresh
from scaling.kube.models import NodeInfo, PodInfo
from scaling.kube.nodes import node_info
from scaling.kube.pods import is_unschedulable, pod_info, pod_info_rebound
from scaling.nodes.models import CRD_GROUP, CRD_VERSION

NODE_GROUP_PLURAL = "nodegroupswithpriority"
LONGHORN_GROUP, LONGHORN_VERSION = "longhorn.io", "v1beta2"
LONGHORN_PLURALS = ("volumes", "replicas", "engines", "instancemanagers")
SYNC_TIMEOUT_S = 50.0  # the first list of 30,000 pods on a busy machine; the observe activity allows 60 s
WAIT_S = 2.0  # how long a reader waits for a lagging watch before it lists instead


class PodIndex(Index):
    """Pods by node, the unschedulable ones, the running count, and each pod's PodInfo (made on
    first read after a change): what an observation needs without walking every pod."""

    def __init__(self) -> None:
        self.by_node: dict[str, set[str]] = {}
        self.unschedulable: set[str] = set()
        self.running: set[str] = set()
        self.infos: dict[str, PodInfo] = {}
        self.dirty_nodes: set[str] = set()  # nodes whose NodeInfo must be made again
        # Pods that became unschedulable so far (a relist counts its pending pods again): a
        # reader that remembers the count it saw can tell when new ones came
        # (activities.nodes.wake).
        self.unschedulable_added = 0

    def reset(self, items: dict[str, Obj]) -> None:
        self.by_node, self.unschedulable, self.running, self.infos = {}, set(), set(), {}
        self.dirty_nodes = {"*"}
        for key, pod in items.items():
            self._add(key, pod)
        self.unschedulable_added += len(self.unschedulable)

    def changed(self, key: str, old: Obj | None, new: Obj | None) -> None:
        was_unschedulable = key in self.unschedulable
        if old is not None:
            node = (old.get("spec") or {}).get("nodeName")
            if node:
                on = self.by_node.get(node)
                if on is not None:
                    on.discard(key)
                    if not on:
                        del self.by_node[node]
                self.dirty_nodes.add(node)
            self.unschedulable.discard(key)
            self.running.discard(key)
            info = self.infos.pop(key, None)
            if info is not None and new is not None and (rebound := pod_info_rebound(info, old, new)) is not None:
                self.infos[key] = rebound
        if new is not None:
            self._add(key, new)
            if not was_unschedulable and key in self.unschedulable:
                self.unschedulable_added += 1

    def _add(self, key: str, pod: Obj) -> None:
        node = (pod.get("spec") or {}).get("nodeName")
        if node:
            self.by_node.setdefault(node, set()).add(key)
            self.dirty_nodes.add(node)
        if (pod.get("status") or {}).get("phase") == "Running":
            self.running.add(key)
        if is_unschedulable(pod):
            self.unschedulable.add(key)


class NodeIndex(Index):
    """Which nodes changed since their NodeInfo was last made."""

    def __init__(self) -> None:
        self.dirty: set[str] = {"*"}

    def reset(self, items: dict[str, Obj]) -> None:
        self.dirty = {"*"}

    def changed(self, key: str, old: Obj | None, new: Obj | None) -> None:
        self.dirty.add(key)


class ClusterCache:
    """The informers of one cluster and the views built from them."""

    def __init__(self, api: client.ApiClient) -> None:
        self.api = api
        self._informers: dict[str, Informer] = {}
        self._lock = threading.Lock()
        self.pod_index = PodIndex()
        self.node_index = NodeIndex()
        self._node_infos: dict[str, NodeInfo] = {}
        self._node_infos_lock = threading.Lock()

    def _calls(self) -> dict[str, tuple[Callable[..., Any], Index | None]]:
        core, custom = client.CoreV1Api(self.api), client.CustomObjectsApi(self.api)
        apps, policy = client.AppsV1Api(self.api), client.PolicyV1Api(self.api)

        def crd(group: str, version: str, plural: str) -> Callable[..., Any]:
            def call(**kw: Any) -> Any:
                return custom.list_cluster_custom_object(group, version, plural, **kw)

            return call

        calls: dict[str, tuple[Callable[..., Any], Index | None]] = {
            "pods": (core.list_pod_for_all_namespaces, self.pod_index),
            "nodes": (core.list_node, self.node_index),
            "daemonsets": (apps.list_daemon_set_for_all_namespaces, None),
            "poddisruptionbudgets": (policy.list_pod_disruption_budget_for_all_namespaces, None),
            # What the scheduler's filters read beyond pods and nodes (namespaceSelector, volumes).
            "namespaces": (core.list_namespace, None),
            "persistentvolumes": (core.list_persistent_volume, None),
            "persistentvolumeclaims": (core.list_persistent_volume_claim_for_all_namespaces, None),
            "storageclasses": (client.StorageV1Api(self.api).list_storage_class, None),
            NODE_GROUP_PLURAL: (crd(CRD_GROUP, CRD_VERSION, NODE_GROUP_PLURAL), None),
        }
        for plural in LONGHORN_PLURALS:
            calls[plural] = (crd(LONGHORN_GROUP, LONGHORN_VERSION, plural), None)
        return calls

    def informer(self, kind: str) -> Informer:
        with self._lock:
            inf = self._informers.get(kind)
            if inf is None:
                call, index = self._calls()[kind]
                inf = self._informers[kind] = Informer(kind, call, index).start()
        return inf

    def read(self, kinds: Iterable[str], fresh: dict[str, str] | None = None) -> dict[str, Informer]:
        """The informers of `kinds`, synced and at least as new as `fresh` names (kind ->
        resourceVersion). An absent kind (its CRD not installed) reads as absent until the
        informer's next try finds it (ABSENT_RETRY_S); a sync that takes too long fails the
        activity, which retries."""
        out = {}
        for kind in kinds:
            inf = self.informer(kind)
            if not inf.wait_synced(SYNC_TIMEOUT_S):
                raise TimeoutError(f"{kind}: the first list did not finish in {SYNC_TIMEOUT_S:.0f}s")
            if not inf.absent:
                wait_fresh(inf, (fresh or {}).get(kind), WAIT_S)
            out[kind] = inf
        return out

    def node_infos(self, nodes: Informer, pods: Informer) -> list[NodeInfo]:
        """Every node's NodeInfo; made again only for nodes that changed or whose pods did."""
        with self._node_infos_lock, nodes.cond, pods.cond:
            dirty = self.node_index.dirty | self.pod_index.dirty_nodes
            self.node_index.dirty, self.pod_index.dirty_nodes = set(), set()
            if "*" in dirty:
                self._node_infos = {}
                dirty = set(nodes.items)
            for name in dirty:
                node = nodes.items.get(name)
                if node is None:
                    self._node_infos.pop(name, None)
                    continue
                on = [pods.items[k] for k in self.pod_index.by_node.get(name, ()) if k in pods.items]
                self._node_infos[name] = node_info(node, on)
            return [self._node_infos[n] for n in nodes.items if n in self._node_infos]

    def pod_infos(self, pods: Informer, keys: Iterable[str] | None = None) -> list[PodInfo]:
        """PodInfo of `keys` (default: every pod), made once per change of the pod."""
        with pods.cond:
            infos = self.pod_index.infos
            out = []
            for key in pods.items if keys is None else keys:
                info = infos.get(key)
                if info is None:
                    pod = pods.items.get(key)
                    if pod is None:
                        continue
                    info = infos[key] = pod_info(pod)
                out.append(info)
            return out

    def close(self) -> None:
        with self._lock:
            informers, self._informers = list(self._informers.values()), {}
        for inf in informers:
            inf.stop()


# Names this process in views: a view taken by another worker replica (or before a restart)
# never equals one taken here.
PROCESS = uuid.uuid4().hex[:12]


def scale_down_kinds(node_groups_file: str | None) -> list[str]:
    """The kinds a scale-down evaluation reads (node groups from the file when there is one)."""
    return ["pods", "nodes", "poddisruptionbudgets", *LONGHORN_PLURALS] + (
        [] if node_groups_file else [NODE_GROUP_PLURAL]
    )


def view(informers: dict[str, Informer], node_groups_file: str | None = None) -> str:
    """What these informers hold, as a token: equal tokens mean no object of these kinds changed
    in between (the same informers, at the same generations, in this process). Bookmarks do not
    change it. Read it before the objects: a change in between then makes the token older."""
    parts = [PROCESS, *(f"{inf.serial}.{inf.generation}" for _, inf in sorted(informers.items()))]
    if node_groups_file:
        st = os.stat(node_groups_file)
        parts.append(f"{st.st_mtime_ns}.{st.st_size}")
    return ":".join(parts)


def versions(informers: dict[str, Informer]) -> dict[str, str]:
    """kind -> the resourceVersion the reader saw, for the next reader's `fresh`."""
    return {kind: inf.rv_text for kind, inf in informers.items() if inf.rv_text and not inf.absent}


class ClusterCaches:
    """One ClusterCache per cluster name, built on first use from the cluster's client."""

    def __init__(self, api_of: Callable[[str], client.ApiClient]) -> None:
        self.api_of = api_of
        self._caches: dict[str, ClusterCache] = {}
        self._lock = threading.Lock()

    def __call__(self, cluster: str) -> ClusterCache:
        api = self.api_of(cluster)
        with self._lock:
            cache = self._caches.get(cluster)
            if cache is None:
                # Cluster names that share one client (settings.kubernetes) share one cache.
                cache = next((c for c in self._caches.values() if c.api is api), None) or ClusterCache(api)
                self._caches[cluster] = cache
            return cache

    def close(self) -> None:
        with self._lock:
            caches, self._caches = {id(c): c for c in self._caches.values()}.values(), {}
        for cache in caches:
            cache.close()
