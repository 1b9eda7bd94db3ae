"""The simulated scheduler's resource scores against the kube-scheduler's own cases, ported from
kubernetes/kubernetes pkg/scheduler/framework/plugins/noderesources:
- least_allocated_test.go, TestLeastAllocatedScoringStrategy;
- most_allocated_test.go, TestMostAllocatedScoringStrategy;
- balanced_allocation_test.go, TestNodeResourcesBalancedAllocation.
Each case carries its upstream name; the last tests run one scheduler pass on a store. Pods and nodes are API objects as upstream builds them
(st.MakePod().Req(...) is one container per Req; a pod with no containers requests nothing,
a container without requests counts the non-zero defaults); quantities are upstream's
strings, so "4000" cpu is 4000 cores, which leaves every ratio as upstream computes it.
No threads, no HTTP."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from sim.kube.control import FakeControl
from sim.kube.filters.resources import allocatable
from sim.kube.scheduler import Scheduler, requests
from sim.kube.scores import noderesources
from sim.kube.scores.noderesources import LEAST_ALLOCATED, MOST_ALLOCATED, balanced, fit, fit_score
from sim.kube.store import Store

Obj = dict[str, Any]
READY = [{"type": "Ready", "status": "True"}]


def pod(*containers: dict[str, str]) -> Obj:
    """st.MakePod().Req(c1).Req(c2)...: one container per request map; `{}` is a container
    without requests (st.MakePod().Container(...))."""
    return {
        "metadata": {"name": "p", "namespace": "default"},
        "spec": {"containers": [{"name": f"c{i}", "resources": {"requests": c}} for i, c in enumerate(containers)]},
    }


def node(cpu: str | None = None, memory: str | None = None) -> Obj:
    alloc = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v is not None}
    return {"metadata": {"name": "n"}, "status": {"allocatable": alloc, "capacity": alloc}}


def held(*pods: Obj) -> Counter[str]:
    used: Counter[str] = Counter()
    for p in pods:
        used.update(requests(p))
    return used


# The pods upstream's cases request, and the ones already on the nodes.
TWO_CONTAINERS = pod({"cpu": "1000", "memory": "2000"}, {"cpu": "2000", "memory": "3000"})
CPU_3000 = pod({"cpu": "3000", "memory": "0"})
CPU_3000_MEM_5000 = pod({"cpu": "3000", "memory": "5000"})
NOTHING = pod()  # no containers: requests nothing, not even the non-zero defaults


@pytest.mark.parametrize(
    ("case", "incoming", "existing", "cpu", "memory", "want"),
    [
        ("nothing scheduled, nothing requested", NOTHING, [], "4000", "10000", 100),
        ("nothing scheduled, resources requested, differently sized nodes: node1", TWO_CONTAINERS, [], "4000", "10000", 37),
        ("nothing scheduled, resources requested, differently sized nodes: node2", TWO_CONTAINERS, [], "6000", "10000", 50),
        ("no resources requested, pods scheduled", NOTHING, [NOTHING, NOTHING], "4000", "10000", 100),
        ("no resources requested, pods scheduled with resources: node1", NOTHING, [CPU_3000, CPU_3000], "10000", "20000", 70),
        ("no resources requested, pods scheduled with resources: node2", NOTHING, [CPU_3000, CPU_3000_MEM_5000], "10000", "20000", 57),
        ("resources requested, pods scheduled with resources: node1", TWO_CONTAINERS, [CPU_3000], "10000", "20000", 57),
        ("resources requested, pods scheduled with resources: node2", TWO_CONTAINERS, [CPU_3000_MEM_5000], "10000", "20000", 45),
        ("resources requested, pods scheduled with resources, differently sized nodes: node2", TWO_CONTAINERS, [CPU_3000_MEM_5000], "10000", "50000", 60),
        ("requested resources exceed node capacity: node1", CPU_3000, [CPU_3000], "4000", "10000", 50),
        ("requested resources exceed node capacity: node2", CPU_3000, [CPU_3000_MEM_5000], "4000", "10000", 25),
        ("zero node resources, pods scheduled with resources", NOTHING, [CPU_3000_MEM_5000], None, None, 0),
    ],
)  # fmt: skip
def test_least_allocated(case: str, incoming: Obj, existing: list[Obj], cpu: str, memory: str, want: int) -> None:
    n = node(cpu, memory)
    assert fit(requests(incoming), held(*existing), allocatable(n), LEAST_ALLOCATED) == want


@pytest.mark.parametrize(
    ("case", "incoming", "existing", "cpu", "memory", "want"),
    [
        ("nothing scheduled, nothing requested", NOTHING, [], "4000", "10000", 0),
        ("nothing scheduled, resources requested, differently sized nodes: node1", TWO_CONTAINERS, [], "4000", "10000", 62),
        ("nothing scheduled, resources requested, differently sized nodes: node2", TWO_CONTAINERS, [], "6000", "10000", 50),
        ("no resources requested, pods scheduled with resources: node1", NOTHING, [CPU_3000, CPU_3000], "10000", "20000", 30),
        ("no resources requested, pods scheduled with resources: node2", NOTHING, [CPU_3000, CPU_3000_MEM_5000], "10000", "20000", 42),
        ("resources requested, pods scheduled with resources: node1", TWO_CONTAINERS, [CPU_3000], "10000", "20000", 42),
        ("resources requested, pods scheduled with resources: node2", TWO_CONTAINERS, [CPU_3000_MEM_5000], "10000", "20000", 55),
        (
            "resources requested equal node capacity: node1",
            pod({"cpu": "2000", "memory": "4000"}, {"cpu": "3000", "memory": "5000"}), [], "5000", "10000", 95,
        ),
        (
            "resources requested equal node capacity: node2",
            pod({"cpu": "2000", "memory": "4000"}, {"cpu": "3000", "memory": "5000"}), [], "10000", "9000", 75,
        ),
        # A container without requests counts 100m and 200Mi: node1 holds two such pods.
        ("no resources requested, pods scheduled, nonzero request for resource: node1", pod({}), [pod({}), pod({})], "250m", "1000Mi", 80),
        ("no resources requested, pods scheduled, nonzero request for resource: node2", pod({}), [], "250m", "1000Mi", 30),
    ],
)  # fmt: skip
def test_most_allocated(case: str, incoming: Obj, existing: list[Obj], cpu: str, memory: str, want: int) -> None:
    n = node(cpu, memory)
    assert fit(requests(incoming), held(*existing), allocatable(n), MOST_ALLOCATED) == want


@pytest.mark.parametrize(
    ("case", "strategy", "requested", "capacity", "want"),
    [
        # memory weight 2, cpu weight 1
        ("nothing scheduled, resources requested with different weight on CPU and memory: node1", LEAST_ALLOCATED, (3000, 5000), (4000, 10000), 41),
        ("nothing scheduled, resources requested with different weight on CPU and memory: node2", LEAST_ALLOCATED, (3000, 5000), (6000, 10000), 50),
        ("nothing scheduled, resources requested, differently sized nodes (weights 1, 2): node1", MOST_ALLOCATED, (3000, 5000), (4000, 10000), 58),
        ("nothing scheduled, resources requested, differently sized nodes (weights 1, 2): node2", MOST_ALLOCATED, (3000, 5000), (6000, 10000), 50),
    ],
)  # fmt: skip
def test_resource_weights(case: str, strategy: str, requested: tuple, capacity: tuple, want: int) -> None:
    assert fit_score(requested, capacity, strategy, (1, 2)) == want


# balanced_allocation_test.go's pod specs.
CPU_ONLY = pod({"cpu": "1000m", "memory": "0"}, {"cpu": "2000m", "memory": "0"})
CPU_AND_MEMORY = pod({"cpu": "1000m", "memory": "2000"}, {"cpu": "2000m", "memory": "3000"})


@pytest.mark.parametrize(
    ("case", "incoming", "existing", "cpu", "memory", "want"),
    [
        ("nothing scheduled, resources requested, differently sized nodes: node1", CPU_AND_MEMORY, [], "4000m", "10000", 87),
        ("nothing scheduled, resources requested, differently sized nodes: node2", CPU_AND_MEMORY, [], "6000m", "10000", 100),
        ("resources requested, pods scheduled with resources: node1", CPU_AND_MEMORY, [CPU_ONLY], "10000m", "20000", 82),
        ("resources requested, pods scheduled with resources: node2", CPU_AND_MEMORY, [CPU_AND_MEMORY], "10000m", "20000", 95),
        ("resources requested, pods scheduled with resources, differently sized nodes: node2", CPU_AND_MEMORY, [CPU_AND_MEMORY], "10000m", "50000", 80),
        ("requested resources at node capacity: node1", CPU_ONLY, [CPU_ONLY], "6000m", "10000", 50),
        ("requested resources at node capacity: node2", CPU_ONLY, [CPU_AND_MEMORY], "6000m", "10000", 75),
        ("node without the scalar resource should skip the scalar resource", CPU_AND_MEMORY, [], "3500m", "40000", 63),
        ("nothing scheduled, nothing requested, skip in PreScore", NOTHING, [], "4000m", "10000", None),
    ],
)  # fmt: skip
def test_balanced_allocation(case: str, incoming: Obj, existing: list[Obj], cpu: str, memory: str, want: int) -> None:
    n = node(cpu, memory)
    assert balanced(requests(incoming), held(*existing), allocatable(n)) == want


def test_a_container_without_requests_is_best_effort_for_balanced_allocation() -> None:
    """Its non-zero defaults are NodeResourcesFit's alone: BalancedAllocation reads the real
    requests (useRequested), so its PreScore skips the pod (upstream: isBestEffortPod)."""
    n = allocatable(node("4", "8Gi"))
    assert balanced(requests(pod({})), held(), n) is None
    assert (
        fit(requests(pod({})), held(), n) == (3900 * 100 // 4000 + (8 * 2**30 - 200 * 2**20) * 100 // (8 * 2**30)) // 2
    )


def test_the_sum_is_fit_plus_balanced() -> None:
    """The default profile's weights, 1 and 1; a node with more room but lopsided loses to a
    balanced one (the float LeastAllocated mean alone would pick the lopsided node)."""
    incoming = requests(pod({"cpu": "1", "memory": "1Gi"}))
    square = allocatable(node("4", "4Gi"))
    lopsided = allocatable(node("64", "3Gi"))
    assert (fit(incoming, held(), square), balanced(incoming, held(), square)) == (75, 100)
    assert (fit(incoming, held(), lopsided), balanced(incoming, held(), lopsided)) == (82, 84)
    assert noderesources.score(incoming, held(), square) == 175 > noderesources.score(incoming, held(), lopsided) == 166


def bind_one(nodes: dict[str, tuple[str, str]], incoming: Obj, existing: dict[str, list[Obj]] | None = None) -> str:
    """One scheduling pass on a store holding Ready `nodes` (name -> cpu, memory), the pods
    `existing` bound to them, and `incoming` pending: the node it is bound to."""
    store = Store()
    for name, (cpu, memory) in nodes.items():
        status = {"allocatable": {"cpu": cpu, "memory": memory, "pods": "110"}, "conditions": READY}
        store.create(store.builtin("nodes"), "", {"metadata": {"name": name}, "status": status})
    for name, pods in (existing or {}).items():
        for i, p in enumerate(pods):
            body = {"metadata": {"name": f"{name}-{i}"}, "spec": {**p["spec"], "nodeName": name}}
            store.create(store.builtin("pods"), "default", body)
    store.create(store.builtin("pods"), "default", {"metadata": {"name": "incoming"}, "spec": incoming["spec"]})
    Scheduler(store, FakeControl()).schedule_once()
    bound = store.find(store.builtin("pods"), "default", "incoming")
    assert bound is not None
    return bound["spec"]["nodeName"]


def test_the_scheduler_binds_to_the_highest_sum() -> None:
    """test_the_sum_is_fit_plus_balanced's nodes, through a pass."""
    assert bind_one({"lopsided": ("64", "3Gi"), "square": ("4", "4Gi")}, pod({"cpu": "1", "memory": "1Gi"})) == "square"


def test_equal_integer_scores_go_to_the_first_node_by_name() -> None:
    """kube-scheduler picks at random among the nodes with the highest score; the simulator
    takes the first by name. 3010m scores 66 on cpu as 3000m does (2010 * 100 // 3010), and 95
    on balance: a tie, which the float mean (66.78 against 66.67) would have broken."""
    assert bind_one({"n-a": ("3", "4Gi"), "n-b": ("3010m", "4Gi")}, pod({"cpu": "1", "memory": "1Gi"})) == "n-a"


def test_pods_without_requests_count_the_non_zero_defaults_on_their_node() -> None:
    """Two request-less pods hold 200m and 400Mi of n-a's non-zero room: LeastAllocated sends
    the third request-less pod to n-b (BalancedAllocation skips it), though no real request
    is held anywhere."""
    assert bind_one({"n-a": ("1", "1Gi"), "n-b": ("1", "1Gi")}, pod({}), {"n-a": [pod({}), pod({})]}) == "n-b"
