"""NodeAutoscaler loop: planning, in-flight accounting, problems, continue-as-new and operator
overrides. Activities are stubs under the real names; the planner is the real one from scaling/.

The loop runs in real time (short scan intervals) and is watched through its status query, so
these tests use the dev server: the time-skipping server stalled them under CPU load."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, timedelta

import pytest
from temporalio.client import WorkflowExecutionStatus, WorkflowHandle, WorkflowUpdateFailedError
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from activities.updates import execute_update
from scaling.kube.labels import request_key
from scaling.kube.models import NodeInfo, PodInfo, Resources, Taint
from scaling.nodes import contracts
from scaling.nodes.contracts import ClusterObservation
from scaling.nodes.models import (
    LABEL_GROUP,
    LABEL_POOL,
    LABEL_REQUEST,
    GroupLimits,
    NodeGroup,
    PoolSpec,
    RequestPhase,
    SpecProblem,
)
from scaling.nodes.scale_up.batches import BATCH_MAX
from scaling.nodes.scale_up.requests import member_id, split_request_id
from scaling.nodes.settings import AutoscalerSettings
from scaling.nodes.state import AutoscalerInput
from starters.autoscaler import format_status
from tests.polling import until
from tests.workflows.cleanup import stop_worker, terminate_runs
from tests.workflows.nodes.stubs import World
from tests.workflows.polling import eventually, signalled
from tests.workflows.task_times import task_started_after
from tests.workflows.workers import new_worker
from workflows.nodes.autoscaler import NodeAutoscalerWorkflow

GIB = 1 << 30


def pod(i: int, cpu_m: int = 500, memory: int = GIB // 2) -> PodInfo:
    return PodInfo(
        namespace="default",
        name=f"web-{i}",
        uid=f"uid-{i}",
        requests=Resources(cpu_m=cpu_m, memory=memory, pods=1),
        unschedulable=True,
        controller_kind="ReplicaSet",
    )


GENERAL = NodeGroup(
    name="general",
    pools=[
        PoolSpec(provider="kwok", serverType=["cx22"], priority=100),
        PoolSpec(provider="kwok", serverType=["cx32"], priority=50),
    ],
)


async def start(env: WorkflowEnvironment, world: World, **settings) -> tuple[WorkflowHandle, Worker]:
    tq = f"tq-{uuid.uuid4().hex[:6]}"
    worker = new_worker(env.client, tq, activities=world.activities())
    await worker.__aenter__()
    cluster = f"c{uuid.uuid4().hex[:6]}"
    handle = await env.client.start_workflow(
        NodeAutoscalerWorkflow.run,
        AutoscalerInput(
            settings=AutoscalerSettings(
                **{
                    "cluster": cluster,
                    "scan_interval_s": 0.2,
                    "readiness_timeout_s": 60,
                    "machine_gc": False,
                    **settings,
                }
            )
        ),
        id=f"nodes/{cluster}",
        task_queue=tq,
    )
    return handle, worker


async def timers_fired(handle: WorkflowHandle) -> int:
    fired = [e async for e in handle.fetch_history_events() if e.HasField("timer_fired_event_attributes")]
    return len(fired)


@pytest.fixture
def env(dev_env: WorkflowEnvironment) -> WorkflowEnvironment:
    return dev_env


@pytest.fixture
async def running(env: WorkflowEnvironment):
    started: list[tuple[WorkflowHandle, Worker, World]] = []

    async def _start(world: World, **settings) -> WorkflowHandle:
        h, w = await start(env, world, **settings)
        started.append((h, w, world))
        return h

    yield _start
    # Leave nothing running: the loop and every request or batch it started, those that created
    # nothing too (a batch whose first task failed under load held its worker's shutdown).
    for h, w, world in started:
        world.hold_readiness = False
        created = {split_request_id(c.request_id)[0] for c in world.created}  # requests, batches
        await terminate_runs(env.client, [h.id, *created], under=f"{h.id}/")
        await stop_worker(w)
        await terminate_runs(env.client, under=f"{h.id}/")  # any its last activities started meanwhile


async def test_a_wake_during_an_iteration_starts_the_next_one_at_once(running) -> None:  # noqa: ANN001
    """scan_now while the loop observes asks for an iteration after it: the next one starts as
    this one ends, not a scan interval (an hour here) later. It was reset after the iteration, so
    a wake that came during one was forgotten (patch wake-kept-during-round)."""
    world = World(hold_observe=asyncio.Event())
    handle = await running(world, scan_interval_s=3600)
    await until(lambda: world.observe_calls == 1, what="the first observation")
    await handle.signal(NodeAutoscalerWorkflow.scan_now)
    await until(lambda: signalled(handle), what="scan_now in the history, the observation still held")
    world.hold_observe.set()
    status = await eventually(handle, lambda s: s.iterations >= 2)
    assert status.iterations == 2
    # An iteration counts itself before it observes: its observation follows.
    await until(lambda: world.observe_calls == 2, what="the second iteration's observation")


async def test_requests_are_timed_by_the_loop_before_its_decision_not_after_it(running) -> None:  # noqa: ANN001
    """The decision is a local activity: the workflow's time after one may differ on replay (a
    workflow task that ended between its end and the workflow seeing it), so a request's start
    is the time the loop read before deciding: the workflow task the observation's answer
    started. Here the decision takes half a second, and the request's time is not moved by it."""
    world = World(hold_readiness=True, plan_s=0.5)
    world.observation = ClusterObservation(unschedulable=[pod(0)], groups=[GENERAL])
    handle = await running(world)
    status = await eventually(handle, lambda s: bool(s.in_flight))
    events = [e async for e in handle.fetch_history_events()]
    planned = next(i for i, e in enumerate(events) if e.HasField("marker_recorded_event_attributes"))
    observed = max(i for i, e in enumerate(events[:planned]) if e.HasField("activity_task_completed_event_attributes"))
    decided_from = task_started_after(events, events[observed].event_id)
    started = status.in_flight[0].started_at
    assert abs(started - decided_from) < timedelta(milliseconds=1), (started, decided_from)
    assert events[planned].event_time.ToDatetime(tzinfo=UTC) >= started + timedelta(seconds=0.5)


