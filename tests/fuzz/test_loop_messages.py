"""Signals and updates with malformed and oversized arguments, as a careless script or a hostile
caller would send them: every update is refused (its validator names the field, or the client
refuses a payload over MAX_UPDATE_BYTES unsent, or the argument does not decode, or it does
not fit the handler's parameters: workflows/arguments.py), a malformed signal is dropped, and
the loop is unharmed: no workflow task failed, it answers its status and takes the next good
message. Every signal and update of every workflow type the worker registers is sent garbage
(`hammer`, from the SDK's own table of the type's handlers; HAMMERED says which test runs each
type). Time-skipping server, but the dev server for the region: its loop waits on a 1 s timer
that its cluster's reports cut short, and the time-skipping server strands a run whose task
cancels a timer that fired meanwhile (conftest.dev_env), which a loaded machine made happen in
about one region run in twenty. Stubs under the contracts' activity names; the production
worker's interceptors."""

from __future__ import annotations

import asyncio
import inspect
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from temporalio import activity, workflow
from temporalio.api.enums.v1 import EventType
from temporalio.client import RPCTimeoutOrCancelledError, WorkflowHandle, WorkflowUpdateFailedError
from temporalio.service import RPCError
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from activities.updates import MAX_UPDATE_BYTES, PayloadTooLarge, execute_update
from scaling.components.state import ComponentAutoscalerInput, ComponentAutoscalerSettings, PinRequest
from scaling.fleet import contracts
from scaling.fleet.config import load_fleet_config_text
from scaling.fleet.index import QUERY_INSTANCE, SIGNAL_INDEX_OPS, IndexOp, IndexOps, InstanceIndexInput
from scaling.fleet.lifecycle import DataPlaneClusterState
from scaling.fleet.models import ClusterPhase, ManagedInstance
from scaling.fleet.region import FleetAutoscalerInput
from scaling.nodes.disruption.orchestration import NodeReplacementInput
from scaling.nodes.models import ApprovalPolicy, RequestPhase
from scaling.nodes.scale_down.removals import NodeScaleDownInput, ScaleDownPhase
from scaling.nodes.settings import AutoscalerSettings
from scaling.nodes.state import AutoscalerInput
from scaling.text import MAX_UPDATE_TEXT
from tests.polling import query_until, until
from tests.workflows.components.stubs import ComponentsWorld
from tests.workflows.components.test_autoscaler import tikv_spec
from tests.workflows.fleet.stubs import FleetWorld
from tests.workflows.fleet.test_autoscaler import CONFIG
from tests.workflows.fleet.test_autoscaler import settings as region_settings
from tests.workflows.fleet.test_cluster import cluster_input, in_phase, report, running
from tests.workflows.nodes.stubs import World
from tests.workflows.nodes.test_approvals import NODES_GATE, awaiting
from tests.workflows.nodes.test_machine_gc import Cloud
from tests.workflows.nodes.test_node_replacement import GROUP, node
from tests.workflows.nodes.test_node_replacement import world as replace_world
from tests.workflows.nodes.test_node_request import pools, request
from tests.workflows.nodes.test_node_request_batch import batch, describe_until, phases
from tests.workflows.workers import new_worker
from worker import worker_interceptors
from workflows.all import WORKFLOWS
from workflows.components.autoscaler import ComponentAutoscalerWorkflow
from workflows.fleet.autoscaler import FleetAutoscalerWorkflow
from workflows.fleet.cluster import DataPlaneClusterWorkflow
from workflows.fleet.index import InstanceIndexWorkflow
from workflows.nodes.autoscaler import NodeAutoscalerWorkflow
from workflows.nodes.machine_gc import MachineGCInput, MachineGCSettings, MachineGCWorkflow
from workflows.nodes.replacement import NodeReplacementWorkflow
from workflows.nodes.request import NodeRequestWorkflow
from workflows.nodes.request_batch import NodeRequestBatchWorkflow
from workflows.nodes.scale_down import NodeScaleDownWorkflow

