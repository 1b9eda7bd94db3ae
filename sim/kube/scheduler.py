"""A small kube-scheduler: binds pending pods to Ready nodes with room.

Filters, in the default plugin order: NodeUnschedulable (cordon), TaintToleration (NoSchedule
and NoExecute; a NotReady node counts as tainted node.kubernetes.io/not-ready), NodeAffinity
(nodeSelector and required node affinity), NodeResourcesFit (requests vs allocatable, one pod
slot), PodTopologySpread (whenUnsatisfiable DoNotSchedule, any topologyKey: the node's domain
may not exceed the least loaded eligible domain by more than maxSkew; nodeAffinityPolicy Honor,
nodeTaintsPolicy Ignore, minDomains, matchLabelKeys), InterPodAffinity (required pod
anti-affinity, any topologyKey, both the incoming pod's terms and those of pods already placed;
required pod affinity is not modelled). Scores with LeastAllocated (the default) or MostAllocated over cpu and memory; ties go
to the first node by name so runs are reproducible. Pods that fit nowhere get
PodScheduled=False/Unschedulable with the scheduler's "0/N nodes are available" message.
"""

from __future__ import annotations

import heapq
import json
import time
from collections import Counter
from typing import Any

from sim.kube import quantity
from sim.kube.actor import Actor
from sim.kube.control import FakeControl
from sim.kube.errors import ApiError
from sim.kube.follow import Follower
from sim.kube.kwok import is_ready
from sim.kube.selectors import Requirement, label_selector_to_requirements
from sim.kube.store import Obj, Store, now_rfc3339

NOT_READY_TAINT = {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}
Resources = dict[str, int]
Key = tuple[str, str]  # (namespace, name)


def _amount(name: str, value: Any) -> int:
    return quantity.millis(value) if name == "cpu" else quantity.units(value)


def pod_requests(pod: Obj) -> Resources:
    """Effective requests: containers summed, init containers' max, plus overhead."""
    spec = pod.get("spec") or {}

    def of(container: Obj) -> Resources:
        res = container.get("resources") or {}
        merged = {**(res.get("limits") or {}), **(res.get("requests") or {})}  # requests default to limits
        return {k: _amount(k, v) for k, v in merged.items()}

    total: Resources = Counter()
    for c in spec.get("containers") or []:
        total.update(of(c))
    for c in spec.get("initContainers") or []:
        for k, v in of(c).items():
            total[k] = max(total.get(k, 0), v)
    for k, v in (spec.get("overhead") or {}).items():
        total[k] = total.get(k, 0) + _amount(k, v)
    total["pods"] = 1
    return dict(total)


def allocatable(node: Obj) -> Resources:
    status = node.get("status") or {}
    source = status.get("allocatable") or status.get("capacity") or {}
    return {k: _amount(k, v) for k, v in source.items()}


def tolerates(tolerations: list[Obj], taint: Obj) -> bool:
    for t in tolerations:
        if t.get("effect") and t["effect"] != taint.get("effect"):
            continue
        if t.get("operator") == "Exists":
            if not t.get("key") or t["key"] == taint.get("key"):
                return True
        elif t.get("key") == taint.get("key") and (t.get("value") or "") == (taint.get("value") or ""):
            return True
    return False


def _expression_matches(expr: Obj, labels: dict[str, str]) -> bool:
    op, key, values = expr.get("operator"), expr.get("key"), expr.get("values") or []
    if op == "In":
        return key in labels and labels[key] in values
    if op == "NotIn":
        return key not in labels or labels[key] not in values
    if op == "Exists":
        return key in labels
    if op == "DoesNotExist":
        return key not in labels
    if op in ("Gt", "Lt") and key in labels:
        try:
            have, want = int(labels[key]), int(values[0])
        except (ValueError, IndexError):
            return False
        return have > want if op == "Gt" else have < want
    return False


def affinity_matches(pod: Obj, node: Obj) -> bool:
    labels = node["metadata"].get("labels") or {}
    spec = pod.get("spec") or {}
    for key, value in (spec.get("nodeSelector") or {}).items():
        if labels.get(key) != value:
            return False
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    )
    if not required:
        return True
    fields = {"metadata.name": node["metadata"]["name"]}
    for term in required.get("nodeSelectorTerms") or []:
        exprs = term.get("matchExpressions") or []
        field_exprs = term.get("matchFields") or []
        if not exprs and not field_exprs:
            continue  # an empty term matches nothing
        if all(_expression_matches(e, labels) for e in exprs) and all(
            _expression_matches(e, fields) for e in field_exprs
        ):
            return True
    return False


