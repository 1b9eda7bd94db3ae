"""InterPodAffinity: required pod affinity and anti-affinity, in both directions.

PreFilter counts, per topology pair (key, value) of the nodes running them:
- affinity: running pods that match ALL of the pod's affinity terms, once per term whose key
  their node carries;
- anti-affinity: running pods matching each of the pod's anti-affinity terms;
- existing anti-affinity: running pods whose own anti-affinity terms match this pod (their
  namespaceSelector read against this pod's namespace labels).
Filter, in the scheduler's order: the node must carry every affinity term's key with a match in
its domain, unless no running pod matches at all and the pod matches its own terms (the first
pod of a self-affine group may go anywhere); no anti-affinity term may find a match in the
node's domain; no running pod's anti-affinity may cover the node's domain.

Counts are kept as key -> value -> pods, so a shape can carry them: the planner drops the
hostname pairs (a new node runs no pods) to keep what crosses history bounded.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from pydantic import BaseModel, ConfigDict

from scaling.kube.models import NodeInfo
from scaling.kube.scheduling.cluster import Cluster
from scaling.kube.scheduling.refusal import Refusal
from scaling.kube.scheduling.terms import PodAffinityTerm

NAME = "InterPodAffinity"
AFFINITY = "node(s) didn't match pod affinity rules"
ANTI_AFFINITY = "node(s) didn't match pod anti-affinity rules"
EXISTING_ANTI_AFFINITY = "node(s) didn't satisfy existing pods anti-affinity rules"

Counts = dict[str, dict[str, int]]  # topology key -> value -> matching pods


class AffinityState(BaseModel):
    model_config = ConfigDict(frozen=True)

    affinity: tuple[PodAffinityTerm, ...] = ()
    anti_affinity: tuple[PodAffinityTerm, ...] = ()
    affinity_counts: Counts = {}
    anti_counts: Counts = {}
    existing_anti: Counts = {}
    affinity_matched: bool = False  # some running pod matches all affinity terms (on any key)
    self_affine: bool = False  # the pod matches all its own affinity terms
    self_anti: tuple[str, ...] = ()  # keys of its anti-affinity terms that select the pod itself

    def without(self, key: str) -> AffinityState:
        """The state without `key`'s pairs (the planner's bound on what it carries)."""
        return self.model_copy(
            update={
                "affinity_counts": {k: v for k, v in self.affinity_counts.items() if k != key},
                "anti_counts": {k: v for k, v in self.anti_counts.items() if k != key},
                "existing_anti": {k: v for k, v in self.existing_anti.items() if k != key},
            }
        )


def _add(counts: Counts, key: str, labels: Mapping[str, str], n: int) -> None:
    value = labels.get(key)
    if value is not None and n:
        per = counts.setdefault(key, {})
        per[value] = per.get(value, 0) + n


def matches_all(
    terms: Iterable[PodAffinityTerm],
    namespace: str,
    labels: Mapping[str, str],
    ns_labels: Mapping[str, Mapping[str, str]],
) -> bool:
    return all(t.selects(namespace, labels, ns_labels) for t in terms)


def prefilter(
    namespace: str,
    labels: Mapping[str, str],
    affinity: tuple[PodAffinityTerm, ...],
    anti_affinity: tuple[PodAffinityTerm, ...],
    cluster: Cluster,
) -> AffinityState | None:
    ns_labels = cluster.namespaces
    existing: Counts = {}
    for (term, node_name), n in cluster.anti_terms.items():
        node = cluster.by_name.get(node_name)
        if node is not None and term.selects(namespace, labels, ns_labels):
            _add(existing, term.topology_key, node.labels, n)
    if not affinity and not anti_affinity and not existing:
        return None
    aff: Counts = {}
    anti: Counts = {}
    matched = False
    if affinity or anti_affinity:
        for (ns, pod_labels), nodes in cluster.label_sets.items():
            ld = dict(pod_labels)
            all_aff = bool(affinity) and matches_all(affinity, ns, ld, ns_labels)
            hit_anti = [t for t in anti_affinity if t.selects(ns, ld, ns_labels)]
            if not all_aff and not hit_anti:
                continue
            for node_name, n in nodes.items():
                node = cluster.by_name.get(node_name)
                if node is None:
                    continue
                if all_aff:
                    for t in affinity:
                        if t.topology_key in node.labels:
                            matched = True
                        _add(aff, t.topology_key, node.labels, n)
                for t in hit_anti:
                    _add(anti, t.topology_key, node.labels, n)
    return AffinityState(
        affinity=affinity,
        anti_affinity=anti_affinity,
        affinity_counts=aff,
        anti_counts=anti,
        existing_anti=existing,
        affinity_matched=matched,
        self_affine=bool(affinity) and matches_all(affinity, namespace, labels, ns_labels),
        self_anti=tuple(sorted({t.topology_key for t in anti_affinity if t.selects(namespace, labels, ns_labels)})),
    )


def with_own(state: AffinityState, node_labels: Mapping[str, str], n: int) -> AffinityState:
    """The state once `n` pods like this one run on a node with `node_labels` (upstream's AddPod
    for pods of the same shape): they count toward its own affinity and anti-affinity."""
    aff = {k: dict(v) for k, v in state.affinity_counts.items()}
    anti = {k: dict(v) for k, v in state.anti_counts.items()}
    existing = {k: dict(v) for k, v in state.existing_anti.items()}
    matched = state.affinity_matched
    if state.self_affine:
        for t in state.affinity:
            if t.topology_key in node_labels:
                matched = True
            _add(aff, t.topology_key, node_labels, n)
    for key in state.self_anti:
        _add(anti, key, node_labels, n)
        _add(existing, key, node_labels, n)
    return state.model_copy(
        update={"affinity_counts": aff, "anti_counts": anti, "existing_anti": existing, "affinity_matched": matched}
    )


def _count(counts: Counts, key: str, value: str | None) -> int:
    return 0 if value is None else counts.get(key, {}).get(value, 0)


def satisfies_affinity(state: AffinityState, node: NodeInfo) -> bool:
    exists = True
    for t in state.affinity:
        value = node.labels.get(t.topology_key)
        if value is None:
            return False  # every term's key must be on the node
        if _count(state.affinity_counts, t.topology_key, value) <= 0:
            exists = False
            break
    return exists or (not state.affinity_matched and state.self_affine)


def filter(state: AffinityState | None, node: NodeInfo) -> Refusal | None:
    if state is None:
        return None
    if state.affinity and not satisfies_affinity(state, node):
        return Refusal(NAME, AFFINITY, unresolvable=True)
    for t in state.anti_affinity:
        if _count(state.anti_counts, t.topology_key, node.labels.get(t.topology_key)) > 0:
            return Refusal(NAME, ANTI_AFFINITY)
    for key, values in state.existing_anti.items():
        if _count(state.existing_anti, key, node.labels.get(key)) > 0 and values:
            return Refusal(NAME, EXISTING_ANTI_AFFINITY)
    return None
