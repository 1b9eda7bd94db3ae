"""The kube-scheduler's resource scores: which feasible node it binds a pod to.

The default profile sums, per node, each Score plugin's 0-100 score times its weight and binds
to the highest. Of them, the ones that tell apart nodes which differ only in room (the planner's
new nodes, which carry no preferred affinity, PreferNoSchedule taint or image yet) are
NodeResourcesFit's LeastAllocated strategy and NodeResourcesBalancedAllocation, weight 1 each,
over cpu and memory (kubernetes/kubernetes pkg/scheduler/framework/plugins/noderesources:
least_allocated.go, balanced_allocation.go, resource_allocation.go; the default weights are
pkg/scheduler/apis/config/v1/default_plugins.go). Both read the node's requests with the pod
being scored added, and the node's allocatable; a resource the node has none of is left out,
weight and all. They read different requests:

- LeastAllocated the non-zero ones (NodeInfo.NonZeroRequested, PodResourcesOptions.
  NonMissingContainerRequests): a container, init containers included, without a cpu request
  counts DEFAULT_MILLI_CPU_REQUEST, without a memory request DEFAULT_MEMORY_REQUEST (pkg/
  scheduler/util); an explicit 0 is a request of 0. So request-less pods still spread.
- BalancedAllocation the real ones (useRequested), and its PreScore skips a pod that requests
  neither cpu nor memory (isBestEffortPod, 1.33 on): it adds nothing for that pod on any node.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

MAX_NODE_SCORE = 100
DEFAULT_MILLI_CPU_REQUEST = 100
DEFAULT_MEMORY_REQUEST = 200 * 1024 * 1024


def least_allocated(requested: Sequence[int], allocatable: Sequence[int], weights: Sequence[int] = ()) -> int:
    """Per resource (capacity - requested) * 100 // capacity, 0 when the requests exceed it; the
    weighted mean over the resources the node has, rounded down (0 when it has none)."""
    weights = weights or [1] * len(requested)
    score = total = 0
    for req, cap, w in zip(requested, allocatable, weights, strict=True):
        if cap == 0:
            continue
        score += (0 if req > cap else (cap - req) * MAX_NODE_SCORE // cap) * w
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


def resource_score(
    non_zero: Sequence[int], requested: Sequence[int], allocatable: Sequence[int], best_effort: bool = False
) -> int:
    """The default profile's resource scores for one node, weight 1 each: LeastAllocated over
    `non_zero` plus BalancedAllocation over `requested`, both the node's pods' (cpu millicores,
    memory bytes) with the pod's added, of `allocatable`. `best_effort`: the pod requests
    neither cpu nor memory, and BalancedAllocation adds nothing."""
    fit = least_allocated(non_zero, allocatable)
    return fit if best_effort else fit + balanced_allocation(requested, allocatable)