ANSWER_S = 30
HUGE = "x" * (MAX_UPDATE_BYTES + 1)
LONG = "x" * (MAX_UPDATE_TEXT + 1)


async def refused(handle: WorkflowHandle, update: str, arg: Any, field: str = "") -> str:
    """The update is refused; the reason (naming `field` when given)."""
    with pytest.raises((WorkflowUpdateFailedError, PayloadTooLarge)) as info:
        await answered(handle, execute_update(handle, update, arg), f"update {update}")
    err = info.value
    reason = str(err) if isinstance(err, PayloadTooLarge) else str(getattr(err.cause, "message", err.cause))
    assert not field or reason.startswith(field), reason
    return reason


async def test_a_clusters_updates_and_signals_refuse_garbage_and_it_keeps_serving(env: WorkflowEnvironment) -> None:
    inp = cluster_input()
    async with running(env, FleetWorld(), inp, interceptors=worker_interceptors()) as handle:  # type: ignore[arg-type]
        await until(lambda: in_phase(handle, ClusterPhase.WAITING))
        sent = await hammer(handle, DataPlaneClusterWorkflow)
        assert {"signal delete", "signal instance_placed", "update approve"} <= set(sent)
        assert "once decoded" in await refused(handle, contracts.UPDATE_AGENT_STATUS, {"conditions": [{"message": HUGE}]})  # fmt: skip
        for garbage in ("garbage", 5, [1, 2]):
            await refused(handle, contracts.UPDATE_AGENT_STATUS, garbage)
            await refused(handle, contracts.UPDATE_INSTANCE_STATUSES, garbage)
        await refused(handle, contracts.UPDATE_AGENT_STATUS, {"capacity": {"standard": {"maxUnits": "many"}}})
        await refused(handle, contracts.UPDATE_AGENT_STATUS, {"conditions": "Ready"})
        await refused(handle, contracts.UPDATE_INSTANCE_STATUSES, {"k1": {"conditions": "Ready"}})
        await refused(handle, "approve", LONG, "note")
        await refused(handle, "approve", HUGE)
        await refused(handle, "approve", {"note": 1})
        for signal, garbage in (
            (contracts.SIGNAL_INSTANCE_PLACED, "garbage"),
            (contracts.SIGNAL_CLUSTER_MESSAGES, {"messages": 5}),
            (contracts.SIGNAL_INSTANCE_RELEASED, {"id": []}),
        ):
            await handle.signal(signal, garbage)
        st: DataPlaneClusterState = await handle.query(DataPlaneClusterWorkflow.status)
        assert st.reports == 0 and st.phase == ClusterPhase.WAITING and st.instances == []
        await execute_update(handle, contracts.UPDATE_AGENT_STATUS, report(max_units=12, remaining=9))
        assert await in_phase(handle, ClusterPhase.READY)
        await handle.terminate()


async def test_a_node_loops_updates_refuse_garbage_naming_the_field_and_it_keeps_looping(
    env: WorkflowEnvironment,
) -> None:
    tq, cluster = f"tq-{uuid.uuid4().hex[:6]}", f"c{uuid.uuid4().hex[:6]}"
    async with new_worker(env.client, tq, activities=World().activities(), interceptors=worker_interceptors()):
        handle = await env.client.start_workflow(
            NodeAutoscalerWorkflow.run,
            AutoscalerInput(settings=AutoscalerSettings(cluster=cluster, scan_interval_s=30, machine_gc=False)),
            id=f"nodes/{cluster}",
            task_queue=tq,
        )
        await until(lambda: _iterations(handle), what="a first iteration")
        sent = await hammer(handle, NodeAutoscalerWorkflow)
        assert {"signal requests_changed", "signal scale_down_changed", "update ban_pool"} <= set(sent)
        for update, field in (
            ("protect_node", "node"),
            ("unprotect_node", "node"),
            ("remove_node", "node"),
            ("ban_pool", "group_pool"),
            ("unban_pool", "group_pool"),
            ("cancel_request", "request_id"),
        ):
            await refused(handle, update, "n" * 2000, field)
            await refused(handle, update, HUGE)
            await refused(handle, update, {"node": 1})
        await refused(handle, "protect_node", "", "node")
        await refused(handle, "ban_pool", "no-slash", "group_pool")
        await handle.signal("scan_now", ["garbage"])
        assert await execute_update(handle, "protect_node", "n1") == ["n1"]
        before = await _iterations(handle)
        await handle.signal("scan_now")
        await until(lambda: _iterations_after(handle, before), what="another iteration")
        await handle.terminate()


