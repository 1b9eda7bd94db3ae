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

import json
import time
from collections import Counter
from typing import Any

from sim.kube import quantity
from sim.kube.actor import Actor
from sim.kube.control import SimControl
from sim.kube.errors import ApiError
from sim.kube.kwok import is_ready
from sim.kube.selectors import Requirement, label_selector_to_requirements
from sim.kube.store import Obj, Store, now_rfc3339

NOT_READY_TAINT = {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}
Resources = dict[str, int]


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


class Scheduler(Actor):
    name = "scheduler"

    def __init__(self, store: Store, control: SimControl) -> None:
        super().__init__(lambda: control.scheduler_interval)
        self.store = store
        self.control = control
        self._requests: dict[str, Resources] = {}  # pod specs are immutable: cache by uid
        # uid -> (when its message may be rewritten next, the backoff after that): kube-scheduler
        # retries an unschedulable pod with a per-pod backoff, so a 10,000-pod burst does not have
        # every pending pod rewritten on every pass while nodes join (the node count is in the
        # message), which was most of the simulator's time.
        self._backoff: dict[str, tuple[float, float]] = {}
        self._last_rv = -1

    def step(self) -> None:
        if self.store.rv != self._last_rv:  # nothing changed, nothing new to decide
            self.schedule_once()

    def _requests_of(self, pod: Obj) -> Resources:
        uid = pod["metadata"]["uid"]
        if uid not in self._requests:
            self._requests[uid] = pod_requests(pod)
        return self._requests[uid]

    def schedule_once(self) -> int:
        """One scheduling pass; returns how many pods it bound."""
        nodes_rt, pods_rt = self.store.builtin("nodes"), self.store.builtin("pods")
        with self.store.lock:
            nodes = sorted(self.store.all(nodes_rt), key=lambda n: n["metadata"]["name"])
            pods = self.store.all(pods_rt)
            order = {p["metadata"]["uid"]: self.store.order(p) for p in pods}
            self._last_rv = self.store.rv
        used: dict[str, Counter[str]] = {n["metadata"]["name"]: Counter() for n in nodes}
        placed: dict[str, list[Obj]] = {}  # node -> its running pods, for pod anti-affinity and spread
        placed_terms: list[tuple[str, Obj, AntiTerms]] = []  # those of them with anti-affinity
        pending = []
        for pod in pods:
            node_name = pod["spec"].get("nodeName")
            if node_name:
                if node_name in used and not is_terminal(pod):
                    placed.setdefault(node_name, []).append(pod)
                    if terms := anti_affinity_terms(pod):
                        placed_terms.append((node_name, pod, terms))
                    try:
                        used[node_name].update(self._requests_of(pod))
                    except ValueError:
                        pass  # a malformed quantity on a bound pod holds nothing
            elif (
                pod["status"].get("phase") == "Pending"
                and pod["spec"].get("schedulerName", "default-scheduler") == "default-scheduler"
                and not pod["metadata"].get("deletionTimestamp")
                and not pod["spec"].get("schedulingGates")
            ):
                pending.append(pod)
        live = {p["metadata"]["uid"] for p in pods}
        self._requests = {u: r for u, r in self._requests.items() if u in live}
        self._backoff = {u: b for u, b in self._backoff.items() if u in live}
        pending.sort(key=lambda p: (-int(p["spec"].get("priority") or 0), order[p["metadata"]["uid"]]))
        bound = 0
        alloc = {n["metadata"]["name"]: allocatable(n) for n in nodes}
        # Within a pass room only shrinks and placed pods only add anti-affinity: a pod like one
        # that fit nowhere fits nowhere either (unless spread or anti-affinity of its own apply).
        failed_like: dict[str, str] = {}
        for pod in pending:
            try:
                req = self._requests_of(pod)
            except ValueError as exc:
                self._mark_unschedulable(pod, f"invalid resource request: {exc}")
                continue
            like = equivalence_key(pod, bool(placed_terms))
            if like is not None and like in failed_like:
                self._mark_unschedulable(pod, failed_like[like])
                continue
            reasons: Counter[str] = Counter()
            best: tuple[float, str] | None = None
            anti = anti_affinity_blocked(pod, nodes, placed, placed_terms)
            spread = spread_blocked(pod, nodes, placed) if pod["spec"].get("topologySpreadConstraints") else set()
            for node in nodes:
                name = node["metadata"]["name"]
                failed = filter_node(pod, req, node, used[name], alloc[name])
                if not failed and name in spread:
                    failed = ["node(s) didn't match pod topology spread constraints"]
                if not failed and name in anti:
                    failed = ["node(s) didn't match pod anti-affinity rules"]
                if failed:
                    reasons.update(failed)
                    continue
                s = score(req, node, used[name], self.control.scoring, alloc[name])
                if best is None or s > best[0]:
                    best = (s, name)
            if best is None:
                message = unschedulable_message(len(nodes), reasons)
                if like is not None:
                    failed_like[like] = message
                self._mark_unschedulable(pod, message)
                continue
            if self._bind(pod, best[1]):
                used[best[1]].update(req)
                placed.setdefault(best[1], []).append(pod)
                if terms := anti_affinity_terms(pod):
                    placed_terms.append((best[1], pod, terms))
                bound += 1
        return bound

    def _bind(self, pod: Obj, node_name: str) -> bool:
        with self.store.lock:
            if self.store.find(self.store.builtin("nodes"), "", node_name) is None:
                return False
            try:
                self.store.bind(pod["metadata"]["namespace"], pod["metadata"]["name"], node_name)
            except ApiError:
                return False  # deleted or bound meanwhile
        return True

    def _mark_unschedulable(self, pod: Obj, message: str) -> None:
        current = next((c for c in pod["status"].get("conditions") or [] if c.get("type") == "PodScheduled"), None)
        if current and current.get("reason") == "Unschedulable" and current.get("message") == message:
            return  # already says so: skip the read-modify-write (it would change nothing)
        uid, now = pod["metadata"]["uid"], time.monotonic()
        if current and current.get("reason") == "Unschedulable":
            due, backoff = self._backoff.get(uid, (0.0, self.control.pod_initial_backoff))
            if now < due:
                return  # tried again (and the message updated) when its backoff ends
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

        self.store.mutate(
            self.store.builtin("pods"), pod["metadata"]["namespace"], pod["metadata"]["name"], update, "status"
        )
