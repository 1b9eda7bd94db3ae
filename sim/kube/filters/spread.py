"""PodTopologySpread, its DoNotSchedule constraints (ScheduleAnyway only scores).

As podtopologyspread/filtering.go computes it: per constraint, the pods its selector (with
matchLabelKeys) picks in the pod's namespace, not terminating, counted per value of the
topologyKey over the nodes that carry every constraint's key and pass the constraint's
inclusion policies (nodeAffinityPolicy Honor by default: the pod's nodeSelector and required
node affinity; nodeTaintsPolicy Ignore by default, Honor: the node's taints are tolerated).
Every such node makes its value a domain, even with no pod. A node passes when, for each
constraint, count(its domain) + 1 if the pod matches its own selector - the least count over
the domains <= maxSkew; the least count is 0 while there are fewer domains than minDomains.
A node without one of the keys is refused with "(missing required label)".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sim.kube.filters.nodeaffinity import affinity_matches
from sim.kube.filters.taints import untolerated
from sim.kube.filters.terms import Selector, labels, namespace, selector, selects

Obj = dict[str, Any]
REASON = "node(s) didn't match pod topology spread constraints"
MISSING_LABEL = REASON + " (missing required label)"


@dataclass
class Constraint:
    key: str
    max_skew: int
    min_domains: int
    selector: Selector
    honor_affinity: bool
    honor_taints: bool
    counts: dict[str, int] = field(default_factory=dict)  # domain -> matching pods

    def least(self) -> int:
        if len(self.counts) < self.min_domains:
            return 0
        return min(self.counts.values(), default=0)


def constraints(pod: Obj) -> list[Constraint]:
    own = labels(pod)
    out = []
    for c in (pod.get("spec") or {}).get("topologySpreadConstraints") or []:
        if c.get("whenUnsatisfiable", "DoNotSchedule") != "DoNotSchedule":
            continue
        out.append(
            Constraint(
                key=c.get("topologyKey") or "",
                max_skew=int(c.get("maxSkew") or 1),
                min_domains=int(c.get("minDomains") or 1),
                selector=selector(c.get("labelSelector"), own, c.get("matchLabelKeys") or []),
                honor_affinity=c.get("nodeAffinityPolicy", "Honor") == "Honor",
                honor_taints=c.get("nodeTaintsPolicy", "Ignore") == "Honor",
            )
        )
    return out


def prefilter(pod: Obj, nodes: list[tuple[Obj, list[Obj]]]) -> list[Constraint]:
    """The pod's constraints with their counts, over (node, its pods)."""
    cs = constraints(pod)
    if not cs:
        return cs
    ns = namespace(pod)
    for node, pods in nodes:
        node_labels = labels(node)
        if any(c.key not in node_labels for c in cs):
            continue
        for c in cs:
            if c.honor_affinity and not affinity_matches(pod, node):
                continue
            if c.honor_taints and untolerated(pod, node) is not None:
                continue
            value = node_labels[c.key]
            c.counts[value] = c.counts.get(value, 0) + sum(
                1
                for p in pods
                if namespace(p) == ns and not p["metadata"].get("deletionTimestamp") and selects(c.selector, labels(p))
            )
    return cs


def refusal(pod: Obj, cs: list[Constraint], node: Obj) -> str | None:
    node_labels = labels(node)
    own = labels(pod)
    for c in cs:
        if c.key not in node_labels:
            return MISSING_LABEL
    for c in cs:
        self_match = 1 if selects(c.selector, own) else 0
        if c.counts.get(node_labels[c.key], 0) + self_match - c.least() > c.max_skew:
            return REASON
    return None