async def _iterations(handle: WorkflowHandle) -> int:
    return (await handle.query(NodeAutoscalerWorkflow.status)).iterations


async def _iterations_after(handle: WorkflowHandle, before: int) -> bool:
    return await _iterations(handle) > before


# Which test sends garbage to each workflow type's every signal and update.
HAMMERED = {
    "NodeAutoscaler": "test_a_node_loops_updates_refuse_garbage_naming_the_field_and_it_keeps_looping",
    "MachineGC": "test_node_requests_and_the_collector_drop_garbage_and_go_on",
    "NodeRequest": "test_node_requests_and_the_collector_drop_garbage_and_go_on",
    "NodeRequestBatch": "test_node_requests_and_the_collector_drop_garbage_and_go_on",
    "NodeScaleDown": "test_removals_drop_garbage_and_go_on",
    "NodeReplacement": "test_removals_drop_garbage_and_go_on",
    "DataPlaneCluster": "test_a_clusters_updates_and_signals_refuse_garbage_and_it_keeps_serving",
    "FleetAutoscaler": "test_a_region_and_its_index_drop_garbage_and_go_on",
    "InstanceIndex": "test_a_region_and_its_index_drop_garbage_and_go_on",
    "ComponentAutoscaler": "test_a_component_autoscalers_updates_refuse_garbage_naming_the_field",
}


def test_every_workflow_types_signals_and_updates_are_hammered() -> None:
    """A new workflow type fails here until a test hammers it; within a type, `hammer` reads the
    handlers from the SDK's table, so a new signal or update is sent garbage as it lands."""
    types = {workflow._Definition.must_from_class(cls).name for cls in WORKFLOWS}
    assert types == set(HAMMERED)
    assert all(callable(globals().get(name)) for name in HAMMERED.values())
    handlers = sum(len(d.signals) + len(d.updates) for d in map(workflow._Definition.must_from_class, WORKFLOWS))
    assert handlers >= 55  # 55 signals and updates when this was written


def _garbage(fn: Callable[..., Any]) -> list[list[Any]]:
    """Argument lists that fit no handler with parameters: none where one is needed, one too
    many, a list where a value or model is typed. (A handler without parameters has nothing to
    malform: the SDK hands it no arguments, whatever is sent.)"""
    params = list(inspect.signature(fn).parameters.values())[1:]
    if not params:
        return []
    out: list[list[Any]] = [[None] * (len(params) + 1), [[1, 2]]]
    if params[0].default is inspect.Parameter.empty:
        out.append([])
    return out


async def hammer(handle: WorkflowHandle, cls: type) -> list[str]:
    """Every signal and update of `cls` sent garbage (`_garbage`; updates also one over
    MAX_UPDATE_BYTES): each update is refused, and no workflow task failed. Returns what was sent."""
    defn = workflow._Definition.must_from_class(cls)
    sent = []
    for name, sig in sorted(defn.signals.items(), key=lambda kv: str(kv[0])):
        for args in _garbage(sig.fn):
            await handle.signal(str(name), args=args)
        sent.append(f"signal {name}")
    for name, upd in sorted(defn.updates.items(), key=lambda kv: str(kv[0])):
        for args in _garbage(upd.fn):
            with pytest.raises(WorkflowUpdateFailedError):
                await answered(handle, handle.execute_update(str(name), args=args), f"update {name}{tuple(args)}")
        await refused(handle, str(name), HUGE)
        sent.append(f"update {name}")
    await answered(
        handle, handle.query("__stack_trace"), "a query after the garbage"
    )  # a stalled workflow answers none
    await no_failed_tasks(handle)
    return sent


