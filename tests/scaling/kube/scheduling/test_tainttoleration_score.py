"""TaintToleration's score: the PreferNoSchedule taints a pod does not tolerate, normalized over the
nodes, fewest best. The cases of TestTaintTolerationScore in kubernetes/kubernetes
pkg/scheduler/framework/plugins/tainttoleration/taint_toleration_test.go (the numeric Gt/Lt ones,
behind a feature gate, left out), scores divided by the plugin's weight; then what the arrivals play
makes of it."""

from __future__ import annotations

import pytest

from scaling.kube.models import NodeInfo, PodInfo, Resources, Taint, Toleration
from scaling.kube.scheduling import arrivals
from scaling.kube.scheduling.arrivals import Target, stranded
from scaling.kube.scheduling.tainttoleration import WEIGHT, preferred_untolerated, weighted_scores

PREFER = "PreferNoSchedule"


def soft(key: str, value: str) -> Taint:
    return Taint(key=key, value=value, effect=PREFER)


def scores(tolerations: list[Toleration], nodes: list[list[Taint]]) -> list[int]:
    return [s // WEIGHT for s in weighted_scores([preferred_untolerated(tolerations, taints) for taints in nodes])]


@pytest.mark.parametrize(
    ("tolerations", "nodes", "expected"),
    [
        pytest.param(
            [Toleration(key="foo", operator="Equal", value="bar", effect=PREFER)],
            [[soft("foo", "bar")], [soft("foo", "blah")]],
            [100, 0],
            id="node with taints tolerated by the pod, gets a higher score than those node with intolerable taints",
        ),
        pytest.param(
            [
                Toleration(key="cpu-type", operator="Equal", value="arm64", effect=PREFER),
                Toleration(key="disk-type", operator="Equal", value="ssd", effect=PREFER),
            ],
            [[], [soft("cpu-type", "arm64")], [soft("cpu-type", "arm64"), soft("disk-type", "ssd")]],
            [100, 100, 100],
            id="the nodes that all of their taints are tolerated by the pod, get the same score",
        ),
        pytest.param(
            [Toleration(key="foo", operator="Equal", value="bar", effect=PREFER)],
            [[], [soft("cpu-type", "arm64")], [soft("cpu-type", "arm64"), soft("disk-type", "ssd")]],
            [100, 50, 0],
            id="the more intolerable taints a node has, the lower score it gets",
        ),
        pytest.param(
            [
                Toleration(key="cpu-type", operator="Equal", value="arm64", effect="NoSchedule"),
                Toleration(key="disk-type", operator="Equal", value="ssd", effect="NoSchedule"),
            ],
            [
                [],
                [Taint(key="cpu-type", value="arm64", effect="NoSchedule")],
                [soft("cpu-type", "arm64"), soft("disk-type", "ssd")],
            ],
            [100, 100, 0],
            id="only taints and tolerations that have effect PreferNoSchedule are checked",
        ),
        pytest.param([], [[], [soft("cpu-type", "arm64")]], [100, 0], id="no tolerations lands on node with no taints"),
    ],
)
def test_upstream_score_cases(tolerations: list[Toleration], nodes: list[list[Taint]], expected: list[int]) -> None:
    assert scores(tolerations, nodes) == expected


def test_an_empty_effect_toleration_counts_and_no_feasible_node_no_score() -> None:
    assert scores([Toleration(key="foo", operator="Exists")], [[soft("foo", "1")], []]) == [100, 100]
    assert weighted_scores([]) == []


GI = 1024**3
CPU, MEM = 3920, 6 * GI
CANDIDATE = Taint(key="DeletionCandidateOfClusterAutoscaler", value="1", effect=PREFER)


def target(name: str, cpu: int, taints: list[Taint] | None = None) -> Target:
    node = NodeInfo(name=name, allocatable=Resources(cpu_m=CPU, memory=MEM, pods=110), ready=True, taints=taints or [])
    return Target(node, (CPU - cpu, MEM, 100), (cpu, 0, cpu, 0))


def pod(name: str, cpu: int, **kw: object) -> PodInfo:
    return PodInfo(namespace="default", name=name, uid=name, requests=Resources(cpu_m=cpu, memory=GI, pods=1), **kw)


def admits_all(p: PodInfo, n: NodeInfo) -> bool:
    return True


def test_a_soft_tainted_node_takes_a_pod_only_when_no_other_fits() -> None:
    # The emptier node is soft-tainted for deletion: the small pod goes to the fuller untainted one
    # (by resources alone it would take the empty node and leave the large one no room), and the
    # large one, which fits only the tainted node, still lands there (PreferNoSchedule never filters).
    waiting, busy = target("waiting", 0, [CANDIDATE]), target("busy", CPU - 1000)
    small, large = pod("small", 1000), pod("large", 3000)
    assert arrivals.bound_in_turn([small, large], [waiting, busy], admits_all) == [1, 0]
    assert stranded([small, large], [waiting, busy], admits_all).stranded is None
    # Without the taint the small pod may take the empty node first: the large one is stranded.
    plain = target("waiting", 0)
    assert arrivals.bound_in_turn([small, large], [plain, busy], admits_all) == [0, -1]
    assert stranded([small, large], [plain, busy], admits_all).stranded == large
    # A pod that tolerates the taint is scored by room alone.
    tolerant = pod("small", 1000, tolerations=[Toleration(key=CANDIDATE.key, operator="Exists", effect=PREFER)])
    assert arrivals.bound_in_turn([tolerant, large], [waiting, busy], admits_all) == [0, -1]
