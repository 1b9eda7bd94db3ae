"""When shapes asking for one extended resource may share a planned node.

The packer counts cpu, memory and pod slots; an extended resource (nvidia.com/gpu,
ephemeral-storage, hugepages-*) it keeps per shape only (each shape's per-node cap). Two shapes
asking for the same resource are kept apart only where, together, they could ask a node for
more of it than the node has: two GPU workloads on a one-GPU type must not share a node, but
workloads that each ask a gigabyte of ephemeral-storage fill a cx22's 40 GB long before its cpu
allows (kept apart, five such one-pod workloads bought five nodes, four of which the scheduler
left empty).

The bound is the fractional knapsack on each packed dimension alone: the most of the resource
a node's pods can ask for when only its cpu (or only its memory, or only its pod slots) limits
them, each shape at most as many pods as fit a node alone and its own cap; the least of the
three bounds every node the packer may build.
"""

from __future__ import annotations

from collections.abc import Sequence

from scaling.kube.models import Vec, fit_count

# (a shape's request as the packer sees it, its pods at most on one node, the resource it asks)
Asker = tuple[Vec, int, int]


def may_overflow(askers: Sequence[Asker], room: Vec, have: int) -> bool:
    """Whether pods of `askers` that one node of `room` holds could together ask for more than
    `have` of the resource."""
    return min(_most(askers, room, d) for d in range(3)) > have


def _most(askers: Sequence[Asker], room: Vec, d: int) -> int:
    """The most of the resource pods of `askers` ask for with only dimension `d` of `room`
    limiting them, rounded down (whole pods ask whole amounts: no node's pods ask for more)."""
    free = room[d]
    total = 0
    # The most resource per unit of `d` first; pods that use none of `d` all go.
    order = sorted(askers, key=lambda a: -a[2] / a[0][d] if a[0][d] > 0 else float("-inf"))
    for req, cap, amount in order:
        n = min(fit_count(req, room), cap) if any(req) else cap  # asking for nothing counted: all fit
        if n <= 0:
            continue
        q = req[d]
        if q <= 0:
            total += n * amount
            continue
        if free <= 0:
            break
        k = min(n, free // q)
        total += k * amount
        free -= k * q
        if k < n and free > 0:  # a part of one more pod: the relaxation's last
            total += amount * free // q
            free = 0
    return total