async def answered(handle: WorkflowHandle, call: Awaitable[Any], what: str) -> Any:
    """`call`'s answer; a workflow whose task fails answers no update or query (the client would
    wait for ever): that fails here naming the workflow, the message, the time waited and what the
    server says of the workflow's task and its last events (the SDK turns the cancelled wait into
    WorkflowUpdateRPCTimeoutOrCancelledError, which names neither). Measured under load 8-23 on
    2 cores: 1,000 answers p99 0.66 s, the slowest 1.03 s."""
    start = time.monotonic()
    try:
        return await asyncio.wait_for(call, ANSWER_S)
    except (TimeoutError, RPCTimeoutOrCancelledError) as err:
        waited = time.monotonic() - start
        raise AssertionError(
            f"{handle.id}: {what}: no answer after {waited:.1f} s ({type(err).__name__}); {await _stuck(handle)}"
        ) from None


async def _stuck(handle: WorkflowHandle) -> str:
    """What the server says of a workflow that did not answer: its pending workflow task and its
    last events (a signal by name, a timer by id)."""
    try:
        raw = (await handle.describe()).raw_description
        events = [e async for e in handle.fetch_history_events()]
    except RPCError as err:
        return f"describe failed: {err}"
    last = ", ".join(f"{e.event_id} {_event(e)}" for e in events[-12:])
    task = raw.pending_workflow_task
    pending = f"task pending ({task.state}, attempt {task.attempt})" if raw.HasField("pending_workflow_task") else ""
    if not pending and events and events[-1].event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED:
        pending = "a task started, not pending, never ended (a refused completion: conftest.dev_env)"
    return f"{pending or 'no task pending'}; last events: {last}"


def _event(e: Any) -> str:
    name = EventType.Name(e.event_type).removeprefix("EVENT_TYPE_")
    if e.HasField("workflow_execution_signaled_event_attributes"):
        return f"{name} {e.workflow_execution_signaled_event_attributes.signal_name}"
    if e.HasField("timer_started_event_attributes"):
        return f"{name} {e.timer_started_event_attributes.timer_id}"
    if e.HasField("timer_fired_event_attributes"):
        return f"{name} {e.timer_fired_event_attributes.timer_id}"
    return name


async def no_failed_tasks(handle: WorkflowHandle) -> None:
    failed = [
        e.workflow_task_failed_event_attributes.failure.message
        async for e in handle.fetch_history_events()
        if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED
    ]
    assert not failed, failed


def node_worker(env: WorkflowEnvironment, world: World, tq: str) -> Worker:
    """The node workflows on stubs (world's, then the collector's Cloud for what world lacks)."""
    acts = world.activities()
    names = {activity._Definition.must_from_callable(a).name for a in acts}
    acts += [a for a in Cloud().activities() if activity._Definition.must_from_callable(a).name not in names]
    return new_worker(env.client, tq, activities=acts, interceptors=worker_interceptors())


async def test_node_requests_and_the_collector_drop_garbage_and_go_on(env: WorkflowEnvironment) -> None:
    tq = f"tq-{uuid.uuid4().hex[:6]}"
    async with node_worker(env, World(), tq):
        gc = await env.client.start_workflow(
            MachineGCWorkflow.run,
            MachineGCInput(settings=MachineGCSettings(cluster="c", interval_s=3600)),
            id=f"gc-{uuid.uuid4().hex[:6]}",
            task_queue=tq,
        )
        one = request(pools("kwok-cx22"), approval=NODES_GATE)
        single = await env.client.start_workflow(NodeRequestWorkflow.run, one, id=one.id, task_queue=tq)
        many = batch(2, approval=NODES_GATE)
        members = await env.client.start_workflow(NodeRequestBatchWorkflow.run, many, id=many.id, task_queue=tq)

        rounds = 1
        assert "signal stop" in await hammer(gc, MachineGCWorkflow)
        await gc.signal(MachineGCWorkflow.collect_now)
        later = await query_until(gc, MachineGCWorkflow.status, lambda s: s.state.rounds > rounds)
        assert not later.state.last_error.startswith("ended")  # no garbage stop was taken

        await awaiting(single)
        assert {"signal cancel", "update approve", "update deny"} <= set(await hammer(single, NodeRequestWorkflow))
        await awaiting(single)  # still waiting: no garbage cancel or decision was taken
        await describe_until(members, lambda s: phases(s) == [RequestPhase.AWAITING_APPROVAL] * 2)
        assert "signal cancel" in await hammer(members, NodeRequestBatchWorkflow)
        # Decided before any result is awaited: awaiting one skips time to the other's timeout.
        await single.execute_update(NodeRequestWorkflow.approve, "ok")
        await members.execute_update(NodeRequestBatchWorkflow.deny, "no")
        assert (await single.result()).phase == RequestPhase.READY
        status = await members.result()
        assert phases(status) == [RequestPhase.UNMET] * 2 and status.approval and status.approval.by == "operator"
        await gc.terminate()


