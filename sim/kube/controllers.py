"""Minimal workload controllers: Deployment -> ReplicaSet -> Pods, DaemonSets, and the
disruption controller's PodDisruptionBudget status writes.

Deliberately small: a Deployment keeps one ReplicaSet per pod-template hash and scales the
others to zero at once (a Recreate-style rollout, no surge accounting). A ReplicaSet keeps
`replicas` live pods and, scaling down, deletes as the real controller ranks them
(kubernetes/kubernetes pkg/controller/controller_utils.go, ActivePodsWithRanks.Less): unscheduled
before scheduled, pending before running, not-ready before ready, lower
`controller.kubernetes.io/pod-deletion-cost` first, then pods doubled up on a node with more of
the ReplicaSet's pods first, then newest first (ready time and restarts are not modelled).
DaemonSet pods tolerate every taint and are created with spec.nodeName set, bypassing the
scheduler; nodeSelector and required node affinity of the template are honoured.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter, defaultdict
from collections.abc import Callable
from typing import Any

from sim.kube.actor import Actor
from sim.kube.errors import ApiError
from sim.kube.follow import Follower
from sim.kube.scheduler import affinity_matches
from sim.kube.store import Obj, ResourceType, Store, clone

TEMPLATE_HASH = "pod-template-hash"


def _controller_uid(obj: Obj) -> str | None:
    for ref in obj["metadata"].get("ownerReferences") or []:
        if ref.get("controller"):
            return ref.get("uid")
    return None


def _owner_ref(owner: Obj, kind: str) -> Obj:
    return {
        "apiVersion": "apps/v1",
        "kind": kind,
        "name": owner["metadata"]["name"],
        "uid": owner["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def _active(pod: Obj) -> bool:
    return (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed") and not pod["metadata"].get(
        "deletionTimestamp"
    )


def _ready(pod: Obj) -> bool:
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in (pod.get("status") or {}).get("conditions") or []
    )


def template_hash(template: Obj) -> str:
    digest = hashlib.sha256(json.dumps(template, sort_keys=True).encode()).hexdigest()
    return "".join(c for c in digest if c in "bcdfghjklmnpqrstvwxz2456789")[:10] or digest[:10]


class OwnedPods:
    """Pods by controller uid, and which of them are active and ready, kept from the store's
    events as kube-controller-manager's informers keep them: a step reads the counts of a
    30,000-pod ReplicaSet without walking its pods (walking every pod ten times a second was a
    fifth of the simulator's CPU in a burst)."""

    def __init__(self, store: Store, pods: ResourceType) -> None:
        self.store, self.pods = store, pods
        self.owned: dict[str, set[tuple[str, str]]] = defaultdict(set)
        self.active: dict[str, set[tuple[str, str]]] = defaultdict(set)
        self.ready: dict[str, set[tuple[str, str]]] = defaultdict(set)  # active and Ready
        self.follower = Follower(store, pods.gr, self._reset, self._changed)

    def catch_up(self) -> None:
        self.follower.catch_up()

    def of(self, uid: str) -> list[Obj]:
        """The stored pods a controller owns (read-only)."""
        return self._objects(self.owned.get(uid, ()))

    def active_of(self, uid: str) -> list[Obj]:
        return self._objects(self.active.get(uid, ()))

    def _objects(self, keys: Any) -> list[Obj]:
        with self.store.lock:
            bucket = self.store.storage[self.pods.gr]
            return [obj for obj in (bucket.get(k) for k in list(keys)) if obj is not None]

    def _reset(self, pods: list[Obj]) -> None:
        self.owned, self.active, self.ready = defaultdict(set), defaultdict(set), defaultdict(set)
        for pod in pods:
            self._changed(None, pod)

    @staticmethod
    def _state(pod: Obj | None) -> tuple[str | None, bool, bool]:
        if pod is None:
            return None, False, False
        active = _active(pod)
        return _controller_uid(pod), active, active and _ready(pod)

    def _changed(self, old: Obj | None, new: Obj | None) -> None:
        if old is not None and new is not None and self._state(old) == self._state(new):
            return  # same owner, still as active and ready: most pod events (a bind, a mark)
        if old is not None:
            uid = _controller_uid(old)
            if uid:
                key = (old["metadata"].get("namespace", ""), old["metadata"]["name"])
                for index in (self.owned, self.active, self.ready):
                    keys = index.get(uid)
                    if keys is not None:
                        keys.discard(key)
                        if not keys:
                            del index[uid]
        if new is not None:
            uid = _controller_uid(new)
            if uid:
                key = (new["metadata"].get("namespace", ""), new["metadata"]["name"])
                self.owned[uid].add(key)
                if _active(new):
                    self.active[uid].add(key)
                    if _ready(new):
                        self.ready[uid].add(key)


DELETION_COST = "controller.kubernetes.io/pod-deletion-cost"


def _deletion_cost(pod: Obj) -> int:
    try:
        return int((pod["metadata"].get("annotations") or {}).get(DELETION_COST, 0))
    except ValueError:  # not an integer: the real API server refuses the pod; here it costs 0
        return 0


def _deletion_rank(pods: list[Obj], order: Callable[[Obj], int]) -> Callable[[Obj], tuple[Any, ...]]:
    """The sort key of a ReplicaSet's scale-down: the first pods go first."""
    on_node = Counter(p["spec"].get("nodeName") for p in pods if p["spec"].get("nodeName"))
    return lambda p: (
        bool(p["spec"].get("nodeName")),
        p["status"].get("phase") == "Running",
        _ready(p),
        _deletion_cost(p),
        -on_node.get(p["spec"].get("nodeName"), 0),
        -order(p),
    )


class Controllers(Actor):
    name = "controllers"

    def __init__(self, store: Store, interval: float = 0.1) -> None:
        super().__init__(lambda: interval)
        self.store = store
        self._last_rv = -1
        self.pods = store.builtin("pods")
        self.nodes = store.builtin("nodes")
        self.deployments = store.builtin("deployments", "apps")
        self.replicasets = store.builtin("replicasets", "apps")
        self.daemonsets = store.builtin("daemonsets", "apps")
        self.pdbs = store.builtin("poddisruptionbudgets", "policy")
        self.owned = OwnedPods(store, self.pods)

    def step(self) -> None:
        if self.store.rv == self._last_rv:
            return
        self._last_rv = self.store.rv
        self.sync_deployments()
        self.owned.catch_up()
        self.sync_replicasets()
        self.sync_daemonsets()
        self.sync_pdbs()

    def _set_status(self, rt: ResourceType, obj: Obj, status: Obj) -> None:
        def update(current: Obj) -> Obj:
            current["status"] = {**(current.get("status") or {}), **status}
            return current

        self.store.mutate(rt, obj["metadata"]["namespace"], obj["metadata"]["name"], update, "status")

    def _create(self, rt: ResourceType, ns: str, body: Obj) -> None:
        try:
            self.store.create(rt, ns, body)
        except ApiError:
            pass  # namespace going away or a name race: the next pass retries

    def _delete(self, rt: ResourceType, obj: Obj) -> None:
        try:
            self.store.delete(rt, obj["metadata"]["namespace"], obj["metadata"]["name"])
        except ApiError:
            pass

    # ---- deployments ----------------------------------------------------------------------
    def sync_deployments(self) -> None:
        by_owner: dict[str, list[Obj]] = defaultdict(list)
        for rs in self.store.all(self.replicasets):
            uid = _controller_uid(rs)
            if uid:
                by_owner[uid].append(rs)
        for deploy in self.store.all(self.deployments):
            meta, spec = deploy["metadata"], deploy.get("spec") or {}
            ns, name = meta["namespace"], meta["name"]
            template = clone(spec.get("template") or {})
            desired = int(spec.get("replicas", 1))
            pod_hash = template_hash(template)
            rs_name = f"{name}-{pod_hash}"
            owned = by_owner.get(meta["uid"], [])
            current = next((rs for rs in owned if rs["metadata"]["name"] == rs_name), None)
            if current is None:
                template.setdefault("metadata", {}).setdefault("labels", {})[TEMPLATE_HASH] = pod_hash
                selector = clone(spec.get("selector") or {})
                selector.setdefault("matchLabels", {})[TEMPLATE_HASH] = pod_hash
                self._create(
                    self.replicasets,
                    ns,
                    {
                        "metadata": {
                            "name": rs_name,
                            "namespace": ns,
                            "labels": template["metadata"]["labels"],
                            "ownerReferences": [_owner_ref(deploy, "Deployment")],
                        },
                        "spec": {"replicas": desired, "selector": selector, "template": template},
                    },
                )
            for rs in owned:
                want = desired if rs["metadata"]["name"] == rs_name else 0
                if int((rs.get("spec") or {}).get("replicas", 1)) != want:

                    def scale(obj: Obj, want: int = want) -> Obj:
                        obj["spec"]["replicas"] = want
                        return obj

                    self.store.mutate(self.replicasets, ns, rs["metadata"]["name"], scale)
            statuses = [rs.get("status") or {} for rs in owned]
            new_status = (current or {}).get("status") or {}
            self._set_status(
                self.deployments,
                deploy,
                {
                    "observedGeneration": meta.get("generation", 1),
                    "replicas": sum(s.get("replicas", 0) for s in statuses),
                    "readyReplicas": sum(s.get("readyReplicas", 0) for s in statuses),
                    "availableReplicas": sum(s.get("availableReplicas", 0) for s in statuses),
                    "updatedReplicas": new_status.get("replicas", 0),
                    "unavailableReplicas": max(0, desired - sum(s.get("availableReplicas", 0) for s in statuses)),
                },
            )

    # ---- replicasets ----------------------------------------------------------------------
    def sync_replicasets(self) -> None:
        for rs in self.store.all(self.replicasets):
            meta, spec = rs["metadata"], rs.get("spec") or {}
            desired = int(spec.get("replicas", 1))
            active = len(self.owned.active.get(meta["uid"], ()))
            ready = len(self.owned.ready.get(meta["uid"], ()))
            if active < desired:
                template = spec.get("template") or {}
                for _ in range(desired - active):
                    tmeta = template.get("metadata") or {}
                    self._create(
                        self.pods,
                        meta["namespace"],
                        {
                            "metadata": {
                                "generateName": f"{meta['name']}-",
                                "namespace": meta["namespace"],
                                "labels": clone(tmeta.get("labels") or {}),
                                "annotations": clone(tmeta.get("annotations") or {}),
                                "ownerReferences": [_owner_ref(rs, "ReplicaSet")],
                            },
                            "spec": clone(template.get("spec") or {}),
                        },
                    )
            elif active > desired:
                pods = self.owned.active_of(meta["uid"])
                ranked = sorted(pods, key=_deletion_rank(pods, self.store.order))
                for pod in ranked[: len(pods) - desired]:
                    self._delete(self.pods, pod)
                pods = ranked[len(pods) - desired :]
                active, ready = len(pods), sum(1 for p in pods if _ready(p))
            self._set_status(
                self.replicasets,
                rs,
                {
                    "replicas": active,
                    "fullyLabeledReplicas": active,
                    "readyReplicas": ready,
                    "availableReplicas": ready,
                    "observedGeneration": meta.get("generation", 1),
                },
            )

    # ---- poddisruptionbudgets ---------------------------------------------------------------
    def sync_pdbs(self) -> None:
        """The disruption controller's status write: a read always computes a PDB's status afresh,
        but a watcher (an informer's cache) learns of a change only from a write, as it learns
        of the real controller's status updates."""
        for pdb in self.store.all(self.pdbs):
            meta = pdb["metadata"]
            fresh = self.store.get(self.pdbs, meta["namespace"], meta["name"]).get("status")
            if pdb.get("status") != fresh:
                self._set_status(self.pdbs, pdb, fresh)

    # ---- daemonsets -----------------------------------------------------------------------
    def sync_daemonsets(self) -> None:
        nodes = self.store.all(self.nodes)
        for ds in self.store.all(self.daemonsets):
            meta, spec = ds["metadata"], ds.get("spec") or {}
            template = spec.get("template") or {}
            eligible = {n["metadata"]["name"] for n in nodes if affinity_matches(template, n)}
            by_node: dict[str, list[Obj]] = defaultdict(list)
            for pod in self.owned.of(meta["uid"]):
                if not _active(pod) or pod["spec"].get("nodeName") not in eligible:
                    self._delete(self.pods, pod)
                else:
                    by_node[pod["spec"]["nodeName"]].append(pod)
            for node_name in sorted(eligible):
                pods = sorted(by_node.get(node_name, []), key=self.store.order)
                for extra in pods[1:]:
                    self._delete(self.pods, extra)
                if pods:
                    continue
                pod_spec: dict[str, Any] = clone(template.get("spec") or {})
                pod_spec["nodeName"] = node_name
                pod_spec["tolerations"] = list(pod_spec.get("tolerations") or []) + [{"operator": "Exists"}]
                tmeta = template.get("metadata") or {}
                self._create(
                    self.pods,
                    meta["namespace"],
                    {
                        "metadata": {
                            "generateName": f"{meta['name']}-",
                            "namespace": meta["namespace"],
                            "labels": clone(tmeta.get("labels") or {}),
                            "annotations": clone(tmeta.get("annotations") or {}),
                            "ownerReferences": [_owner_ref(ds, "DaemonSet")],
                        },
                        "spec": pod_spec,
                    },
                )
            scheduled = [ps[0] for n, ps in by_node.items() if ps]
            ready = sum(1 for p in scheduled if _ready(p))
            self._set_status(
                self.daemonsets,
                ds,
                {
                    "desiredNumberScheduled": len(eligible),
                    "currentNumberScheduled": len(scheduled),
                    "numberMisscheduled": 0,
                    "numberReady": ready,
                    "numberAvailable": ready,
                    "numberUnavailable": len(eligible) - ready,
                    "updatedNumberScheduled": len(scheduled),
                    "observedGeneration": meta.get("generation", 1),
                },
            )
