"""`starters.demo --pods N` works for any N: the demo group's maxNodes follows N, and a run that is
stuck says why (MaxNodesReached and the limit) instead of "problems: 0". No server needed."""

from __future__ import annotations

from kubernetes import client

from scaling.kube.models import PodInfo, Resources
from scaling.nodes.catalogue import catalogue_index
from scaling.nodes.models import LABEL_POOL, PodProblem
from scaling.nodes.nodegroups import parse_node_group
from scaling.nodes.providers.kwok import kwok_catalogue
from scaling.nodes.scale_up.planning import plan_scale_up
from scaling.nodes.settings import AutoscalerSettings
from scaling.nodes.state import NodeAutoscalerState
from scaling.nodes.status import status_of
from starters.demo import parse_args
from starters.scenarios.burst import BurstScenario, nodes_by_pool
from starters.scenarios.progress import problem_summary


def burst_pods(n: int) -> list[PodInfo]:
    # The burst workload's requests (starters/scenarios/burst.py).
    return [
        PodInfo(
            namespace="default", name=f"b{i}", uid=f"b{i}", requests=Resources(cpu_m=500, memory=512 * 2**20, pods=1)
        )
        for i in range(n)
    ]


def test_the_demo_group_has_room_for_any_burst() -> None:
    for pods in (40, 1_000, 3_000):
        spec = BurstScenario(parse_args(["--pods", str(pods)])).node_groups()[0]
        group = parse_node_group(spec, {"kwok"})
        plan = plan_scale_up(burst_pods(pods), [], [group], catalogue_index(kwok_catalogue()), [])
        assert plan.problems == [], (pods, plan.problems[:1])
        assert sum(len(n.pod_uids) for n in plan.new_nodes) >= len(plan.new_nodes)  # pods were placed


def test_a_stuck_run_names_the_limit_from_the_status() -> None:
    limit = "node limits reached: node group general maxNodes=50"
    state = NodeAutoscalerState(
        last_problems={
            "shapeA": PodProblem(
                namespace="default", name="b7", uid="b7", reason="MaxNodesReached", message=limit, count=950
            )
        }
    )
    status = status_of(AutoscalerSettings(cluster="demo"), state)
    assert [p.reason for p in status.problems] == ["MaxNodesReached"]
    assert problem_summary(status) == f"problems: MaxNodesReached (950 pods): {limit}"
    assert (
        problem_summary(status_of(AutoscalerSettings(cluster="demo"), NodeAutoscalerState())) == "no planning problems"
    )


def test_decision_latency_matches_pods_to_requests_first_come_first_served() -> None:
    from starters.scenarios.progress import fifo_latencies

    since = [100.0, 101.0, 102.0, 103.0, 104.0]
    # Two requests: one made for 3 pods started at 110, one for 1 pod at 120; the fifth pod fit
    # a request's spare room and has no request of its own.
    assert fifo_latencies(since, [(120.0, 1), (110.0, 3)]) == [10.0, 9.0, 8.0, 17.0]
    assert fifo_latencies(since, []) == []


def test_the_summary_counts_nodes_and_pods_per_pool_and_what_a_node_holds() -> None:
    def node(name: str, pool: str, cpu: str, memory: str) -> client.V1Node:
        return client.V1Node(
            metadata=client.V1ObjectMeta(name=name, labels={LABEL_POOL: pool}),
            status=client.V1NodeStatus(allocatable={"cpu": cpu, "memory": memory, "pods": "110"}),
        )

    # The kwok cx22 and cx32 as the catalogue gives them: 3 and 7 of the burst's pods (500m, 512Mi).
    nodes = [node("a", "kwok-cx22", "1930m", "3043328Ki"), node("b", "kwok-cx32", "3920m", "6398771Ki")]
    nodes.append(node("c", "kwok-cx32", "3920m", "6398771Ki"))
    running_on = {"a": 3, "b": 7, "c": 1, "elsewhere": 2}
    assert nodes_by_pool(nodes, running_on, {"cpu": "500m", "memory": "512Mi"}) == {
        "kwok-cx22": {"nodes": 1, "pods": 3, "pods_per_node": 3},
        "kwok-cx32": {"nodes": 2, "pods": 8, "pods_per_node": 7},
    }