async def test_removals_drop_garbage_and_go_on(env: WorkflowEnvironment) -> None:
    gated = GROUP.model_copy(update={"approval": ApprovalPolicy(nodes_above=0, timeout_s=3600)})
    world = replace_world()
    world.plan_obs = world.plan_obs.model_copy(update={"groups": [gated]})
    world.down_obs = world.down_obs.model_copy(update={"nodes": [*world.down_obs.nodes, node("b")]})
    tq = f"tq-{uuid.uuid4().hex[:6]}"
    async with node_worker(env, world, tq):
        now = (await env.get_current_time()).timestamp()
        later = NodeScaleDownInput(cluster="c", node="b", scale_down_at=now + 600, kind="Empty")
        down = await env.client.start_workflow(NodeScaleDownWorkflow.run, later, id=f"sd-{uuid.uuid4().hex[:6]}", task_queue=tq)  # fmt: skip
        await until(lambda: ("soft-mark", "b") in world.calls, what="the removal of b marked, waiting")
        assert {"signal cancel", "signal remove_now"} <= set(await hammer(down, NodeScaleDownWorkflow))
        await down.signal(NodeScaleDownWorkflow.remove_now)
        assert (await down.result()).phase == ScaleDownPhase.REMOVED

        drifted = NodeScaleDownInput(cluster="c", node="a", group="g", kind="Drifted", scale_down_at=0)
        swap = await env.client.start_workflow(
            NodeReplacementWorkflow.run,
            NodeReplacementInput(removal=drifted, readiness_poll_s=1),
            id=f"nodes/c/replace/a-{uuid.uuid4().hex[:6]}",
            task_queue=tq,
        )
        await until(lambda: awaiting_replacement(swap), what="the replacement awaiting approval")
        assert "update approve" in await hammer(swap, NodeReplacementWorkflow)
        assert not world.created  # nothing bought on garbage
        await swap.execute_update(NodeReplacementWorkflow.approve, "ok")
        assert (await swap.result()).phase == ScaleDownPhase.REMOVED


async def test_a_region_and_its_index_drop_garbage_and_go_on(dev_env: WorkflowEnvironment) -> None:
    env = dev_env
    tq = f"tq-{uuid.uuid4().hex[:6]}"
    async with new_worker(env.client, tq, activities=FleetWorld().activities(), interceptors=worker_interceptors()):
        config = load_fleet_config_text(CONFIG).without_clusters()
        region = await env.client.start_workflow(
            FleetAutoscalerWorkflow.run,
            FleetAutoscalerInput(settings=region_settings(), config=config),
            id=f"fleet/aws/test-{uuid.uuid4().hex[:6]}",
            task_queue=tq,
        )
        shard = await env.client.start_workflow(
            InstanceIndexWorkflow.run,
            InstanceIndexInput(region_workflow_id=f"fleet/none-{uuid.uuid4().hex[:6]}", shard=0),
            id=f"index-{uuid.uuid4().hex[:6]}",
            task_queue=tq,
        )
        await query_until(region, FleetAutoscalerWorkflow.status, lambda s: s.rounds >= 1)
        sent = await hammer(region, FleetAutoscalerWorkflow)
        assert {"update create_instance", "update register_clusters", "signal cluster_changed"} <= set(sent)
        await region.signal(contracts.SIGNAL_PAUSE)
        await query_until(region, FleetAutoscalerWorkflow.status, lambda s: s.paused)

        assert await hammer(shard, InstanceIndexWorkflow) == [f"signal {SIGNAL_INDEX_OPS}"]
        claim = IndexOp(kind="claim", instance_id="i1", instance=ManagedInstance(id="i1", instance_type="standard", size="x1", units=1))  # fmt: skip
        await shard.signal(SIGNAL_INDEX_OPS, IndexOps(ops=[claim]))
        await until(lambda: shard.query(QUERY_INSTANCE, "i1"), what="the claimed instance in the shard")
        await no_failed_tasks(shard)
        await region.terminate()
        await shard.terminate()


