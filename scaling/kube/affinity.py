"""Required node affinity, as the scheduler's NodeAffinity filter reads it.

`requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms` are ORed; the expressions of
one term are ANDed; an empty term matches nothing. Operators: In, NotIn, Exists, DoesNotExist,
Gt, Lt (integers). `matchFields` can only name `metadata.name`, which a node not yet created
does not have: such a term never matches a future node.

Per-node limits (`pod_spreads`): required pod anti-affinity and topology spread constraints
with whenUnsatisfiable DoNotSchedule, both only with topologyKey kubernetes.io/hostname.
Spread constraints on any other key (zone, region) are `topology_spreads`: the planner shares
pods out over those domains (scaling.nodes.scale_up.topology). Pod anti-affinity on other keys and
required pod affinity are not read: the planner ignores them.
A spread's skew is measured against the least loaded eligible node; growth takes that minimum
as 0 (a new node is empty), so maxSkew N reads as "fewer than N matching pods on the node"
(N per new node): conservative, never more pods per node than the scheduler allows.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from scaling.kube.memo import ReprMemo
from scaling.kube.models import LABEL_HOSTNAME, NodeSelectorRequirement, NodeSelectorTerm, PodSpread, TopologySpread


def required_node_affinity(spec: Mapping[str, Any]) -> list[NodeSelectorTerm]:
    """The pod spec's required node affinity terms ([] when it has none)."""
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    return required_node_affinity_terms(required)


def required_node_affinity_terms(required: Mapping[str, Any]) -> list[NodeSelectorTerm]:
    """A NodeSelector's terms (a pod's required node affinity, a PersistentVolume's nodeAffinity.required)."""
    terms = required.get("nodeSelectorTerms") or []
    if not terms:
        return []
    # The terms are frozen, so pods with the same affinity share them: a burst's pods come from a
    # few templates, and building them was a fifth of an observation's CPU at 30,000 new pods.
    built = _TERMS.get(
        terms,
        lambda: [
            NodeSelectorTerm(
                match_expressions=tuple(_requirement(e) for e in term.get("matchExpressions") or []),
                match_fields=tuple(_requirement(e) for e in term.get("matchFields") or []),
            )
            for term in terms
        ],
    )
    return list(built)  # the terms are shared; the list is the caller's


_TERMS: ReprMemo[list[NodeSelectorTerm]] = ReprMemo(1024)  # nodeSelectorTerms -> their terms


def _requirement(e: Mapping[str, Any]) -> NodeSelectorRequirement:
    return NodeSelectorRequirement(
        key=e.get("key") or "", operator=e.get("operator") or "In", values=tuple(e.get("values") or ())
    )


def requirement_matches(req: NodeSelectorRequirement, labels: Mapping[str, str]) -> bool:
    present = req.key in labels
    if req.operator == "In":
        return present and labels[req.key] in req.values
    if req.operator == "NotIn":
        return not present or labels[req.key] not in req.values
    if req.operator == "Exists":
        return present
    if req.operator == "DoesNotExist":
        return not present
    if present and len(req.values) == 1:  # Gt / Lt: one integer value
        try:
            have, want = int(labels[req.key]), int(req.values[0])
        except ValueError:
            return False
        return have > want if req.operator == "Gt" else have < want
    return False


def node_affinity_matches(terms: Sequence[NodeSelectorTerm], labels: Mapping[str, str], node_name: str = "") -> bool:
    """True when the pod has no required node affinity or one of its terms admits the node.

    `node_name` empty means a node that does not exist yet (the planner's future node)."""
    if not terms:
        return True
    fields = {"metadata.name": node_name} if node_name else {}
    for term in terms:
        if not term.match_expressions and not term.match_fields:
            continue  # an empty term matches nothing
        if all(requirement_matches(r, labels) for r in term.match_expressions) and all(
            requirement_matches(r, fields) for r in term.match_fields
        ):
            return True
    return False


def _selector(
    selector: Mapping[str, Any], match_label_keys: Sequence[str], labels: Mapping[str, str]
) -> tuple[tuple[tuple[str, str], ...], tuple[NodeSelectorRequirement, ...]]:
    """A label selector with matchLabelKeys folded in (the pod's values for those keys)."""
    match_labels = dict(selector.get("matchLabels") or {})
    for key in match_label_keys:
        if key in labels:
            match_labels[key] = labels[key]
    exprs = tuple(_requirement(e) for e in selector.get("matchExpressions") or [])
    return tuple(sorted(match_labels.items())), exprs