async def test_in_flight_requests_are_not_double_counted(running) -> None:  # noqa: ANN001
    world = World(hold_readiness=True)  # requests stay Provisioning while the loop keeps running
    world.observation = ClusterObservation(unschedulable=[pod(i) for i in range(6)], groups=[GENERAL])
    handle = await running(world)
    first = await eventually(handle, lambda s: s.iterations >= 1 and s.in_flight)
    planned = len(first.in_flight)
    status = await eventually(handle, lambda s: s.iterations >= first.iterations + 4)
    # The same six pods were seen unschedulable in every loop, yet no request was added for them.
    assert len(status.in_flight) == planned
    assert len(world.created) == planned
    assert status.last_loop.covered_in_flight == 6
    # Requests hold their pods by shape and count (all six pods share one shape).
    assert sum(n for r in status.in_flight for n in r.pods.values()) == 6


async def test_a_run_fetches_the_catalogue_once_while_pods_stay_pending(running) -> None:  # noqa: ANN001
    """A burst's loops come seconds apart: each used to fetch the catalogue after observing, an
    activity and a workflow task more before its requests started. A run keeps what it fetched
    (scaling.nodes.catalogue.CATALOGUE_KEPT_S); the next run fetches it again."""
    world = World(hold_readiness=True)  # the pods stay pending (covered by requests in flight)
    world.observation = ClusterObservation(unschedulable=[pod(i) for i in range(6)], groups=[GENERAL])
    handle = await running(world, iterations_per_run=4)
    status = await eventually(handle, lambda s: s.iterations >= 9)  # into the third run
    calls = world.catalogue_calls
    later = await handle.query(NodeAutoscalerWorkflow.status)
    # At most one fetch per run (`runs` counts from 1), not one per loop with pods pending.
    assert 1 <= calls <= later.runs < status.iterations


