"""PodTopologySpread (whenUnsatisfiable DoNotSchedule; ScheduleAnyway is only a preference and
never refuses).

PreFilter: per constraint, matching pods (same namespace as the pod, not being deleted) per
domain, over the nodes that carry every constraint's key and that the constraint's policies
admit: nodeAffinityPolicy Honor (the default) counts only nodes the pod's nodeSelector and
required node affinity admit; nodeTaintsPolicy Honor (default Ignore) only nodes whose taints
it tolerates. A domain that is counted has an entry even at 0.
Filter: a node without a constraint's key is refused; otherwise the domain's matching pods, plus
1 when the pod matches its own selector, less the global minimum, must not exceed maxSkew. The
global minimum is the least count of any counted domain, or 0 while fewer domains than
minDomains are counted.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pydantic import BaseModel, ConfigDict

from scaling.kube.models import NodeInfo, NodeSelectorTerm, Toleration
from scaling.kube.scheduling.cluster import Cluster
from scaling.kube.scheduling.nodeaffinity import admits
from scaling.kube.scheduling.refusal import Refusal
from scaling.kube.scheduling.tainttoleration import untolerated
from scaling.kube.scheduling.terms import SpreadConstraint

NAME = "PodTopologySpread"
REASON = "node(s) didn't match pod topology spread constraints"
MISSING_LABEL = REASON + " (missing required label)"


class SpreadState(BaseModel):
    """Per DoNotSchedule constraint: matching pods per domain, and whether the pod matches its
    own selector."""

    model_config = ConfigDict(frozen=True)

    constraints: tuple[SpreadConstraint, ...] = ()
    counts: tuple[dict[str, int], ...] = ()
    self_match: tuple[bool, ...] = ()

    def minimum(self, i: int) -> int | None:
        """Constraint i's global minimum (None: no domain counted, nothing to compare with)."""
        counts, c = self.counts[i], self.constraints[i]
        if c.min_domains is not None and len(counts) < c.min_domains:
            return 0
        return min(counts.values()) if counts else None

    def without(self, key: str) -> SpreadState:
        """The state without `key`'s domains (a new node's count there is 0, and 0 less the
        minimum never exceeds maxSkew): the planner's bound on what it carries."""
        counts = tuple({} if c.topology_key == key else d for c, d in zip(self.constraints, self.counts))
        return self.model_copy(update={"counts": counts})

    def dropping(self, key: str) -> SpreadState | None:
        """The state without the constraints on `key` (None when none is left): the planner
        shares those out over domains itself, counting the pods it plans."""
        keep = [i for i, c in enumerate(self.constraints) if c.topology_key != key]
        if not keep:
            return None
        return SpreadState(
            constraints=tuple(self.constraints[i] for i in keep),
            counts=tuple(self.counts[i] for i in keep),
            self_match=tuple(self.self_match[i] for i in keep),
        )

    def room(self, node: NodeInfo) -> int | None:
        """How many more pods that match themselves the node's domains take (None: no limit)."""
        out = None
        for i, c in enumerate(self.constraints):
            least = self.minimum(i)
            if not self.self_match[i] or least is None:
                continue
            left = least + c.max_skew - self.counts[i].get(node.labels.get(c.topology_key, ""), 0)
            out = left if out is None else min(out, left)
        return None if out is None else max(out, 0)

    def with_own(self, node: NodeInfo, n: int, counted: Sequence[bool]) -> SpreadState:
        """The state once `n` pods like this one run on `node` (`counted`: per constraint, its
        policies count the node's domain)."""
        counts = []
        for i, c in enumerate(self.constraints):
            d = dict(self.counts[i])
            domain = node.labels.get(c.topology_key)
            if self.self_match[i] and counted[i] and domain is not None:
                d[domain] = d.get(domain, 0) + n
            counts.append(d)
        return self.model_copy(update={"counts": tuple(counts)})


def required(constraints: Sequence[SpreadConstraint]) -> tuple[SpreadConstraint, ...]:
    return tuple(c for c in constraints if c.when_unsatisfiable == "DoNotSchedule")


def eligible(
    c: SpreadConstraint,
    node: NodeInfo,
    node_selector: Mapping[str, str],
    node_affinity: Sequence[NodeSelectorTerm],
    tolerations: Sequence[Toleration],
) -> bool:
    """The constraint's policies count this node's domain."""
    if c.node_affinity_policy == "Honor" and not admits(node_selector, node_affinity, node.labels, node.name):
        return False
    return c.node_taints_policy != "Honor" or untolerated(tolerations, node.taints) is None


def prefilter(
    namespace: str,
    labels: Mapping[str, str],
    constraints: Sequence[SpreadConstraint],
    node_selector: Mapping[str, str],
    node_affinity: Sequence[NodeSelectorTerm],
    tolerations: Sequence[Toleration],
    cluster: Cluster,
) -> SpreadState | None:
    cs = required(constraints)
    if not cs:
        return None
    counts: list[dict[str, int]] = [{} for _ in cs]
    # Matching pods per node, per constraint: selectors are matched once per label set.
    per_node: list[dict[str, int]] = [{} for _ in cs]
    for (ns, pod_labels), nodes in cluster.live_label_sets.items():
        if ns != namespace:
            continue
        ld = dict(pod_labels)
        for i, c in enumerate(cs):
            if c.selector is not None and c.selector.matches(ld):
                for name, n in nodes.items():
                    per_node[i][name] = per_node[i].get(name, 0) + n
    for node in cluster.nodes:
        if any(c.topology_key not in node.labels for c in cs):
            continue
        for i, c in enumerate(cs):
            if eligible(c, node, node_selector, node_affinity, tolerations):
                domain = node.labels[c.topology_key]
                counts[i][domain] = counts[i].get(domain, 0) + per_node[i].get(node.name, 0)
    return SpreadState(
        constraints=cs,
        counts=tuple(counts),
        self_match=tuple(c.selector is not None and c.selector.matches(labels) for c in cs),
    )


def filter(state: SpreadState | None, node: NodeInfo) -> Refusal | None:
    if state is None:
        return None
    for i, c in enumerate(state.constraints):
        domain = node.labels.get(c.topology_key)
        if domain is None:
            return Refusal(NAME, MISSING_LABEL, unresolvable=True)
        least = state.minimum(i)
        if least is None:
            continue
        if state.counts[i].get(domain, 0) + int(state.self_match[i]) - least > c.max_skew:
            return Refusal(NAME, REASON)
    return None