def _labels(obj: Obj) -> dict[str, str]:
    return (obj.get("metadata") or {}).get("labels") or {}


def _namespace(pod: Obj) -> str:
    return (pod.get("metadata") or {}).get("namespace") or "default"


def _selector(selector: Obj | None, match_label_keys: list[str], labels: dict[str, str]) -> list[Requirement] | None:
    reqs = label_selector_to_requirements(selector)
    if reqs is None:
        return None  # a null selector selects no pod
    return reqs + [Requirement(k, "=", (labels[k],)) for k in match_label_keys if k in labels]


def _selects(reqs: list[Requirement] | None, namespaces: set[str] | None, pod: Obj) -> bool:
    if reqs is None or (namespaces is not None and _namespace(pod) not in namespaces):
        return False
    labels = _labels(pod)
    return all(r.matches(labels) for r in reqs)


AntiTerms = list[tuple[str, list[Requirement] | None, set[str] | None]]


def anti_affinity_terms(pod: Obj) -> AntiTerms:
    """(topologyKey, selector, namespaces or None for all) per required anti-affinity term."""
    terms = (((pod.get("spec") or {}).get("affinity") or {}).get("podAntiAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or []
    out = []
    for t in terms:
        if t.get("namespaceSelector") is not None:
            namespaces = None  # namespace labels are not modelled: every namespace
        else:
            namespaces = set(t.get("namespaces") or [_namespace(pod)])
        out.append(
            (
                t.get("topologyKey") or "",
                _selector(t.get("labelSelector"), t.get("matchLabelKeys") or [], _labels(pod)),
                namespaces,
            )
        )
    return out


def anti_affinity_blocked(
    pod: Obj, nodes: list[Obj], placed: dict[str, list[Obj]], placed_terms: list[tuple[str, Obj, AntiTerms]]
) -> set[str]:
    """Nodes the pod may not join: a term of its own, or of a pod already placed
    (`placed_terms`: node, pod, its terms), selects a pod in the same topology domain (nodes
    sharing the value of the term's topologyKey)."""
    labels_of = {n["metadata"]["name"]: _labels(n) for n in nodes}
    forbidden: set[tuple[str, str]] = set()  # (topologyKey, value)
    own = anti_affinity_terms(pod)
    if own:
        for node_name, pods in placed.items():
            labels = labels_of.get(node_name)
            if labels is None:
                continue
            for key, reqs, namespaces in own:
                if key in labels and any(_selects(reqs, namespaces, other) for other in pods):
                    forbidden.add((key, labels[key]))
    for node_name, _other, terms in placed_terms:  # symmetry: theirs against this pod
        labels = labels_of.get(node_name)
        if labels is None:
            continue
        for key, reqs, namespaces in terms:
            if key in labels and _selects(reqs, namespaces, pod):
                forbidden.add((key, labels[key]))
    if not forbidden:
        return set()
    return {name for name, labels in labels_of.items() if any(labels.get(k) == v for k, v in forbidden)}


def spread_blocked(pod: Obj, nodes: list[Obj], placed: dict[str, list[Obj]]) -> set[str]:
    """Nodes a DoNotSchedule topology spread constraint of the pod rules out."""
    spec = pod.get("spec") or {}
    blocked: set[str] = set()
    for c in spec.get("topologySpreadConstraints") or []:
        if c.get("whenUnsatisfiable", "DoNotSchedule") != "DoNotSchedule":
            continue
        key = c.get("topologyKey") or ""
        reqs = _selector(c.get("labelSelector"), c.get("matchLabelKeys") or [], _labels(pod))
        namespaces = {_namespace(pod)}
        honour_affinity = c.get("nodeAffinityPolicy", "Honor") == "Honor"
        counts: Counter[str] = Counter()
        for n in nodes:
            labels = _labels(n)
            if key not in labels or (honour_affinity and not affinity_matches(pod, n)):
                continue
            counts[labels[key]] += sum(
                1 for p in placed.get(n["metadata"]["name"], []) if _selects(reqs, namespaces, p)
            )
        domains = len(counts)
        least = min(counts.values()) if counts else 0
        if domains < int(c.get("minDomains") or 1):
            least = 0
        self_match = 1 if _selects(reqs, namespaces, pod) else 0
        skew = int(c.get("maxSkew") or 1)
        for n in nodes:
            value = _labels(n).get(key)
            if value is None or counts.get(value, 0) + self_match - least > skew:
                blocked.add(n["metadata"]["name"])
    return blocked


def equivalence_key(pod: Obj, anti_affinity_placed: bool) -> str | None:
    """What the filters read of a pod, for pods whose fit no other pending pod changes for the
    better: None for pods with topology spread or pod anti-affinity of their own."""
    spec = pod.get("spec") or {}
    if spec.get("topologySpreadConstraints") or (spec.get("affinity") or {}).get("podAntiAffinity"):
        return None
    parts = [
        [c.get("resources") for c in (spec.get("initContainers") or []) + (spec.get("containers") or [])],
        spec.get("overhead"),
        spec.get("nodeSelector"),
        spec.get("affinity"),
        spec.get("tolerations"),
    ]
    if anti_affinity_placed:  # placed pods' anti-affinity reads the pod's labels and namespace
        parts += [pod["metadata"].get("namespace"), pod["metadata"].get("labels")]
    return json.dumps(parts, sort_keys=True)


def filter_node(pod: Obj, req: Resources, node: Obj, used: Resources, alloc: Resources | None = None) -> list[str]:
    """Reasons the node cannot take the pod; empty when it fits."""
    spec = pod.get("spec") or {}
    tolerations = spec.get("tolerations") or []
    if (node.get("spec") or {}).get("unschedulable") and not tolerates(
        tolerations, {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}
    ):
        return ["node(s) were unschedulable"]
    taints = [t for t in (node.get("spec") or {}).get("taints") or [] if t.get("effect") in ("NoSchedule", "NoExecute")]
    if not is_ready(node):
        taints = [NOT_READY_TAINT] + taints
    for taint in taints:
        if not tolerates(tolerations, taint):
            return [f"node(s) had untolerated taint {{{taint.get('key')}: {taint.get('value') or ''}}}"]
    if not affinity_matches(pod, node):
        return ["node(s) didn't match Pod's node affinity/selector"]
    alloc = allocatable(node) if alloc is None else alloc
    reasons = []
    for name, amount in sorted(req.items()):
        if amount <= 0 or (name == "ephemeral-storage" and name not in alloc):
            continue
        if used.get(name, 0) + amount > alloc.get(name, 0):
            reasons.append("Too many pods" if name == "pods" else f"Insufficient {name}")
    return reasons


def score(req: Resources, node: Obj, used: Resources, strategy: str, alloc: Resources | None = None) -> float:
    alloc = allocatable(node) if alloc is None else alloc
    parts = []
    for name in ("cpu", "memory"):
        capacity = alloc.get(name, 0)
        if capacity <= 0:
            parts.append(0.0)
            continue
        requested = used.get(name, 0) + req.get(name, 0)
        fraction = min(1.0, requested / capacity)
        parts.append(100 * (fraction if strategy == "most-allocated" else 1 - fraction))
    return sum(parts) / len(parts)


def unschedulable_message(node_count: int, reasons: Counter[str]) -> str:
    if node_count == 0:
        return "no nodes available to schedule pods"
    parts = sorted(f"{count} {reason}" for reason, count in reasons.items())
    return f"0/{node_count} nodes are available: {', '.join(parts)}."


def is_terminal(pod: Obj) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


class _Fits:
    """The nodes one kind of pod (an equivalence key) fits in a pass, best first: a heap of
    (-score, name, version). A bind bumps its node's version and pushes the node's new entry,
    so a stale entry is dropped when it comes up, and a pod of the kind costs a few heap steps
    instead of a filter and a score per node."""

    def __init__(self, pod: Obj, req: Resources, heap: list[tuple[float, str, int]]) -> None:
        self.pod, self.req, self.heap = pod, req, heap


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
            self._requests[uid] = pod_requests(pod)
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
        placed_view: dict[str, list[Obj]] | None = None

        def placed() -> dict[str, list[Obj]]:
            # Node -> its live pods, for pod anti-affinity and spread: built only when needed.
            nonlocal placed_view
            if placed_view is None:
                placed_view = {n: list(pods.values()) for n, pods in self._placed.items()}
                for n, pod in added:
                    placed_view.setdefault(n, []).append(pod)
            return placed_view

        def entry(fits: _Fits, node: Obj) -> tuple[float, str, int] | None:
            name = node["metadata"]["name"]
            if filter_node(fits.pod, fits.req, node, used[name], alloc[name]):
                return None
            return (-score(fits.req, node, used[name], self.control.scoring, alloc[name]), name, version[name])

        by_name = dict(zip(names, nodes, strict=True))
        kinds: dict[str, _Fits] = {}
        self._deferred = []
        bound = 0
        # Within a pass room only shrinks and placed pods only add anti-affinity: a pod like one
        # that fit nowhere fits nowhere either (unless spread or anti-affinity of its own apply).
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
            if like is not None and not placed_terms:
                # No spread or anti-affinity anywhere in the way: the kind's heap has the answer.
                fits = kinds.get(like)
                if fits is None:
                    fits = kinds[like] = _Fits(pod, req, [])
                    fits.heap = [e for e in (entry(fits, n) for n in nodes) if e is not None]
                    heapq.heapify(fits.heap)
                while fits.heap:
                    _, name, at = fits.heap[0]
                    if at == version[name]:
                        best = name
                        break
                    heapq.heappop(fits.heap)  # its node took a pod since: its new entry is in the heap
            else:
                best = self._search(pod, req, nodes, used, alloc, placed(), placed_terms)
            if best is None:
                # Fits nowhere: the reasons from every node, as the scheduler reports them.
                reasons: Counter[str] = Counter()
                anti = (
                    anti_affinity_blocked(pod, nodes, placed(), placed_terms) if like is None or placed_terms else set()
                )
                spread = spread_blocked(pod, nodes, placed()) if pod["spec"].get("topologySpreadConstraints") else set()
                for node in nodes:
                    name = node["metadata"]["name"]
                    reasons.update(_reasons(pod, req, node, used[name], alloc[name], spread, anti))
                message = unschedulable_message(len(nodes), reasons)
                if like is not None:
                    failed_like[like] = message
                self._mark_unschedulable(pod, message, order)
                continue
            if self._bind(pod, best):
                for k, v in req.items():
                    used[best][k] = used[best].get(k, 0) + v
                version[best] += 1
                for fits in kinds.values():
                    if (e := entry(fits, by_name[best])) is not None:
                        heapq.heappush(fits.heap, e)
                added.append((best, pod))
                if placed_view is not None:
                    placed_view.setdefault(best, []).append(pod)
                if terms := anti_affinity_terms(pod):
                    placed_terms.append((best, pod, terms))
                bound += 1
        if bound:
            self._dirty = True  # room and spread changed: pods the pass found no place for may find one
        return bound

    def _search(
        self,
        pod: Obj,
        req: Resources,
        nodes: list[Obj],
        used: dict[str, dict[str, int]],
        alloc: dict[str, Resources],
        placed: dict[str, list[Obj]],
        placed_terms: list[tuple[str, Obj, AntiTerms]],
    ) -> str | None:
        """Every node filtered and scored: the best by score, ties to the first by name."""
        anti = anti_affinity_blocked(pod, nodes, placed, placed_terms)
        spread = spread_blocked(pod, nodes, placed) if pod["spec"].get("topologySpreadConstraints") else set()
        best: tuple[float, str] | None = None
        for node in nodes:
            name = node["metadata"]["name"]
            if _reasons(pod, req, node, used[name], alloc[name], spread, anti):
                continue
            s = score(req, node, used[name], self.control.scoring, alloc[name])
            if best is None or s > best[0]:
                best = (s, name)
        return None if best is None else best[1]

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

    def _bind(self, pod: Obj, node_name: str) -> bool:
        with self.store.lock:
            if self.store.find(self.store.builtin("nodes"), "", node_name) is None:
                return False
            try:
                self.store.bind(pod["metadata"]["namespace"], pod["metadata"]["name"], node_name)
            except ApiError:
                return False  # deleted or bound meanwhile
        return True

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


def _reasons(
    pod: Obj, req: Resources, node: Obj, used: Resources, alloc: Resources, spread: set[str], anti: set[str]
) -> list[str]:
    failed = filter_node(pod, req, node, used, alloc)
    name = node["metadata"]["name"]
    if not failed and name in spread:
        failed = ["node(s) didn't match pod topology spread constraints"]
    if not failed and name in anti:
        failed = ["node(s) didn't match pod anti-affinity rules"]
    return failed


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