async def test_planned_requests_start_together_in_one_activity(running, env) -> None:  # noqa: ANN001
    # Each pod fills a cx22 (1.5 of 2 CPUs): one loop plans a node per pod, more than one
    # NodeRequestBatch holds.
    n = BATCH_MAX + 10
    world = World(hold_readiness=True)
    world.observation = ClusterObservation(unschedulable=[pod(i, cpu_m=1500) for i in range(n)], groups=[GENERAL])
    handle = await running(world)
    status = await eventually(handle, lambda s: len(s.in_flight) == n)
    starts = [
        e.activity_task_scheduled_event_attributes
        async for e in handle.fetch_history_events()
        if e.HasField("activity_task_scheduled_event_attributes")
        and e.activity_task_scheduled_event_attributes.activity_type.name == contracts.START_NODE_REQUESTS
    ]
    # One activity started them all (up to START_BATCH nodes), not a child each.
    assert len(starts) == 1
    await until(lambda: len(world.created) == n)  # each member runs and creates its node
    assert sorted(c.request_id for c in world.created) == sorted(r.id for r in status.in_flight)
    # Identical nodes: two batches, the first full; each node in flight as `<batch>#<index>`.
    members: dict[str, list[int]] = {}
    for r in status.in_flight:
        batch_id, index = split_request_id(r.id)
        assert index is not None
        members.setdefault(batch_id, []).append(index)
    assert sorted(sorted(m) for m in members.values()) == [list(range(10)), list(range(BATCH_MAX))]
    for batch_id in members:
        assert (await env.client.get_workflow_handle(batch_id).describe()).status == WorkflowExecutionStatus.RUNNING


async def test_a_ready_node_whose_request_is_still_in_flight_counts_once(running) -> None:  # noqa: ANN001
    """A node is Ready seconds before its request reports it. In that window the observation
    has the node, with room, while the request is still in flight: the planner counts the node
    and not the request too, or its room would hide pods that need another node."""
    world = World(hold_readiness=True)  # the requests stay Provisioning
    world.observation = ClusterObservation(unschedulable=[pod(i, cpu_m=1500) for i in range(4)], groups=[GENERAL])
    # Scale-down off: these stubs do not observe for it (growth nodes exist here).
    handle = await running(world, scale_down_enabled=False)
    first = await eventually(handle, lambda s: len(s.in_flight) == 4)  # a cx22 per pod
    # Their four nodes are Ready, the pods not bound yet, and two more pods came.
    landed = [
        NodeInfo(
            name=f"node-{i}",
            labels={LABEL_GROUP: "general", LABEL_POOL: r.current_pool, LABEL_REQUEST: request_key(r.id)},
            allocatable=Resources(cpu_m=2000, memory=4 * GIB, pods=110),
            ready=True,
        )
        for i, r in enumerate(first.in_flight)
    ]
    world.observation = ClusterObservation(
        unschedulable=[pod(i, cpu_m=1500) for i in range(6)], nodes=landed, groups=[GENERAL]
    )
    status = await eventually(handle, lambda s: s.last_loop.nodes == 4 and s.last_loop.unschedulable == 6)
    status = await eventually(handle, lambda s: s.iterations >= status.iterations + 2)
    assert len(world.created) == 6  # two more nodes, for the two new pods
    assert status.last_loop.fits_existing == 4 and status.last_loop.covered_in_flight == 2