def spread_selects(spread: PodSpread | TopologySpread, namespace: str, labels: Mapping[str, str]) -> bool:
    """The pod (namespace, labels) counts against `spread` (an empty selector selects all)."""
    if spread.namespaces and namespace not in spread.namespaces:
        return False
    return all(labels.get(k) == v for k, v in spread.match_labels) and all(
        requirement_matches(r, labels) for r in spread.match_expressions
    )


def pod_spreads(meta: Mapping[str, Any], spec: Mapping[str, Any]) -> list[PodSpread]:
    """The pod's per-node limits: hostname anti-affinity (limit 1) and hostname spread
    constraints that must hold (limit maxSkew when the pod counts itself, else maxSkew + 1).

    A null labelSelector selects no pod, so it sets no limit. Anti-affinity's namespaceSelector
    cannot be evaluated without the namespaces' labels: it is read as every namespace (more
    matching pods, so fewer nodes admit the pod: conservative). mismatchLabelKeys is not read."""
    namespace = meta.get("namespace") or "default"
    labels = dict(meta.get("labels") or {})
    out: list[PodSpread] = []
    anti = ((spec.get("affinity") or {}).get("podAntiAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or []
    for term in anti:
        if term.get("topologyKey") != LABEL_HOSTNAME or term.get("labelSelector") is None:
            continue
        ml, me = _selector(term["labelSelector"], term.get("matchLabelKeys") or [], labels)
        if term.get("namespaceSelector") is not None:
            namespaces: tuple[str, ...] = ()
        else:
            namespaces = tuple(sorted(set(term.get("namespaces") or [namespace])))
        s = PodSpread(match_labels=ml, match_expressions=me, namespaces=namespaces, limit=1)
        out.append(s.model_copy(update={"counts_self": spread_selects(s, namespace, labels)}))
    for c in spec.get("topologySpreadConstraints") or []:
        if c.get("topologyKey") != LABEL_HOSTNAME or c.get("whenUnsatisfiable", "DoNotSchedule") != "DoNotSchedule":
            continue
        if c.get("labelSelector") is None:
            continue
        ml, me = _selector(c["labelSelector"], c.get("matchLabelKeys") or [], labels)
        skew = max(int(c.get("maxSkew") or 1), 1)
        s = PodSpread(match_labels=ml, match_expressions=me, namespaces=(namespace,), limit=skew)
        own = spread_selects(s, namespace, labels)
        out.append(s.model_copy(update={"counts_self": own, "limit": skew if own else skew + 1}))
    return out


def topology_spreads(meta: Mapping[str, Any], spec: Mapping[str, Any]) -> list[TopologySpread]:
    """The pod's DoNotSchedule spread constraints over a key other than the hostname, as the
    planner shares pods out over domains (the filter itself is
    scaling.kube.scheduling.podtopologyspread, which reads every field)."""
    namespace = meta.get("namespace") or "default"
    labels = dict(meta.get("labels") or {})
    out: list[TopologySpread] = []
    for c in spec.get("topologySpreadConstraints") or []:
        key = c.get("topologyKey") or ""
        if not key or key == LABEL_HOSTNAME or c.get("whenUnsatisfiable", "DoNotSchedule") != "DoNotSchedule":
            continue
        if c.get("labelSelector") is None:
            continue
        ml, me = _selector(c["labelSelector"], c.get("matchLabelKeys") or [], labels)
        t = TopologySpread(
            key=key,
            match_labels=ml,
            match_expressions=me,
            namespaces=(namespace,),
            max_skew=max(int(c.get("maxSkew") or 1), 1),
            min_domains=c.get("minDomains"),
        )
        out.append(t.model_copy(update={"counts_self": spread_selects(t, namespace, labels)}))
    return out


def per_node_cap(spreads: Sequence[PodSpread]) -> int | None:
    """At most this many pods of one shape on a new (empty) node; None when unlimited."""
    caps = [s.limit for s in spreads if s.counts_self]
    return min(caps) if caps else None


def spread_room(
    spreads: Sequence[PodSpread],
    pods_on_node: Sequence[tuple[str, Mapping[str, str]]],
    also: Mapping[PodSpread, int] | None = None,
) -> int | None:
    """How many pods with these limits a node running `pods_on_node` (namespace, labels) takes
    (None: no limit; 0: none). `also`: pods counted against a limit beyond those listed."""
    room: int | None = None
    for s in spreads:
        have = sum(1 for ns, labels in pods_on_node if spread_selects(s, ns, labels)) + (also or {}).get(s, 0)
        if have >= s.limit:
            return 0
        if s.counts_self:
            room = s.limit - have if room is None else min(room, s.limit - have)
    return room
