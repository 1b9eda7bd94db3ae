"""NodeResourcesFit's score and NodeResourcesBalancedAllocation, in the scheduler's integers.

kubernetes/kubernetes pkg/scheduler/framework/plugins/noderesources (1.31-1.34), for the default
resources, cpu and memory, weight 1 each:

- NodeResourcesFit (plugin weight 1), strategy LeastAllocated (the default): per resource
  (allocatable - requested) * 100 // allocatable, 0 when the requests exceed the allocatable;
  MostAllocated: requested * 100 // allocatable, the requests capped at the allocatable. A
  resource the node has none of is left out; the weighted mean is rounded down (0 when nothing
  is left). `requested` is the node's requests plus the pod's, each container missing a cpu or
  memory request counting 100m and 200 MiB (NonZeroRequested, schedutil.DefaultMilliCPURequest
  and DefaultMemoryRequest).
- NodeResourcesBalancedAllocation (plugin weight 1): the fractions requested / allocatable (each
  at most 1, resources the node has none of left out) over the real requests, node's plus
  pod's; with two, std = |a - b| / 2 (more: the population standard deviation); the score is
  int((1 - std) * 100), in float64 as Go computes it. A pod requesting neither cpu nor memory
  is skipped by its PreScore (1.33 on; kubernetes#130260): the plugin adds nothing for it.

Neither plugin normalizes (ScoreExtensions is nil), so a node's score depends on that node
alone. The sum is what the scheduler compares; it picks at random among equal sums.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from sim.kube.filters.resources import Resources, pod_requests

Obj = dict[str, Any]

MAX_NODE_SCORE = 100
FIT_WEIGHT = 1
BALANCED_WEIGHT = 1
RESOURCES = ("cpu", "memory")  # scoringStrategy.resources and BalancedAllocation's, weight 1 each
WEIGHTS = (1, 1)
DEFAULT_MILLI_CPU_REQUEST = 100
DEFAULT_MEMORY_REQUEST = 200 * 1024 * 1024
NON_ZERO = {"cpu": "non-zero cpu", "memory": "non-zero memory"}  # resources.SCORE_ONLY
LEAST_ALLOCATED, MOST_ALLOCATED = "least-allocated", "most-allocated"


def with_non_zero(pod: Obj, req: Resources) -> Resources:
    """The pod's requests with its non-zero cpu and memory under the NON_ZERO names."""
    defaults = {"cpu": DEFAULT_MILLI_CPU_REQUEST, "memory": DEFAULT_MEMORY_REQUEST}
    non_zero = pod_requests(pod, defaults)
    return {**req, **{NON_ZERO[name]: non_zero.get(name, 0) for name in RESOURCES}}


def least_requested(requested: int, capacity: int) -> int:
    if capacity == 0 or requested > capacity:
        return 0
    return (capacity - requested) * MAX_NODE_SCORE // capacity


def most_requested(requested: int, capacity: int) -> int:
    if capacity == 0:
        return 0
    return min(requested, capacity) * MAX_NODE_SCORE // capacity


def fit_score(
    requested: Sequence[int],
    allocatable: Sequence[int],
    strategy: str = LEAST_ALLOCATED,
    weights: Sequence[int] = WEIGHTS,
) -> int:
    """leastResourceScorer / mostResourceScorer: the weighted mean of the per-resource scores
    over the resources the node has, rounded down."""
    per = most_requested if strategy == MOST_ALLOCATED else least_requested
    score = weight_sum = 0
    for req, cap, weight in zip(requested, allocatable, weights, strict=True):
        if cap == 0:
            continue
        score += per(req, cap) * weight
        weight_sum += weight
    return score // weight_sum if weight_sum else 0


def balanced_score(requested: Sequence[int], allocatable: Sequence[int]) -> int:
    """balancedResourceScorer."""
    fractions = [min(req / cap, 1.0) for req, cap in zip(requested, allocatable, strict=True) if cap != 0]
    std = 0.0
    if len(fractions) == 2:
        std = abs((fractions[0] - fractions[1]) / 2)
    elif len(fractions) > 2:
        mean = sum(fractions) / len(fractions)
        std = math.sqrt(sum((f - mean) * (f - mean) for f in fractions) / len(fractions))
    return int((1 - std) * MAX_NODE_SCORE)


def fit(req: Resources, used: Resources, alloc: Resources, strategy: str = LEAST_ALLOCATED) -> int:
    """NodeResourcesFit's score for a pod requesting `req` (with_non_zero) on a node whose pods
    hold `used` (the same sums) of `alloc`."""
    capacity = [alloc.get(name, 0) for name in RESOURCES]
    non_zero = [used.get(NON_ZERO[name], 0) + req.get(NON_ZERO[name], 0) for name in RESOURCES]
    return fit_score(non_zero, capacity, strategy)


def balanced(req: Resources, used: Resources, alloc: Resources) -> int | None:
    """NodeResourcesBalancedAllocation's score, None for a pod its PreScore skips."""
    own = [req.get(name, 0) for name in RESOURCES]
    if not any(own):
        return None
    requested = [used.get(name, 0) + r for name, r in zip(RESOURCES, own, strict=True)]
    return balanced_score(requested, [alloc.get(name, 0) for name in RESOURCES])


def score(req: Resources, used: Resources, alloc: Resources, strategy: str = LEAST_ALLOCATED) -> int:
    """The two plugins' weighted sum, what the scheduler compares between nodes."""
    return FIT_WEIGHT * fit(req, used, alloc, strategy) + BALANCED_WEIGHT * (balanced(req, used, alloc) or 0)