async def test_a_request_reported_ready_covers_its_pods_until_an_observation_shows_its_node(running) -> None:  # noqa: ANN001
    """The readiness wait may see a node Ready on the API server before the cache the loop
    observes from does (its watch lags under load, or the observation runs on another replica):
    the observation after the Ready report then has the pods still pending and no Ready node for
    them. The request still covers its pods until an observation shows its node Ready; it was
    forgotten once it reported, and the pods got a second node (the storage demo bought 7 nodes
    for 3 under load)."""
    world = World()  # every node is Ready at once
    world.observation = ClusterObservation(unschedulable=[pod(i, cpu_m=1500) for i in range(2)], groups=[GENERAL])
    # Scale-down off: these stubs do not observe for it (growth nodes exist here).
    handle = await running(world, scale_down_enabled=False)
    ready = await eventually(handle, lambda s: s.nodes_created == 2)  # a cx22 per pod
    status = await eventually(handle, lambda s: s.iterations >= ready.iterations + 3)
    # The cache still shows neither node: no request more for their pods.
    assert len(world.created) == 2
    assert status.last_loop.covered_in_flight == 2 and status.last_loop.planned_nodes == 0
    # Once the observation has the nodes Ready (the pods not bound yet), their room counts, once.
    world.observation = ClusterObservation(
        unschedulable=[pod(i, cpu_m=1500) for i in range(2)],
        nodes=[
            NodeInfo(
                name=world.machines[(c.request_id, c.attempt)],
                labels={LABEL_GROUP: "general", LABEL_POOL: c.pool.name, LABEL_REQUEST: request_key(c.request_id)},
                allocatable=Resources(cpu_m=2000, memory=4 * GIB, pods=110),
                ready=True,
            )
            for c in world.created
        ],
        groups=[GENERAL],
    )
    seen = await eventually(handle, lambda s: s.last_loop.nodes == 2)
    status = await eventually(handle, lambda s: s.iterations >= seen.iterations + 2)
    assert status.last_loop.fits_existing == 2 and status.last_loop.covered_in_flight == 0
    assert len(world.created) == 2


async def test_pools_below_min_nodes_get_requests_once(running) -> None:  # noqa: ANN001
    """No pending pod, one node in a pool with minNodes 3: two requests pinned to that pool, and
    no more in later loops while they are in flight (CA's --enforce-node-group-min-size)."""
    group = NodeGroup(
        name="general",
        pools=[
            PoolSpec(provider="kwok", serverType=["cx22"], priority=100, minNodes=3),
            PoolSpec(provider="kwok", serverType=["cx32"], priority=50),
        ],
    )
    have = NodeInfo(name="n1", labels={LABEL_GROUP: "general", LABEL_POOL: "kwok-cx22"}, ready=True)
    world = World(hold_readiness=True)
    world.observation = ClusterObservation(nodes=[have], groups=[group])
    # Scale-down off: these stubs do not observe for it (a growth node exists here).
    handle = await running(world, scale_down_enabled=False)
    first = await eventually(handle, lambda s: len(s.in_flight) >= 2)
    status = await eventually(handle, lambda s: s.iterations >= first.iterations + 4)
    assert len(status.in_flight) == 2 and len(world.created) == 2
    assert {(c.pool.name, c.request_id in {r.id for r in status.in_flight}) for c in world.created} == {
        ("kwok-cx22", True)
    }

    off = World(hold_readiness=True)
    off.observation = ClusterObservation(nodes=[have], groups=[group])
    handle = await running(off, enforce_min_nodes=False, scale_down_enabled=False)
    status = await eventually(handle, lambda s: s.iterations >= 4)
    assert status.in_flight == [] and off.created == []


