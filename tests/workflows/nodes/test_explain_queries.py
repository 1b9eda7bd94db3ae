"""The NodeAutoscaler's explain_pod / explain_node queries, answered by a running loop
(stub activities under the real names, the real planner and scale-down evaluation)."""

from __future__ import annotations

import pytest
from temporalio.client import WorkflowHandle
from temporalio.testing import WorkflowEnvironment

from activities.updates import execute_update
from scaling.kube.models import PodInfo
from scaling.nodes.contracts import ClusterObservation, ScaleDownObservation
from scaling.nodes.explain import ExplainNodeInput, ExplainPodInput, PodExplanation
from scaling.nodes.models import NodeGroup, PoolSpec
from scaling.nodes.scale_up.demand import demand_key
from tests.polling import until
from tests.workflows.nodes.stubs import World
from tests.workflows.nodes.test_node_autoscaler import GENERAL, pod, running  # noqa: F401 (fixture)
from tests.workflows.nodes.test_node_scale_down import (  # noqa: F401 (worker is a fixture)
    DownWorld,
    app_pod,
    node,
    start_autoscaler,
    worker,
)
from tests.workflows.polling import eventually
from workflows.nodes.autoscaler import NodeAutoscalerWorkflow

GIB = 1 << 30


@pytest.fixture
def env(dev_env: WorkflowEnvironment) -> WorkflowEnvironment:
    return dev_env


async def ask_pod(h: WorkflowHandle, p: PodInfo) -> PodExplanation:
    inp = ExplainPodInput(namespace=p.namespace, name=p.name, uid=p.uid, key=demand_key(p))
    return await h.query(NodeAutoscalerWorkflow.explain_pod, inp)


async def test_explain_pod_names_its_request_or_the_reason_there_is_none(running) -> None:  # noqa: ANN001
    world = World(hold_readiness=True)  # requests stay Provisioning
    web = [pod(i) for i in range(12)]  # one shape; more pods than the observer names
    huge = pod(100, cpu_m=500_000)  # no type of any pool holds 500 CPUs
    on_mars = pod(200).model_copy(update={"node_selector": {"zone": "mars"}})  # no group matches
    world.observation = ClusterObservation(unschedulable=[*web, huge, on_mars], groups=[GENERAL])
    h = await running(world)
    status = await eventually(h, lambda s: s.in_flight and s.never_satisfiable and s.last_loop.problems >= 1)

    named = await ask_pod(h, web[0])
    assert named.outcome == "InFlight"
    assert named.requests[0].id in {r.id for r in status.in_flight} and named.requests[0].names_pod
    assert named.requests[0].group == "general" and named.requests[0].pool == "kwok-cx22"
    # A pod no request names by uid is found by its shape, with the shape's pods counted.
    unnamed = await ask_pod(h, web[11])
    assert unnamed.outcome == "InFlight" and not unnamed.requests[0].names_pod
    assert sum(r.pods_of_shape for r in unnamed.requests) == 12

    never = await ask_pod(h, huge)
    assert never.outcome == "NeverSatisfiable" and "NeverSatisfiable" == never.problem.reason
    mars = await ask_pod(h, on_mars)
    assert mars.outcome == "Problem" and mars.problem.reason == "NoMatchingNodeGroup"
    assert mars.shape_pending == 1

    stranger = await ask_pod(h, pod(999, cpu_m=123))
    assert stranger.outcome == "NotSeen" and stranger.last_loop_at is not None


async def test_explain_node_names_the_timer_the_blocker_and_protection(env: WorkflowEnvironment, worker) -> None:  # noqa: ANN001
    group = NodeGroup(
        name="g",
        pools=[PoolSpec(provider="kwok", serverType=["cx22"], priority=10)],
        scaleDown={"unneeded_time_s": 3600},
    )
    world = DownWorld()
    solo = app_pod("solo", "b").model_copy(update={"controller_kind": None})  # no controller: never evicted
    nodes = [node("a"), node("b")]
    world.observation = ClusterObservation(nodes=nodes, groups=[group])
    world.down_obs = ScaleDownObservation(nodes=nodes, pods=[app_pod("web-1", "a"), solo], groups=[group])
    tq, handles = await worker(world)
    h = await start_autoscaler(env, world, handles, tq)

    async def explained(name: str, outcome: str):  # noqa: ANN202
        e = await h.query(NodeAutoscalerWorkflow.explain_node, ExplainNodeInput(name=name, managed=True))
        return e if e.outcome == outcome else None

    waiting = await until(lambda: explained("a", "UnneededWaiting"))
    assert waiting.unneeded_since is not None and waiting.removable_at == waiting.unneeded_since + 3600
    assert "removal at" in waiting.summary and waiting.evaluated_at is not None
    kept = await until(lambda: explained("b", "Kept"))
    assert kept.candidate.reason == "NotReplicated" and "default/solo" in kept.summary

    await execute_update(h, NodeAutoscalerWorkflow.protect_node, "a")
    protected = await h.query(NodeAutoscalerWorkflow.explain_node, ExplainNodeInput(name="a"))
    assert protected.outcome == "Protected"
