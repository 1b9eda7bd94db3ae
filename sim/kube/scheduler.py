"""A small kube-scheduler: binds pending pods to nodes the filter plugins allow.

The filters are sim/kube/filters/ (one module per plugin: NodeUnschedulable, NodeName,
TaintToleration, NodeAffinity, NodePorts, NodeResourcesFit, VolumeBinding, VolumeZone,
PodTopologySpread, InterPodAffinity), this module's own reading of the kube-scheduler's. Scores
as the default profile's NodeResourcesFit (LeastAllocated, or MostAllocated when the control
says so) plus NodeResourcesBalancedAllocation, weight 1 each, plus TaintToleration (fewer
untolerated PreferNoSchedule taints, normalized over the feasible nodes), weight 3, in the
scheduler's integers (sim/kube/scores); the kube-scheduler picks at random among nodes with
equal scores, the simulator the first by name, so runs are reproducible. Pods that fit nowhere
get PodScheduled=False/Unschedulable with the scheduler's "0/N nodes are available" message.
Binding a pod binds its unbound WaitForFirstConsumer claims as the PV controller would once the
scheduler picked a node: to the smallest Available PV that allows it, or to a new PV provisioned
with the node's values of the class's allowedTopologies keys (its zone when the class names none).
"""

from __future__ import annotations

import heapq
import json
import time
from typing import Any

from sim.kube.actor import Actor
from sim.kube.control import FakeControl
from sim.kube.errors import ApiError
from sim.kube.filters import volumes
from sim.kube.filters.cycle import Cluster, Cycle, NodeInfo, node_reasons, unschedulable_message
from sim.kube.filters.nodeaffinity import affinity_matches
from sim.kube.filters.podaffinity import Term, anti_affinity_terms
from sim.kube.filters.ports import host_ports
from sim.kube.filters.resources import Resources, allocatable, pod_requests
from sim.kube.filters.taints import unschedulable, untolerated
from sim.kube.follow import Follower
from sim.kube.scores import noderesources, tainttoleration
from sim.kube.store import Obj, Store, now_rfc3339

__all__ = ["Scheduler", "affinity_matches", "pod_requests", "unschedulable_message"]
Key = tuple[str, str]  # (namespace, name)
AntiTerms = list[Term]


def equivalence_key(pod: Obj, anti_affinity_placed: bool) -> str | None:
    """What the filters read of a pod, for pods whose fit only the room on the nodes decides
    (and placed pods' anti-affinity, which only grows in a pass): None for pods whose fit other
    pods change for the better or in ways room does not tell (topology spread, pod affinity or
    anti-affinity of their own, host ports, volume claims)."""
    spec = pod.get("spec") or {}
    affinity = spec.get("affinity") or {}
    if (
        spec.get("topologySpreadConstraints")
        or affinity.get("podAntiAffinity")
        or affinity.get("podAffinity")
        or host_ports(pod)
        or volumes.claim_names(pod)
    ):
        return None
    parts = [
        [c.get("resources") for c in (spec.get("initContainers") or []) + (spec.get("containers") or [])],
        [c.get("restartPolicy") for c in spec.get("initContainers") or []],
        spec.get("overhead"),
        spec.get("nodeSelector"),
        spec.get("nodeName"),
        affinity,
        spec.get("tolerations"),
    ]
    if anti_affinity_placed:  # placed pods' anti-affinity reads the pod's labels and namespace
        parts += [pod["metadata"].get("namespace"), pod["metadata"].get("labels")]
    return json.dumps(parts, sort_keys=True)


def requests(pod: Obj) -> Resources:
    """What the filters read of the pod's requests, and the non-zero cpu and memory the scores
    read (sim/kube/scores/noderesources.with_non_zero); raises ValueError when malformed."""
    return noderesources.with_non_zero(pod, pod_requests(pod))


def score(req: Resources, node: Obj, used: Resources, strategy: str, alloc: Resources | None = None) -> int:
    """The node's score for a pod requesting `req` (requests()), its pods holding `used`."""
    alloc = allocatable(node) if alloc is None else alloc
    return noderesources.score(req, used, alloc, strategy)


def is_terminal(pod: Obj) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


# TaintToleration's weighted score of a node with no untolerated PreferNoSchedule taint when
# another feasible node has one: 3 * 100, more than the resource scores' most (200).
_TAINT_STEP = tainttoleration.WEIGHT * noderesources.MAX_NODE_SCORE