async def test_headroom_gets_a_node_with_no_pending_pod_and_never_an_event(running) -> None:  # noqa: ANN001
    """A group with headroom and no pod gets one request sized for it, not repeated while in
    flight; the virtual pods get no events (a headroom no type can hold is in the loop summary)."""
    warm = NodeGroup(
        name="warm",
        pools=[PoolSpec(provider="kwok", serverType=["cx22", "cx32"], priority=10)],
        headroom=Resources(cpu_m=3000, memory=2 * GIB, pods=1),  # more than a cx22 holds
    )
    huge = NodeGroup(
        name="huge",
        taints=[Taint(key="dedicated", value="huge")],
        pools=[PoolSpec(provider="kwok", serverType=["cx22"], priority=10)],
        headroom=Resources(cpu_m=64_000, pods=1),  # no server type holds it
    )
    world = World(hold_readiness=True)
    world.observation = ClusterObservation(groups=[warm, huge])
    # Scale-down off: these stubs do not observe for it.
    handle = await running(world, scale_down_enabled=False)
    first = await eventually(handle, lambda s: s.in_flight and s.last_loop.headroom_problems)
    status = await eventually(handle, lambda s: s.iterations >= first.iterations + 4)
    [request] = status.in_flight
    assert (request.group, request.current_pool, request.pod_uids) == ("warm", "kwok-cx32", ["headroom/warm"])
    assert request.requirements == Resources(cpu_m=3000, memory=2 * GIB, pods=1)
    assert len(world.created) == 1
    assert [(p.uid, p.reason) for p in status.last_loop.headroom_problems] == [("headroom/huge", "NeverSatisfiable")]
    assert "  headroom/huge: NeverSatisfiable: pod requests cpu=64" in format_status(status)  # the CLI's status
    assert status.never_satisfiable == [] and status.last_loop.problems == 0
    assert world.events == []  # neither TriggeredScaleUp nor NotTriggerScaleUp for a virtual pod

    # A real pod that does not fit the spare room of the headroom's node gets a node and its event.
    world.observation = ClusterObservation(unschedulable=[pod(1, cpu_m=1500)], groups=[warm, huge])
    await until(lambda: any(e.pod_uid == "uid-1" for e in world.events))
    assert {(e.pod_uid, e.reason) for e in world.events} == {("uid-1", "TriggeredScaleUp")}
    await until(lambda: len(world.created) == 2)  # its request's machine (the child starts it)


async def test_requests_fall_back_and_are_recorded(running) -> None:  # noqa: ANN001
    world = World(no_capacity_pools={"kwok-cx22"})
    world.observation = ClusterObservation(unschedulable=[pod(i) for i in range(3)], groups=[GENERAL])
    handle = await running(world)
    await until(lambda: bool(world.labelled))  # a node is Ready: the scheduler places the pods
    world.observation = ClusterObservation(groups=[GENERAL])
    status = await eventually(handle, lambda s: s.requests_by_phase.get("Ready", 0) >= 1 and not s.in_flight)
    assert status.attempts_by_pool["kwok-cx22"]["InsufficientCapacity"] >= 1
    assert status.attempts_by_pool["kwok-cx32"]["Ready"] >= 1
    assert status.nodes_created == status.requests_by_phase["Ready"]
    reasons = {e.reason for e in world.events}
    assert "TriggeredScaleUp" in reasons


async def test_pod_too_large_is_never_satisfiable_and_others_still_served(running) -> None:  # noqa: ANN001
    world = World(hold_readiness=True)
    huge = pod(99, cpu_m=500_000)
    world.observation = ClusterObservation(unschedulable=[huge, pod(1)], groups=[GENERAL])
    handle = await running(world)
    status = await eventually(handle, lambda s: s.iterations >= 4 and s.in_flight)
    assert [p.uid for p in status.never_satisfiable] == ["uid-99"]
    assert status.never_satisfiable[0].reason == "NeverSatisfiable"
    assert all("uid-99" not in r.pod_uids for r in status.in_flight)
    assert any("uid-1" in r.pod_uids for r in status.in_flight)
    # Reported once, not every loop.
    warnings = [e for e in world.events if e.pod_uid == "uid-99"]
    assert len(warnings) == 1 and warnings[0].reason == "NotTriggerScaleUp"


