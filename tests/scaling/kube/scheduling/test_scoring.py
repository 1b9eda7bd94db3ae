"""The scheduler's resource scores, ported from kubernetes/kubernetes
pkg/scheduler/framework/plugins/noderesources: least_allocated_test.go
(TestLeastAllocatedScoringStrategy) and balanced_allocation_test.go
(TestNodeResourcesBalancedAllocation). Each case names the upstream case; `requested` is what
the node's pods request with the scored pod added, as the plugins compute it."""

from __future__ import annotations

import pytest

from scaling.kube.scheduling.scoring import balanced_allocation, least_allocated, resource_score


@pytest.mark.parametrize(
    ("name", "requested", "allocatable", "weights", "want"),
    [
        ("nothing scheduled, nothing requested", (0, 0), (4000, 10000), (), 100),
        ("nothing scheduled, resources requested, differently sized nodes: node1", (3000, 5000), (4000, 10000), (), 37),
        ("nothing scheduled, resources requested, differently sized nodes: node2", (3000, 5000), (6000, 10000), (), 50),
        ("no resources requested, pods scheduled with resources: node1", (6000, 0), (10000, 20000), (), 70),
        ("no resources requested, pods scheduled with resources: node2", (6000, 5000), (10000, 20000), (), 57),
        ("resources requested, pods scheduled with resources: node2", (6000, 10000), (10000, 20000), (), 45),
        ("resources requested, differently sized nodes: node2", (6000, 10000), (10000, 50000), (), 60),
        ("requested resources exceed node capacity: node1", (6000, 0), (4000, 10000), (), 50),
        ("requested resources exceed node capacity: node2", (6000, 5000), (4000, 10000), (), 25),
        ("zero node resources, pods scheduled with resources", (3000, 5000), (0, 0), (), 0),
        ("different weight on CPU and memory: node1", (3000, 5000), (4000, 10000), (1, 2), 41),
        ("different weight on CPU and memory: node2", (3000, 5000), (6000, 10000), (1, 2), 50),
    ],
)
def test_least_allocated(name: str, requested: tuple, allocatable: tuple, weights: tuple, want: int) -> None:
    assert least_allocated(requested, allocatable, weights) == want


@pytest.mark.parametrize(
    ("name", "requested", "allocatable", "want"),
    [
        ("nothing scheduled, resources requested, differently sized nodes: node1", (3000, 5000), (4000, 10000), 87),
        ("nothing scheduled, resources requested, differently sized nodes: node2", (3000, 5000), (6000, 10000), 100),
        ("resources requested, pods scheduled with resources: node1", (6000, 5000), (10000, 20000), 82),
        ("resources requested, pods scheduled with resources: node2", (6000, 10000), (10000, 20000), 95),
        ("differently sized nodes: node2", (6000, 10000), (10000, 50000), 80),
        ("requested resources at node capacity: node1", (6000, 0), (6000, 10000), 50),
        ("requested resources at node capacity: node2", (6000, 5000), (6000, 10000), 75),
        # gpu 4 of 8 on node1, 1 of 8 on node2 (the upstream comment's 70 and 65)
        ("include scalar resource on a node: node1", (3000, 5000, 4), (3500, 40000, 8), 70),
        ("include scalar resource on a node: node2", (3000, 5000, 1), (3500, 40000, 8), 65),
        ("node without the scalar resource should skip the scalar resource", (3000, 5000, 0), (3500, 40000, 0), 63),
    ],
)
def test_balanced_allocation(name: str, requested: tuple, allocatable: tuple, want: int) -> None:
    assert balanced_allocation(requested, allocatable) == want


def test_an_emptier_larger_node_wins_over_a_small_empty_one() -> None:
    """What the planner relies on: a pod goes to a half-used large node rather than an empty
    node too small to hold it twice (the differential property's cx22 beside a gpu1)."""
    gib = 2**30
    small = resource_score((1500, gib // 4), (1930, 3 * gib))
    large = resource_score((750 + 1500, gib // 4 + 2 * gib), (7910, 28 * gib))
    assert large > small