class _Fits:
    """The nodes one kind of pod (an equivalence key) fits in a pass, best first: a heap of
    (-score, name, version). A bind bumps its node's version and pushes the node's new entry,
    so a stale entry is dropped when it comes up, and a pod of the kind costs a few heap steps
    instead of a filter and a score per node.

    `counts` is the kind's untolerated PreferNoSchedule taints per node (nodes with none left
    out). TaintToleration normalizes over the feasible nodes, which a node's entry cannot see,
    but while no count is above 1 the normalized score is 300 * (1 - count) whatever the
    feasible set (0 -> 300, 1 -> 0 when some feasible node has a 1; all 300 when none has), so
    the entry's score is the exact total. A kind with a larger count on a node it fits is
    scored by the full path instead."""

    def __init__(self, pod: Obj, req: Resources, counts: dict[str, int]) -> None:
        self.pod, self.req, self.counts = pod, req, counts
        self.heap: list[tuple[int, str, int]] = []


class Scheduler(Actor):
    name = "scheduler"

    def __init__(self, store: Store, control: FakeControl) -> None:
        super().__init__(lambda: control.scheduler_interval)
        self.store = store
        self.control = control
        self._requests: dict[str, Resources] = {}  # pod specs are immutable: cache by uid
        # uid -> (when its message may be rewritten next, the backoff after that): kube-scheduler
        # retries an unschedulable pod with a per-pod backoff, so a 10,000-pod burst does not have
        # every pending pod rewritten on every pass while nodes join (the node count is in the
        # message), which was most of the simulator's time.
        self._backoff: dict[str, tuple[float, float]] = {}
        # What a pass reads of the pods, kept from the store's pod events (as kube-scheduler's
        # cache is) instead of walking every pod on every pass: the pods waiting to be scheduled
        # with their queue order, and per node the live pods bound to it and what they request.
        self._pending: dict[Key, tuple[tuple[int, int], Obj]] = {}
        self._bound: dict[Key, tuple[str, Resources]] = {}
        self._used: dict[str, dict[str, int]] = {}
        self._placed: dict[str, dict[Key, Obj]] = {}
        self._terms: dict[Key, tuple[str, Obj, AntiTerms]] = {}
        self._likes: dict[str, tuple[Obj, Any, bool, str | None]] = {}  # uid -> (spec, labels, anti, key)
        self._alloc: dict[str, tuple[str, Resources]] = {}  # node -> (rv, allocatable)
        self._follower = Follower(store, store.builtin("pods").gr, self._reset_pods, self._pod_changed)
        # A pass is due when something that can change a verdict happened since the last one
        # (kube-scheduler's queueing hints): a node changed, a pod appeared, went, was bound by
        # someone, or changed its spec or labels; not a bound pod starting, nor this scheduler's
        # own Unschedulable marks (their resourceVersions are in `_own`).
        self._dirty = True
        self._nodes_seen: tuple[int, int] = (-1, -1)  # (count, newest resourceVersion) of the nodes
        self._own: set[str] = set()
        # Marks held back by a pod's backoff in the last pass, (due, order, key, rv, message):
        # when nothing else happened, the next passes only write those whose backoff ended.
        self._deferred: list[tuple[float, tuple[int, int], Key, str, str]] = []

    def step(self) -> None:
        with self.store.lock:
            self._follower.catch_up()
            nodes = self.store.all(self.store.builtin("nodes"))
        if _nodes_version(nodes) != self._nodes_seen:
            self._dirty = True
        if self._dirty:
            self.schedule_once()
        elif self._deferred and self._deferred[0][0] <= time.monotonic():
            self._retry_deferred()

    def _requests_of(self, pod: Obj) -> Resources:
        uid = pod["metadata"]["uid"]
        if uid not in self._requests:
            self._requests[uid] = requests(pod)
        return self._requests[uid]

    # ---- the pods, from the store's events ----------------------------------------------------
    def _reset_pods(self, pods: list[Obj]) -> None:
        self._pending, self._bound, self._used, self._placed, self._terms = {}, {}, {}, {}, {}
        self._own = set()
        live = {p["metadata"]["uid"] for p in pods}
        self._requests = {u: r for u, r in self._requests.items() if u in live}
        self._backoff = {u: b for u, b in self._backoff.items() if u in live}
        self._likes = {u: k for u, k in self._likes.items() if u in live}
        for pod in pods:
            self._learn(pod)
        self._dirty = True

    def _pod_changed(self, old: Obj | None, new: Obj | None) -> None:
        if old is not None:
            self._forget(old)
        if new is None:
            uid = old["metadata"]["uid"] if old is not None else ""
            for cache in (self._requests, self._backoff, self._likes):
                cache.pop(uid, None)
        else:
            self._learn(new)
        rv = new["metadata"]["resourceVersion"] if new is not None else None
        if rv in self._own:
            self._own.discard(rv)
        elif old is None or new is None or _changes_fit(old, new):
            self._dirty = True

    def _forget(self, pod: Obj) -> None:
        key = (pod["metadata"].get("namespace", ""), pod["metadata"]["name"])
        self._pending.pop(key, None)
        self._terms.pop(key, None)
        bound = self._bound.pop(key, None)
        if bound is not None:
            node_name, req = bound
            used = self._used[node_name]
            for k, v in req.items():
                used[k] -= v
            placed = self._placed[node_name]
            placed.pop(key, None)
            if not placed:
                del self._placed[node_name], self._used[node_name]

    def _learn(self, pod: Obj) -> None:
        meta, spec = pod["metadata"], pod["spec"]
        key = (meta.get("namespace", ""), meta["name"])
        node_name = spec.get("nodeName")
        if node_name:
            if is_terminal(pod):
                return
            try:
                req = self._requests_of(pod)
            except ValueError:
                req = {}  # a malformed quantity on a bound pod holds nothing
            self._bound[key] = (node_name, req)
            used = self._used.setdefault(node_name, {})
            for k, v in req.items():
                used[k] = used.get(k, 0) + v
            self._placed.setdefault(node_name, {})[key] = pod
            if terms := anti_affinity_terms(pod):
                self._terms[key] = (node_name, pod, terms)
        elif (
            pod["status"].get("phase") == "Pending"
            and spec.get("schedulerName", "default-scheduler") == "default-scheduler"
            and not meta.get("deletionTimestamp")
            and not spec.get("schedulingGates")
        ):
            self._pending[key] = ((-int(spec.get("priority") or 0), self.store.order(pod)), pod)

    def _like(self, pod: Obj, anti_placed: bool) -> str | None:
        # The key reads the spec and the labels; a status write keeps both (the same objects:
        # committed objects are never changed in place), so the key is computed once per change.
        meta, spec = pod["metadata"], pod["spec"]
        labels = meta.get("labels")
        cached = self._likes.get(meta["uid"])
        if cached is not None and cached[0] is spec and cached[1] is labels and cached[2] == anti_placed:
            return cached[3]
        like = equivalence_key(pod, anti_placed)
        self._likes[meta["uid"]] = (spec, labels, anti_placed, like)
        return like

    def _allocatable(self, node: Obj) -> Resources:
        name, rv = node["metadata"]["name"], node["metadata"]["resourceVersion"]
        cached = self._alloc.get(name)
        if cached is None or cached[0] != rv:
            cached = self._alloc[name] = (rv, allocatable(node))
        return cached[1]

    # ---- a pass ---------------------------------------------------------------------------
    def schedule_once(self) -> int:
        """One scheduling pass; returns how many pods it bound."""
        with self.store.lock:
            self._follower.catch_up()
            nodes = sorted(self.store.all(self.store.builtin("nodes")), key=lambda n: n["metadata"]["name"])
            self._nodes_seen = _nodes_version(nodes)
            pending = sorted(self._pending.values(), key=lambda entry: entry[0])
            self._dirty = False
        names = [n["metadata"]["name"] for n in nodes]
        alloc = {name: self._allocatable(n) for name, n in zip(names, nodes, strict=True)}
        self._alloc = {name: self._alloc[name] for name in names}
        used: dict[str, dict[str, int]] = {name: dict(self._used.get(name) or {}) for name in names}
        version = dict.fromkeys(names, 0)
        placed_terms = list(self._terms.values())
        added: list[tuple[str, Obj]] = []  # pods this pass placed
        by_name = dict(zip(names, nodes, strict=True))
        # The nodes' PreferNoSchedule taints (TaintToleration's score), for the nodes with any.
        prefer = {name: taints for name, n in by_name.items() if (taints := tainttoleration.prefer_taints(n))}
        cluster: Cluster | None = None
        infos: dict[str, NodeInfo] = {}

        def view() -> Cluster:
            # The nodes with their pods, the namespaces and the volume objects, for the filters
            # that read more than the pod and the node: built when a pass first needs it, then
            # kept up to date by the binds (a NodeInfo shares its `used` with the pass).
            nonlocal cluster
            if cluster is None:
                for name, node in zip(names, nodes, strict=True):
                    infos[name] = NodeInfo(node, alloc[name], used[name], list((self._placed.get(name) or {}).values()))
                for name, pod in added:
                    infos[name].pods.append(pod)
                with self.store.lock:
                    namespaces = {
                        ns["metadata"]["name"]: (ns["metadata"].get("labels") or {})
                        for ns in self.store.all(self.store.builtin("namespaces"))
                    }
                cluster = Cluster(
                    [infos[name] for name in names],
                    namespaces,
                    self._volumes(),
                    [(by_name[n], terms) for n, _, terms in placed_terms if n in by_name],
                )
            return cluster

        def entry(fits: _Fits, node: Obj) -> tuple[int, str, int] | None:
            name = node["metadata"]["name"]
            if node_reasons(fits.pod, fits.req, node, used[name], alloc[name]):
                return None
            s = score(fits.req, node, used[name], self.control.scoring, alloc[name])
            return (-(s + _TAINT_STEP * (1 - fits.counts.get(name, 0))), name, version[name])

        kinds: dict[str, _Fits] = {}
        scored_apart: set[str] = set()  # kinds a node has 2+ untolerated PreferNoSchedule taints for
        self._deferred = []
        bound = 0
        # Within a pass room only shrinks and placed pods only add anti-affinity: a pod like one
        # that fit nowhere fits nowhere either (equivalence_key leaves out the pods this is not so for).
        failed_like: dict[str, str] = {}
        for order, pod in pending:
            try:
                req = self._requests_of(pod)
            except ValueError as exc:
                self._mark_unschedulable(pod, f"invalid resource request: {exc}", order)
                continue
            like = self._like(pod, bool(placed_terms))
            if like is not None and like in failed_like:
                self._mark_unschedulable(pod, failed_like[like], order)
                continue
            best: str | None = None
            cycle: Cycle | None = None
            fits: _Fits | None = None
            if like is not None and not placed_terms and like not in scored_apart:
                # Only room decides: the kind's heap has the answer.
                fits = kinds.get(like)
                if fits is None:
                    tolerations = tainttoleration.prefer_tolerations(pod)
                    counts = {
                        name: c
                        for name, taints in prefer.items()
                        if (c := tainttoleration.untolerated(tolerations, taints))
                    }
                    fits = _Fits(pod, req, counts)
                    fits.heap = [e for e in (entry(fits, n) for n in nodes) if e is not None]
                    # A node the kind does not fit now it fits nowhere in the pass (room only shrinks).
                    if counts and any(counts.get(name, 0) > 1 for _, name, _ in fits.heap):
                        scored_apart.add(like)
                        fits = None
                    else:
                        heapq.heapify(fits.heap)
                        kinds[like] = fits
            if fits is not None:
                while fits.heap:
                    _, name, at = fits.heap[0]
                    if at == version[name]:
                        best = name
                        break
                    heapq.heappop(fits.heap)  # its node took a pod since: its new entry is in the heap
            else:
                cycle = Cycle(pod, req, view())
                best = self._best(cycle, prefer)
            if best is None:
                message = (cycle or Cycle(pod, req, view())).message()
                if like is not None:
                    failed_like[like] = message
                self._mark_unschedulable(pod, message, order)
                continue
            if self._bind(pod, by_name[best]):
                if cluster is not None:
                    infos[best].add(pod, req)
                else:
                    for k, v in req.items():
                        used[best][k] = used[best].get(k, 0) + v
                version[best] += 1
                for kind in kinds.values():
                    if (e := entry(kind, by_name[best])) is not None:
                        heapq.heappush(kind.heap, e)
                added.append((best, pod))
                if terms := anti_affinity_terms(pod):
                    placed_terms.append((best, pod, terms))
                    if cluster is not None:
                        cluster.anti_pods.append((by_name[best], terms))
                if cluster is not None and volumes.claim_names(pod):
                    cluster.volumes = self._volumes()  # its claims were bound
                bound += 1
        if bound:
            self._dirty = True  # room and spread changed: pods the pass found no place for may find one
        return bound

    def _best(self, cycle: Cycle, prefer: dict[str, list[Obj]]) -> str | None:
        """Every node filtered and scored: the best by score, ties to the first by name.
        `prefer` holds the nodes' PreferNoSchedule taints (nodes with none left out)."""
        feasible = [info for info in cycle.cluster.nodes if not cycle.reasons(info)]
        if not feasible:
            return None
        totals = [score(cycle.req, info.node, info.used, self.control.scoring, info.alloc) for info in feasible]
        if prefer and any(info.name in prefer for info in feasible):
            # Without such a taint every feasible node gets the same 300: it orders nothing.
            tolerations = tainttoleration.prefer_tolerations(cycle.pod)
            counts = [tainttoleration.untolerated(tolerations, prefer.get(info.name) or []) for info in feasible]
            for i, s in enumerate(tainttoleration.normalize(counts)):
                totals[i] += tainttoleration.WEIGHT * s
        return feasible[max(range(len(feasible)), key=totals.__getitem__)].name  # max keeps the first

    def _volumes(self) -> volumes.Volumes:
        with self.store.lock:
            return volumes.Volumes(
                {pv["metadata"]["name"]: pv for pv in self.store.all(self.store.builtin("persistentvolumes"))},
                {
                    (c["metadata"]["namespace"], c["metadata"]["name"]): c
                    for c in self.store.all(self.store.builtin("persistentvolumeclaims"))
                },
                {
                    sc["metadata"]["name"]: sc
                    for sc in self.store.all(self.store.builtin("storageclasses", "storage.k8s.io"))
                },
            )

    def _retry_deferred(self) -> None:
        """Nothing changed since the last pass, so its verdicts stand: write the marks whose
        backoff has ended, in queue order, as a full pass would."""
        now = time.monotonic()
        due = []
        while self._deferred and self._deferred[0][0] <= now:
            due.append(heapq.heappop(self._deferred))
        for _, order, key, rv, message in sorted(due, key=lambda d: d[1]):
            pod = self.store.find(self.store.builtin("pods"), *key)
            if pod is None or pod["metadata"]["resourceVersion"] != rv:
                self._dirty = True  # changed meanwhile: the next pass decides again
                continue
            self._mark_unschedulable(pod, message, order)

    def _bind(self, pod: Obj, node: Obj) -> bool:
        with self.store.lock:
            now = self.store.find(self.store.builtin("nodes"), "", node["metadata"]["name"])
            if now is None:
                return False
            # The kube-scheduler takes a fresh snapshot for each pod's cycle; a pass here reads the
            # nodes once. A node tainted or cordoned since (a scale-down's hard taint before its
            # re-check) takes no more pods from this pass: the next one decides again.
            if now["metadata"]["resourceVersion"] != node["metadata"]["resourceVersion"] and (
                untolerated(pod, now) or unschedulable(pod, now)
            ):
                self._dirty = True
                return False
            try:
                self.store.bind(pod["metadata"]["namespace"], pod["metadata"]["name"], node["metadata"]["name"])
            except ApiError:
                return False  # deleted or bound meanwhile
            if volumes.claim_names(pod):
                self._bind_claims(pod, node)
        return True

    def _bind_claims(self, pod: Obj, node: Obj) -> None:
        """The pod's unbound WaitForFirstConsumer claims, bound for the node it got (see the
        module doc); the claim is marked with the node, as the scheduler's VolumeBinding does."""
        pvs_rt, claims_rt = self.store.builtin("persistentvolumes"), self.store.builtin("persistentvolumeclaims")
        vols = self._volumes()
        state = volumes.prefilter(pod, vols)
        if isinstance(state, str):
            return
        taken: set[str] = set()
        for claim, sc in state.unbound:
            pv = volumes.static_match(claim, sc, vols, node, taken)
            if pv is None:
                body = volumes.provisioned(claim, sc, node)
                # A claim provisioned before (its PV is named after it) keeps that PV.
                pv = self.store.find(pvs_rt, "", body["metadata"]["name"]) or self.store.create(pvs_rt, "", body)
            pv_name = pv["metadata"]["name"]
            taken.add(pv_name)
            meta = claim["metadata"]
            ref = {"kind": "PersistentVolumeClaim", "namespace": meta["namespace"], "name": meta["name"]}
            ref["uid"] = meta["uid"]

            def claimed(obj: Obj, ref: Obj = ref) -> Obj:
                obj["spec"]["claimRef"] = ref
                return obj

            def bound_status(obj: Obj) -> Obj:
                obj["status"] = {**(obj.get("status") or {}), "phase": "Bound"}
                return obj

            def claim_bound(obj: Obj, pv_name: str = pv_name) -> Obj:
                obj["spec"]["volumeName"] = pv_name
                annotations = obj["metadata"].setdefault("annotations", {})
                annotations[volumes.SELECTED_NODE] = node["metadata"]["name"]
                annotations["pv.kubernetes.io/bind-completed"] = "yes"
                return obj

            def claim_status(obj: Obj, pv: Obj = pv) -> Obj:
                obj["status"] = {
                    "phase": "Bound",
                    "accessModes": pv["spec"].get("accessModes") or [],
                    "capacity": pv["spec"].get("capacity") or {},
                }
                return obj

            self.store.mutate(pvs_rt, "", pv_name, claimed)
            self.store.mutate(pvs_rt, "", pv_name, bound_status, "status")
            self.store.mutate(claims_rt, meta["namespace"], meta["name"], claim_bound)
            self.store.mutate(claims_rt, meta["namespace"], meta["name"], claim_status, "status")

    def _mark_unschedulable(self, pod: Obj, message: str, order: tuple[int, int] = (0, 0)) -> None:
        current = None
        for c in pod["status"].get("conditions") or []:
            if c.get("type") == "PodScheduled":
                current = c
                break
        if current and current.get("reason") == "Unschedulable" and current.get("message") == message:
            return  # already says so: skip the read-modify-write (it would change nothing)
        uid, now = pod["metadata"]["uid"], time.monotonic()
        if current and current.get("reason") == "Unschedulable":
            due, backoff = self._backoff.get(uid, (0.0, self.control.pod_initial_backoff))
            if now < due:
                # Tried again (and the message updated) when its backoff ends.
                meta = pod["metadata"]
                key = (meta["namespace"], meta["name"])
                heapq.heappush(self._deferred, (due, order, key, meta["resourceVersion"], message))
                return
        else:
            backoff = self.control.pod_initial_backoff
        self._backoff[uid] = (now + backoff, min(2 * backoff, self.control.pod_max_backoff))

        def update(obj: Obj) -> Obj | None:
            if obj["spec"].get("nodeName"):
                return None
            conditions = obj["status"].setdefault("conditions", [])
            current = next((c for c in conditions if c.get("type") == "PodScheduled"), None)
            # lastTransitionTime records when the pod first became unschedulable.
            since = (
                current.get("lastTransitionTime") if current and current.get("status") == "False" else None
            ) or now_rfc3339()
            condition = {
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "message": message,
                "lastProbeTime": None,
                "lastTransitionTime": since,
            }
            obj["status"]["conditions"] = [c for c in conditions if c.get("type") != "PodScheduled"] + [condition]
            return obj

        with self.store.lock:
            written = self.store.mutate(
                self.store.builtin("pods"), pod["metadata"]["namespace"], pod["metadata"]["name"], update, "status"
            )
            if written is not None:
                self._own.add(written["metadata"]["resourceVersion"])


def _nodes_version(nodes: list[Obj]) -> tuple[int, int]:
    """How many nodes there are and the newest resourceVersion among them: a node added,
    changed or deleted changes it."""
    return len(nodes), max((int(n["metadata"]["resourceVersion"]) for n in nodes), default=0)


def _changes_fit(old: Obj, new: Obj) -> bool:
    """False for a pod change no scheduling verdict reads: a bound pod's status (it started),
    with the same node, labels and liveness."""
    return not (
        old["spec"].get("nodeName")
        and old["spec"].get("nodeName") == new["spec"].get("nodeName")
        and is_terminal(old) == is_terminal(new)
        and old["metadata"].get("labels") == new["metadata"].get("labels")
        and old["metadata"].get("deletionTimestamp") == new["metadata"].get("deletionTimestamp")
    )