@pytest.mark.parametrize("where", ["group", "cluster"])
async def test_price_caps_stop_the_plan_and_say_which_cap(running, where: str) -> None:  # noqa: ANN001
    # cx22 costs 0.006/h in the bundled catalogue: a cap of 0.01 pays for one node of the three.
    group = NodeGroup(name="capped", pools=[PoolSpec(provider="kwok", serverType=["cx22"], priority=10)])
    settings: dict = {}
    if where == "group":
        group.limits = GroupLimits(pricePerHour=0.01)
        cap = "node group capped pricePerHour=0.01"
    else:
        settings["max_price_per_hour_total"] = 0.01
        cap = "cluster max_price_per_hour_total=0.01"
    world = World(hold_readiness=True)
    world.observation = ClusterObservation(unschedulable=[pod(i, cpu_m=1500) for i in range(3)], groups=[group])
    handle = await running(world, **settings)
    status = await eventually(handle, lambda s: s.iterations >= 3 and bool(s.in_flight) and bool(s.problems))
    assert len(status.in_flight) == 1  # later loops count it as spending the cap: never a second
    assert {p.reason for p in status.problems} == {"PriceLimitReached"}
    assert cap in status.problems[0].message
    warnings = [e for e in world.events if e.reason == "NotTriggerScaleUp"]
    assert len(warnings) == 2 and all(cap in e.message for e in warnings)


async def test_continue_as_new_carries_in_flight_requests(running) -> None:  # noqa: ANN001
    world = World(hold_readiness=True)
    world.observation = ClusterObservation(unschedulable=[pod(i) for i in range(4)], groups=[GENERAL])
    handle = await running(world, iterations_per_run=2)
    # Queries racing the continue-as-new hand-overs (every 0.4 s here) stalled the Java test
    # server under load. So: wait for three runs' worth of loops on the stubs' side, pause the
    # loop (a paused loop does not continue-as-new), and only then ask.
    await until(lambda: world.observe_calls >= 7 and bool(world.created))
    await handle.signal(NodeAutoscalerWorkflow.pause)
    status = await eventually(handle, lambda s: s.paused and s.runs >= 3, timeout=60)
    planned = {c.request_id for c in world.created}
    assert {r.id for r in status.in_flight} == planned  # carried through every run
    assert len(world.created) == len(planned)  # and never planned again
    # The children still report to the latest run: release them and watch them finish.
    world.hold_readiness = False
    await until(lambda: len(world.labelled) == len(planned))
    done = await eventually(handle, lambda s: not s.in_flight, timeout=60)
    assert done.requests_by_phase.get("Ready") == len(planned)


async def test_cancel_request_update_validates_and_cancels(running) -> None:  # noqa: ANN001
    world = World(hold_readiness=True)
    world.observation = ClusterObservation(unschedulable=[pod(1)], groups=[GENERAL])
    handle = await running(world)
    status = await eventually(handle, lambda s: any(r.phase == RequestPhase.PROVISIONING for r in s.in_flight))
    with pytest.raises(WorkflowUpdateFailedError) as err:
        await execute_update(handle, NodeAutoscalerWorkflow.cancel_request, "nodes/nope/request/1")
    assert "request_id" in str(err.value.cause)
    world.observation = ClusterObservation(groups=[GENERAL])  # stop re-planning for the pod
    rid = status.in_flight[0].id
    await execute_update(handle, NodeAutoscalerWorkflow.cancel_request, rid)
    done = await eventually(handle, lambda s: not s.in_flight)
    cancelled = [r for r in done.recent if r.id == rid][0]
    assert cancelled.phase == RequestPhase.UNMET and cancelled.attempts[-1].result.value == "Cancelled"
    assert world.deleted == [cancelled.attempts[-1].node_name]


