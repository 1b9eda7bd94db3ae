"""The kube-scheduler's resource scores: which feasible node it binds a pod to.

The default profile sums, per node, each Score plugin's 0-100 score times its weight and binds
to the highest. Of them, the ones that tell apart nodes which differ only in room (the planner's
new nodes, which carry no preferred affinity, PreferNoSchedule taint or image yet) are
NodeResourcesFit's LeastAllocated strategy and NodeResourcesBalancedAllocation, weight 1 each,
over cpu and memory (kubernetes/kubernetes pkg/scheduler/framework/plugins/noderesources:
least_allocated.go, balanced_allocation.go, resource_allocation.go; the default weights are
pkg/scheduler/apis/config/v1/default_plugins.go). Both read the node's requests with the pod
being scored added, and the node's allocatable.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

MAX_NODE_SCORE = 100


def least_allocated(requested: Sequence[int], allocatable: Sequence[int], weights: Sequence[int] = ()) -> int:
    """Per resource (capacity - requested) * 100 / capacity in integers, 0 when the node lacks
    the resource or the requests exceed it; the weighted mean, rounded down."""
    weights = weights or [1] * len(requested)
    score = total = 0
    for req, cap, w in zip(requested, allocatable, weights, strict=True):
        part = 0 if cap == 0 or req > cap else (cap - req) * MAX_NODE_SCORE // cap
        score += part * w
        total += w
    return score // total if total else 0


def balanced_allocation(requested: Sequence[int], allocatable: Sequence[int]) -> int:
    """(1 - the standard deviation of the requested fractions, each at most 1) * 100, rounded
    down; resources the node does not have are left out (two resources: |a - b| / 2)."""
    fractions = [min(req / cap, 1.0) for req, cap in zip(requested, allocatable, strict=True) if cap > 0]
    if len(fractions) < 2:
        std = 0.0
    elif len(fractions) == 2:
        std = abs(fractions[0] - fractions[1]) / 2
    else:
        mean = sum(fractions) / len(fractions)
        std = math.sqrt(sum((f - mean) ** 2 for f in fractions) / len(fractions))
    return int((1 - std) * MAX_NODE_SCORE)


def resource_score(requested: Sequence[int], allocatable: Sequence[int]) -> int:
    """The default profile's resource scores for a node whose requests, the pod's included, are
    `requested` (cpu millicores, memory bytes) of `allocatable`: LeastAllocated plus
    BalancedAllocation, weight 1 each."""
    return least_allocated(requested, allocatable) + balanced_allocation(requested, allocatable)
