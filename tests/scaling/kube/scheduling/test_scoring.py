"""The scheduler's resource scores, ported from kubernetes/kubernetes
pkg/scheduler/framework/plugins/noderesources: least_allocated_test.go
(TestLeastAllocatedScoringStrategy) and balanced_allocation_test.go
(TestNodeResourcesBalancedAllocation), and the non-zero requests of pkg/scheduler/util
(pod_resources_test.go, TestGetNonZeroRequest). Each case names the upstream case; `requested`
is what the node's pods request with the scored pod added, as the plugins compute it."""

from __future__ import annotations

import pytest

from scaling.kube.models import PodInfo, Resources
from scaling.kube.pods import implied_score_requests, pod_info, score_requests
from scaling.kube.scheduling.scoring import balanced_allocation, least_allocated, resource_score
from scaling.nodes.scale_up.demand import demand_key

MI = 1024 * 1024


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
        # (extended resource weight 2, cpu 1, memory 1) on a node without the extended resource:
        # skipped, weight and all, so (50 + 60) / 2, not (0 * 2 + 50 + 60) / 4 = 27
        ("if the node doesn't have a resource: node1", (0, 3000, 4000), (0, 6000, 10000), (2, 1, 1), 55),
        # the node has no memory: cpu alone, (4000 - 3000) * 100 / 4000
        ("zero node resources (memory only)", (3000, 5000), (4000, 0), (), 25),
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
    small = resource_score((1500, gib // 4), (1500, gib // 4), (1930, 3 * gib))
    large = resource_score((750 + 1500, gib // 4 + 2 * gib), (750 + 1500, gib // 4 + 2 * gib), (7910, 28 * gib))
    assert large > small


def containers(*requests: dict) -> dict:
    """st.MakePod().Req(...)...: one container per request map; `{}` a container without requests."""
    return {"containers": [{"name": f"c{i}", "resources": {"requests": r}} for i, r in enumerate(requests)]}


@pytest.mark.parametrize(
    ("name", "requests", "want"),
    [
        ("cpu_and_memory_not_found", {}, (0, 0, 100, 200 * MI)),
        ("only_cpu_exist", {"cpu": "200m"}, (200, 0, 200, 200 * MI)),
        ("only_memory_exist", {"memory": "400Mi"}, (0, 400 * MI, 100, 400 * MI)),
        ("cpu_memory_exist", {"cpu": "200m", "memory": "400Mi"}, (200, 400 * MI, 200, 400 * MI)),
        # not upstream's: an explicit 0 is a request, not a missing one
        ("explicit zero", {"cpu": "0", "memory": "0"}, (0, 0, 0, 0)),
    ],
)
def test_non_zero_requests(name: str, requests: dict, want: tuple) -> None:
    """pod_resources_test.go TestGetNonZeroRequest: real, then non-zero cpu and memory."""
    assert score_requests(containers(requests)) == want


def test_non_zero_requests_per_container_and_init_container() -> None:
    """The default counts per container (two request-less containers: 200m), and an init
    container without requests counts it too (PodRequests' NonMissingContainerRequests)."""
    assert score_requests(containers({}, {}))[2:] == (200, 400 * MI)
    spec = {**containers({"cpu": "50m", "memory": "64Mi"}), "initContainers": [{"name": "i"}]}
    assert score_requests(spec) == (50, 64 * MI, 100, 200 * MI)


def test_least_allocated_reads_the_non_zero_requests() -> None:
    """most_allocated_test.go's "no resources requested, pods scheduled, nonzero request for
    resource" nodes (250m, 1000Mi; node1 holds two request-less pods) under LeastAllocated: the
    request-less incoming pod makes node1 300m (over: 0) and 600Mi (40), node2 100m (60) and
    200Mi (80)."""
    one = score_requests(containers({}))
    node1 = least_allocated((3 * one[2], 3 * one[3]), (250, 1000 * MI))
    node2 = least_allocated((one[2], one[3]), (250, 1000 * MI))
    assert (node1, node2) == (20, 70)


def test_balanced_allocation_skips_a_pod_requesting_neither() -> None:
    """balanced_allocation_test.go "nothing scheduled, nothing requested, skip in PreScore":
    BalancedAllocation adds nothing; LeastAllocated still counts the non-zero defaults."""
    alloc = (4000, 10000 * MI)
    assert resource_score((100, 200 * MI), (0, 0), alloc, best_effort=True) == least_allocated((100, 200 * MI), alloc)
    assert resource_score((100, 200 * MI), (0, 0), alloc) == least_allocated((100, 200 * MI), alloc) + 100


def pod(spec: dict) -> PodInfo:
    return pod_info({"metadata": {"name": "p", "namespace": "default"}, "spec": spec})


def test_shapes_split_only_where_the_scores_tell_pods_apart() -> None:
    """A pod whose requests say all the scores read keeps its key (recorded histories hold
    them); pods of equal requests the scores tell apart get different keys."""
    requested = pod(containers({"cpu": "500m", "memory": "1Gi"}))
    assert requested.score_requests == implied_score_requests(requested.requests)
    assert demand_key(requested) == demand_key(requested.model_copy(update={"score_requests": None}))
    one, two = pod(containers({})), pod(containers({}, {}))
    assert one.score_requests == implied_score_requests(one.requests)
    assert one.requests == two.requests and demand_key(one) != demand_key(two)
    assert implied_score_requests(Resources(cpu_m=10, memory=16 * MI, pods=1)) == (0, 0, 100, 200 * MI)