async def test_cancel_request_takes_a_member_or_a_whole_batch(running) -> None:  # noqa: ANN001
    world = World(hold_readiness=True)
    world.observation = ClusterObservation(unschedulable=[pod(i, cpu_m=1500) for i in range(3)], groups=[GENERAL])
    handle = await running(world)
    status = await eventually(
        handle, lambda s: len(s.in_flight) == 3 and all(r.phase == RequestPhase.PROVISIONING for r in s.in_flight)
    )
    world.observation = ClusterObservation(groups=[GENERAL])  # stop re-planning for the pods
    (batch_id,) = {split_request_id(r.id)[0] for r in status.in_flight}
    with pytest.raises(WorkflowUpdateFailedError) as err:
        await execute_update(handle, NodeAutoscalerWorkflow.cancel_request, f"{batch_id}#7")
    assert "request_id" in str(err.value.cause)
    one = member_id(batch_id, 1)
    assert await execute_update(handle, NodeAutoscalerWorkflow.cancel_request, one) == f"cancel sent to {one}"
    status = await eventually(handle, lambda s: len(s.in_flight) == 2)
    assert one not in {r.id for r in status.in_flight}
    (cancelled,) = [r for r in status.recent if r.id == one]
    assert cancelled.phase == RequestPhase.UNMET and cancelled.attempts[-1].result.value == "Cancelled"
    await execute_update(handle, NodeAutoscalerWorkflow.cancel_request, batch_id)  # the rest
    done = await eventually(handle, lambda s: not s.in_flight)
    assert sorted(r.id for r in done.recent if r.phase == RequestPhase.UNMET) == [
        member_id(batch_id, i) for i in range(3)
    ]
    assert len(world.deleted) == 3


async def test_a_batch_reports_to_the_loop_in_fewer_signals_than_nodes(running) -> None:  # noqa: ANN001
    n = 20
    world = World(hold_readiness=True)  # in flight (their pods covered) until the pods are gone
    world.observation = ClusterObservation(unschedulable=[pod(i, cpu_m=1500) for i in range(n)], groups=[GENERAL])
    handle = await running(world, scale_down_enabled=False)
    await until(lambda: len(world.created) == n)
    world.observation = ClusterObservation(groups=[GENERAL])
    world.hold_readiness = False
    done = await eventually(handle, lambda s: not s.in_flight and s.requests_by_phase.get("Ready") == n)
    assert done.nodes_created == n
    names = [
        e.workflow_execution_signaled_event_attributes.signal_name
        async for e in handle.fetch_history_events()
        if e.HasField("workflow_execution_signaled_event_attributes")
    ]
    # Each node changed twice (Provisioning, Ready); one batch sent them in a few signals.
    assert "request_changed" not in names
    assert 1 <= names.count(contracts.REQUESTS_CHANGED) < n


async def test_pause_stops_planning_until_resumed(running) -> None:  # noqa: ANN001
    world = World(hold_readiness=True)
    world.observation = ClusterObservation(groups=[GENERAL])
    handle = await running(world)
    await eventually(handle, lambda s: s.iterations >= 1)
    await handle.signal(NodeAutoscalerWorkflow.pause)
    paused = await eventually(handle, lambda s: s.paused)
    world.observation = ClusterObservation(unschedulable=[pod(1)], groups=[GENERAL])
    calls = world.observe_calls
    fired = await timers_fired(handle)
    # Not a sleep: wait until the paused loop has woken on its scan timer three more times.
    deadline = asyncio.get_running_loop().time() + 30
    while await timers_fired(handle) < fired + 3:
        assert asyncio.get_running_loop().time() < deadline, "the paused loop's scan timer did not fire"
        await asyncio.sleep(0.2)
    # At most the iteration under way when the pause landed finished; none planned the new pod.
    assert world.observe_calls <= calls + 1 and not world.created
    await handle.signal(NodeAutoscalerWorkflow.resume)
    status = await eventually(handle, lambda s: s.in_flight)
    assert not status.paused and status.iterations > paused.iterations


