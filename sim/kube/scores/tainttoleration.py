"""TaintToleration's score: nodes with fewer PreferNoSchedule taints the pod does not tolerate first.

kubernetes/kubernetes pkg/scheduler/framework/plugins/tainttoleration/taint_toleration.go
(1.31-1.34), weight 3 in the default profile:

- PreScore keeps the pod's tolerations whose effect is empty or PreferNoSchedule
  (getAllTolerationPreferNoSchedule): a NoSchedule toleration does not soften a PreferNoSchedule
  taint.
- Score is the count of the node's PreferNoSchedule taints none of those tolerates
  (countIntolerableTaintsPreferNoSchedule; the toleration matching is the filter's,
  sim/kube/filters/taints.tolerates).
- NormalizeScore is helper.DefaultNormalizeScore(MaxNodeScore, reverse=true) over the counts of
  the nodes that passed the filters: every node 100 when no count is above 0, else
  100 - 100 * count // max(counts). So, unlike the resource scores, a node's score depends on
  the other feasible nodes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sim.kube.filters.taints import tolerates
from sim.kube.scores.noderesources import MAX_NODE_SCORE

Obj = dict[str, Any]

WEIGHT = 3
PREFER_NO_SCHEDULE = "PreferNoSchedule"


def prefer_taints(node: Obj) -> list[Obj]:
    """The node's PreferNoSchedule taints, the only ones the score reads."""
    taints = (node.get("spec") or {}).get("taints") or []
    return [t for t in taints if t.get("effect") == PREFER_NO_SCHEDULE]


def prefer_tolerations(pod: Obj) -> list[Obj]:
    """PreScore's getAllTolerationPreferNoSchedule: the tolerations with an empty or a
    PreferNoSchedule effect (an empty effect tolerates every effect)."""
    tolerations = (pod.get("spec") or {}).get("tolerations") or []
    return [t for t in tolerations if not t.get("effect") or t["effect"] == PREFER_NO_SCHEDULE]


def untolerated(tolerations: list[Obj], taints: list[Obj]) -> int:
    """Score: how many of `taints` (prefer_taints) none of `tolerations` (prefer_tolerations)
    tolerates."""
    return sum(1 for taint in taints if not tolerates(tolerations, taint))


def normalize(counts: Sequence[int]) -> list[int]:
    """NormalizeScore over the feasible nodes' counts, before the weight: fewer is better."""
    most = max(counts, default=0)
    if most == 0:
        return [MAX_NODE_SCORE] * len(counts)
    return [MAX_NODE_SCORE - MAX_NODE_SCORE * c // most for c in counts]
