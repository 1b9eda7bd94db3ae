"""InterPodAffinity: required pod affinity and anti-affinity, on any topologyKey, both ways.

As interpodaffinity/filtering.go reads them. A term selects pods in its namespaces (the pod's
own when it names none and has no namespaceSelector) or in the namespaces whose labels its
namespaceSelector matches (an empty one: all), whose labels its labelSelector matches, with
matchLabelKeys/mismatchLabelKeys merged in; a null labelSelector selects nothing. Counted per
(topologyKey, value) over the nodes that carry the key:
- affinity: pods matching every one of the pod's affinity terms count for each term's domain;
  a node passes when it carries every term's key and each domain counts a pod. The first pod
  of a self-affine group passes anywhere with the keys when no pod anywhere matches all the
  terms and the pod matches them itself;
- anti-affinity: a node fails when a domain of its own holds a pod a term of the pod matches;
- existing pods' anti-affinity: a node fails when it shares a domain with a placed pod whose
  term matches the incoming pod (its namespaceSelector read with the incoming pod's namespace
  labels).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from sim.kube.filters.terms import Selector, labels, namespace, selector, selects

Obj = dict[str, Any]
AFFINITY = "node(s) didn't match pod affinity rules"
ANTI_AFFINITY = "node(s) didn't match pod anti-affinity rules"
EXISTING_ANTI_AFFINITY = "node(s) didn't satisfy existing pods anti-affinity rules"
Namespaces = dict[str, dict[str, str]]  # namespace -> its labels


@dataclass(frozen=True)
class Term:
    topology_key: str
    selector: Selector
    namespaces: frozenset[str]
    namespace_selector: Selector  # None: none given (matches no namespace)

    def matches(self, pod: Obj, namespaces: Namespaces) -> bool:
        ns = namespace(pod)
        if ns not in self.namespaces and not selects(self.namespace_selector, namespaces.get(ns, {})):
            return False
        return selects(self.selector, labels(pod))


def _terms(pod: Obj, kind: str) -> list[Term]:
    raw = (((pod.get("spec") or {}).get("affinity") or {}).get(kind) or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or []
    own = labels(pod)
    out = []
    for t in raw:
        ns_selector = t.get("namespaceSelector")
        names = t.get("namespaces") or []
        out.append(
            Term(
                topology_key=t.get("topologyKey") or "",
                selector=selector(
                    t.get("labelSelector"), own, t.get("matchLabelKeys") or [], t.get("mismatchLabelKeys") or []
                ),
                namespaces=frozenset(names if names or ns_selector is not None else [namespace(pod)]),
                namespace_selector=selector(ns_selector, {}),
            )
        )
    return out


def affinity_terms(pod: Obj) -> list[Term]:
    return _terms(pod, "podAffinity")


def anti_affinity_terms(pod: Obj) -> list[Term]:
    return _terms(pod, "podAntiAffinity")


@dataclass
class State:
    pod: Obj
    affinity: list[Term]
    anti: list[Term]
    affinity_counts: Counter[tuple[str, str]]
    anti_counts: Counter[tuple[str, str]]
    existing_anti: Counter[tuple[str, str]]
    self_affine: bool  # the pod matches all its own affinity terms


def prefilter(
    pod: Obj,
    nodes: list[tuple[Obj, list[Obj]]],
    anti_pods: list[tuple[Obj, list[Term]]],
    namespaces: Namespaces,
) -> State:
    """`nodes`: (node, its pods); `anti_pods`: (node, terms) of the placed pods with required
    anti-affinity terms."""
    affinity, anti = affinity_terms(pod), anti_affinity_terms(pod)
    state = State(pod, affinity, anti, Counter(), Counter(), Counter(), False)
    state.self_affine = bool(affinity) and all(t.matches(pod, namespaces) for t in affinity)
    for node, terms in anti_pods:
        node_labels = labels(node)
        for t in terms:
            if t.topology_key in node_labels and t.matches(pod, namespaces):
                state.existing_anti[(t.topology_key, node_labels[t.topology_key])] += 1
    if affinity or anti:
        for node, pods in nodes:
            node_labels = labels(node)
            for other in pods:
                if affinity and all(t.matches(other, namespaces) for t in affinity):
                    for t in affinity:
                        if t.topology_key in node_labels:
                            state.affinity_counts[(t.topology_key, node_labels[t.topology_key])] += 1
                for t in anti:
                    if t.topology_key in node_labels and t.matches(other, namespaces):
                        state.anti_counts[(t.topology_key, node_labels[t.topology_key])] += 1
    return state


def refusal(state: State, node: Obj) -> str | None:
    node_labels = labels(node)
    if state.affinity:
        if any(t.topology_key not in node_labels for t in state.affinity):
            return AFFINITY
        if not all(state.affinity_counts[(t.topology_key, node_labels[t.topology_key])] > 0 for t in state.affinity):
            # The first pod of a group affine to itself: nothing anywhere matches yet.
            if state.affinity_counts or not state.self_affine:
                return AFFINITY
    for t in state.anti:
        if t.topology_key in node_labels and state.anti_counts[(t.topology_key, node_labels[t.topology_key])] > 0:
            return ANTI_AFFINITY
    if state.existing_anti and any(state.existing_anti[(k, v)] > 0 for k, v in node_labels.items()):
        return EXISTING_ANTI_AFFINITY
    return None