async def test_a_component_autoscalers_updates_refuse_garbage_naming_the_field(env: WorkflowEnvironment) -> None:
    world = ComponentsWorld(spec=tikv_spec(), load={"tikv": 3.0})
    tq = f"tq-{uuid.uuid4().hex[:6]}"
    async with new_worker(env.client, tq, activities=world.activities(), interceptors=worker_interceptors()):
        handle = await env.client.start_workflow(
            ComponentAutoscalerWorkflow.run,
            ComponentAutoscalerInput(
                settings=ComponentAutoscalerSettings(namespace="ns", name="tas", scan_interval_s=30)
            ),  # fmt: skip
            id=f"components-{uuid.uuid4().hex[:6]}",
            task_queue=tq,
        )
        await query_until(handle, ComponentAutoscalerWorkflow.status, lambda r: r.rounds >= 1 and r.base_cluster)
        sent = await hammer(handle, ComponentAutoscalerWorkflow)
        assert {"update pin_replicas", "update block_scale_in", "update approve", "update pause"} <= set(sent)
        await refused(handle, "pin_replicas", {"component": "tikv", "replicas": -1}, "replicas")
        await refused(handle, "pin_replicas", {"component": "tikv", "cluster": "x" * 2000}, "cluster")
        # What does not decode is refused before any validator; the decoder's reason names the field.
        for garbage, field in (
            ({"component": "pd", "replicas": 3}, "component"),
            ({"component": "tikv", "replicas": "3"}, "replicas"),  # strict, as the API server
            ({"component": "tikv", "replicas": 3.0}, "replicas"),
            ({"component": "tikv", "replicas": 2**70}, "replicas"),
        ):
            assert field in await refused_undecoded(handle, "pin_replicas", garbage)
        assert "blocked" in await refused_undecoded(handle, "block_scale_in", {"component": "tikv", "blocked": "yes"})
        await refused(handle, "block_scale_in", {"component": "x" * 2000}, "component")
        await refused(handle, "approve", {"id": 5}, "id")
        await refused(handle, "approve", {"id": "auto-x", "note": LONG}, "id")
        await refused(handle, "deny", "auto-x", "id")
        report = await handle.query(ComponentAutoscalerWorkflow.status)
        assert report.overrides.pins == {} and report.overrides.block_scale_in == []
        assert await execute_update(handle, "pin_replicas", PinRequest(component="tikv", replicas=4)) == {"tikv/db": 4}
        await no_failed_tasks(handle)
        await handle.terminate()


async def refused_undecoded(handle: WorkflowHandle, update: str, arg: Any) -> str:
    """The update is refused because its argument does not decode; the decoder's reason."""
    with pytest.raises(WorkflowUpdateFailedError) as info:
        await handle.execute_update(update, arg)
    chain, err = [], info.value.cause
    while err is not None:
        chain.append(str(err))
        err = err.__cause__
    assert "Failed decoding arguments" in chain[0], chain
    return " / ".join(chain)


async def awaiting_replacement(handle: WorkflowHandle) -> bool:
    return "AwaitingApproval" in (await handle.query(NodeReplacementWorkflow.describe)).message