async def test_invalid_groups_are_reported_and_valid_ones_keep_working(running) -> None:  # noqa: ANN001
    world = World(hold_readiness=True)
    problem = SpecProblem(
        kind="NodeGroupWithPriority", name="broken", field="spec.pools[0].priority", message="must be >= 0"
    )
    world.observation = ClusterObservation(unschedulable=[pod(1)], groups=[GENERAL], invalid_groups=[problem])
    handle = await running(world)
    status = await eventually(handle, lambda s: s.in_flight)
    assert status.invalid_groups == [problem]
    assert world.group_problems and world.group_problems[0] == [problem]


async def test_ban_pool_update_rejects_bad_input_and_steers_planning(running) -> None:  # noqa: ANN001
    world = World(hold_readiness=True)
    world.observation = ClusterObservation(groups=[GENERAL])
    handle = await running(world)
    with pytest.raises(WorkflowUpdateFailedError) as err:
        await execute_update(handle, NodeAutoscalerWorkflow.ban_pool, "no-slash")
    assert "group_pool" in str(err.value.cause)
    await execute_update(handle, NodeAutoscalerWorkflow.ban_pool, "general/kwok-cx22")
    world.observation = ClusterObservation(unschedulable=[pod(1)], groups=[GENERAL])
    status = await eventually(handle, lambda s: s.in_flight)
    assert status.in_flight[0].current_pool == "kwok-cx32"
    assert all(c.pool.name != "kwok-cx22" for c in world.created)


async def test_each_observation_asks_for_the_versions_the_last_one_saw_across_runs(running) -> None:  # noqa: ANN001
    # A loop never acts on an older view than the one it acted on, even when its next
    # observation runs on a worker replica whose cache lags (that replica waits or lists).
    world = World()
    world.observation = ClusterObservation(groups=[GENERAL])
    await running(world, iterations_per_run=2)  # continue-as-new every second loop
    await until(lambda: world.observe_calls >= 5)
    assert world.observe_fresh[0] == {}
    for call, fresh in enumerate(world.observe_fresh[1:5], start=1):
        assert fresh == {"pods": str(100 + call), "nodes": "7"}


async def test_pods_pending_signal_starts_the_next_loop_without_waiting_for_the_scan(running) -> None:  # noqa: ANN001
    """The worker's wake (activities/nodes/wake.py) signals `pods_pending`: the loop observes
    again at once instead of after its scan interval (an hour here); paused, it stays paused."""
    world = World(hold_readiness=True)
    world.observation = ClusterObservation(groups=[GENERAL])
    handle = await running(world, scan_interval_s=3600)
    first = await eventually(handle, lambda s: s.iterations >= 1)
    world.observation = ClusterObservation(unschedulable=[pod(1)], groups=[GENERAL])
    await handle.signal(contracts.PODS_PENDING)
    woken = await eventually(handle, lambda s: s.iterations > first.iterations and s.in_flight)
    assert len(woken.in_flight) == 1
    await handle.signal(NodeAutoscalerWorkflow.pause)
    await eventually(handle, lambda s: s.paused)
    calls = world.observe_calls
    await handle.signal(contracts.PODS_PENDING)
    await handle.signal(NodeAutoscalerWorkflow.scan_now)  # the paused loop takes both and waits again

    async def signals_taken() -> bool:
        events = [e async for e in handle.fetch_history_events()]
        last = max(i for i, e in enumerate(events) if e.HasField("workflow_execution_signaled_event_attributes"))
        return any(e.HasField("workflow_task_completed_event_attributes") for e in events[last:])

    deadline = asyncio.get_running_loop().time() + 30
    while not await signals_taken():
        assert asyncio.get_running_loop().time() < deadline, "the paused loop did not take the signals"
        await asyncio.sleep(0.2)
    status = await eventually(handle, lambda s: s.paused)
    assert world.observe_calls == calls and status.iterations == woken.iterations
