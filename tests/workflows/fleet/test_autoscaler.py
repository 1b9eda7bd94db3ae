"""FleetAutoscaler with its DataPlaneCluster children on the time-skipping server; OCM is the
stub world, and the test plays each cluster's agent (it reports capacity and Ready)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import asynccontextmanager, suppress

import pytest
from temporalio.client import Client, WorkflowHandle, WorkflowUpdateFailedError
from temporalio.service import RPCError
from temporalio.testing import WorkflowEnvironment

from activities.updates import execute_update
from scaling.fleet import contracts
from scaling.fleet.config import load_fleet_config_text
from scaling.fleet.contracts import AgentClusterView, AgentStatusReport, CreateInstanceRequest, InstancePlacement
from scaling.fleet.index import shard_workflow_id
from scaling.fleet.lifecycle import ClusterTimeouts
from scaling.fleet.models import ClusterPhase
from scaling.fleet.region import FleetAutoscalerInput, FleetAutoscalerSettings, FleetAutoscalerState, RegionStatus
from tests.polling import query_until, until
from tests.workflows.cleanup import running
from tests.workflows.fleet.stubs import FleetWorld, stop_agents
from tests.workflows.workers import new_worker
from workflows.fleet.autoscaler import FleetAutoscalerWorkflow
from workflows.fleet.cluster import DataPlaneClusterWorkflow

CONFIG = """
supported_providers:
  - name: aws
    regions:
      - name: us-east-1
        supported_instance_type:
          standard: {limit: 40, min_available_capacity_slack_streaming_units: 0}
dynamic_scaling:
  compute_machine_per_cloud_provider:
    aws:
      kafka_workload_per_instance_type:
        standard:
          compute_machine_type: r5.xlarge
          compute_node_autoscaling: {min_compute_nodes: 3, max_compute_nodes: 18}
          expected_max_streaming_units: 10
supported_instance_types:
  - id: standard
    sizes:
      - {id: x1, capacity_consumed: 1}
      - {id: x2, capacity_consumed: 2}
node_prewarming:
  standard: {num_reserved_instances: 1, base_streaming_unit_size: x1}
"""
CLUSTER_UNITS = 10


@pytest.fixture
def env(dev_env: WorkflowEnvironment) -> WorkflowEnvironment:
    """The real dev server: these tests poll in real time anyway, and under load the
    time-skipping server failed a child's workflow tasks ("invalid history builder state for
    action"), leaving a cluster in cluster_accepted until the test timed out."""
    return dev_env


def settings(**kw: object) -> FleetAutoscalerSettings:
    base: dict = dict(
        provider="aws",
        region="us-east-1",
        scan_interval_s=1.0,
        recheck_delay_s=2.0,
        cluster_timeouts=ClusterTimeouts(poll_s=0.2),
    )
    base.update(kw)
    return FleetAutoscalerSettings(**base)


@asynccontextmanager
async def region(
    env: WorkflowEnvironment, world: FleetWorld, s: FleetAutoscalerSettings, state: FleetAutoscalerState | None = None
) -> AsyncIterator[WorkflowHandle]:
    """A worker, the region's loop, and a fake agent for every cluster that waits for one."""
    tq = f"fleet-{uuid.uuid4().hex[:6]}"
    wid = f"fleet/aws/test-{uuid.uuid4().hex[:6]}"
    async with running(new_worker(env.client, tq, activities=world.activities())):
        handle = await env.client.start_workflow(
            FleetAutoscalerWorkflow.run,
            FleetAutoscalerInput(settings=s, config=load_fleet_config_text(CONFIG), state=state),
            id=wid,
            task_queue=tq,
        )
        agent = asyncio.create_task(fake_agents(env.client, handle))
        try:
            yield handle
        finally:
            await stop_agents(agent)
            await _terminate_all(env.client, handle)


async def fake_agents(client: Client, region_handle: WorkflowHandle) -> None:
    """Each cluster's agent: reports Ready with CLUSTER_UNITS, remaining = what is placed."""
    while True:
        with suppress(RPCError):
            st: RegionStatus = await region_handle.query(FleetAutoscalerWorkflow.status)
            for rec in st.clusters:
                if rec.phase not in (ClusterPhase.WAITING, ClusterPhase.READY):
                    continue
                h = client.get_workflow_handle(contracts.cluster_workflow_id(rec.id))
                view: AgentClusterView = await h.query(DataPlaneClusterWorkflow.agent_view)
                used = sum(i.units for i in view.instances)
                cap = view.capacity.get("standard")
                if view.phase == ClusterPhase.READY and cap is not None and cap.remaining_units == CLUSTER_UNITS - used:
                    continue
                report = AgentStatusReport.model_validate(
                    {
                        "conditions": [{"type": "Ready", "status": "True"}],
                        "capacity": {
                            "standard": {"maxUnits": CLUSTER_UNITS, "remainingUnits": max(0, CLUSTER_UNITS - used)}
                        },
                    }
                )
                with suppress(WorkflowUpdateFailedError):
                    await execute_update(h, DataPlaneClusterWorkflow.report_agent_status, report)
        await asyncio.sleep(0.3)


async def _terminate_all(client: Client, region_handle: WorkflowHandle, cluster_ids: Iterable[str] = ()) -> None:
    """End the region and what it started. `cluster_ids` are ended too, listed or not: clusters are
    abandoned children with ids of their own, so one left running on a finished test's task queue
    (its status query failed, or its start landed after the query) took the next test's updates
    and never answered them."""
    ids = set(cluster_ids)
    with suppress(RPCError):
        st: RegionStatus = await region_handle.query(FleetAutoscalerWorkflow.status)
        ids.update(rec.id for rec in st.clusters)
        for k in range(st.index_shards):
            with suppress(RPCError):
                await client.get_workflow_handle(shard_workflow_id(region_handle.id, k)).terminate()
    with suppress(RPCError):
        await region_handle.terminate()
    await terminate_clusters(client, ids)


async def terminate_clusters(client: Client, cluster_ids: Iterable[str]) -> None:
    for cid in cluster_ids:
        with suppress(RPCError):
            await client.get_workflow_handle(contracts.cluster_workflow_id(cid)).terminate()


async def eventually(
    handle: WorkflowHandle, check: Callable[[RegionStatus], bool], timeout: float = 90.0
) -> RegionStatus:
    return await query_until(handle, FleetAutoscalerWorkflow.status, check, timeout, every=0.3)


async def run_input(client: Client, handle: WorkflowHandle) -> FleetAutoscalerInput:
    """The input the region's latest run started with (what crossed continue-as-new)."""
    async for event in handle.fetch_history_events():
        payloads = event.workflow_execution_started_event_attributes.input.payloads
        [inp] = await client.data_converter.decode(payloads, [FleetAutoscalerInput])
        return inp
    raise AssertionError("no history")


async def create(handle: WorkflowHandle, iid: str, size: str = "x1") -> InstancePlacement:
    return await execute_update(
        handle,
        FleetAutoscalerWorkflow.create_instance,
        CreateInstanceRequest(id=iid, instance_type="standard", size=size),
    )


def phases(st: RegionStatus) -> list[ClusterPhase]:
    return [c.phase for c in st.clusters]


async def test_burst_creates_clusters_places_everything_then_scales_down_without_flapping(
    env: WorkflowEnvironment,
) -> None:
    # The first cluster's addons stay installing until the creates are in: on a busy machine
    # the 15 updates took longer than the stub cluster's few polls to Ready.
    world = FleetWorld(hold_addons=True)
    async with region(env, world, settings()) as handle:
        # An empty region scales up at once: nothing can hold the biggest size.
        await eventually(handle, lambda st: st.clusters_created == 1)
        placements = [await create(handle, f"kafka-{i}") for i in range(15)]
        assert all(p.waiting for p in placements)  # no ready cluster yet: they wait, durably
        world.hold_addons = False

        st = await eventually(handle, lambda st: st.instances_placed == 15 and st.instances_waiting == 0)
        assert st.clusters_created == 2 and sorted(c.consumed_units for c in st.clusters) == [5, 10]
        first = st.clusters[0].id
        view: AgentClusterView = await env.client.get_workflow_handle(contracts.cluster_workflow_id(first)).query(
            DataPlaneClusterWorkflow.agent_view
        )
        assert len(view.instances) == 10 and [r.id for r in view.reserved] == ["reserved-kafka-standard-1"]
        placed: InstancePlacement = await handle.query(FleetAutoscalerWorkflow.instance, "kafka-0")
        assert placed.cluster_id == first and not placed.waiting

        # The burst goes away: one empty cluster is removed, the last one stays.
        for i in range(15):
            assert await execute_update(handle, FleetAutoscalerWorkflow.delete_instance, f"kafka-{i}")
        st = await eventually(handle, lambda st: st.clusters_deleted == 1 and len(st.clusters) == 1)
        assert phases(st) == [ClusterPhase.READY] and st.flaps == 0 and st.clusters_created == 2
        rounds = st.rounds
        st = await eventually(handle, lambda st: st.rounds >= rounds + 5)
        assert st.clusters_created == 2 and len(st.clusters) == 1  # and no scale-up after it
    assert len(world.clusters) == 2 and len(world.live_clusters()) == 1
    assert len(world.cleaned) == 1


async def test_bad_instance_requests_are_refused_naming_the_field(env: WorkflowEnvironment) -> None:
    world = FleetWorld()
    async with region(env, world, settings()) as handle:
        for req, field in (
            (CreateInstanceRequest(id="a", instance_type="premium", size="x1"), "instance_type"),
            (CreateInstanceRequest(id="a", instance_type="standard", size="x9"), "size"),
        ):
            with pytest.raises(WorkflowUpdateFailedError) as info:
                await execute_update(handle, FleetAutoscalerWorkflow.create_instance, req)
            assert info.value.cause.message.startswith(field), info.value.cause
        await create(handle, "same")
        again = await create(handle, "same")  # the same request again: the same instance
        assert again.id == "same"
        with pytest.raises(WorkflowUpdateFailedError) as info:
            await create(handle, "same", size="x2")
        assert info.value.cause.message.startswith("id")
        # The region's limit (40 units) counts waiting instances too.
        for i in range(19):
            await create(handle, f"big-{i}", size="x2")
        with pytest.raises(WorkflowUpdateFailedError) as info:
            await create(handle, "one-too-many", size="x2")
        assert "limit" in str(info.value.cause)
        with pytest.raises(WorkflowUpdateFailedError):
            await execute_update(handle, FleetAutoscalerWorkflow.approve_deletion, "no-such-cluster")
        assert not await execute_update(handle, FleetAutoscalerWorkflow.delete_instance, "no-such-instance")


async def test_paused_loop_creates_nothing_until_resumed(env: WorkflowEnvironment) -> None:
    world = FleetWorld()
    async with region(env, world, settings(), state=FleetAutoscalerState(paused=True)) as handle:
        await create(handle, "kafka-0")
        st = await eventually(handle, lambda st: st.rounds >= 4)
        assert st.clusters == [] and st.evaluations == 0 and st.instances_waiting == 1
        await handle.signal(FleetAutoscalerWorkflow.resume)
        await eventually(handle, lambda st: st.instances_placed == 1)


async def test_removal_waits_for_approval_and_a_block_restores_it(env: WorkflowEnvironment) -> None:
    world = FleetWorld()
    s = settings(deletion_requires_approval=True, recheck_delay_s=15.0)
    async with region(env, world, s) as handle:
        await eventually(handle, lambda st: st.clusters_created == 1)
        for i in range(10):
            await create(handle, f"kafka-{i}")
        st = await eventually(
            handle,
            lambda st: st.instances_placed == 10 and len(st.clusters) == 2 and phases(st) == [ClusterPhase.READY] * 2,
        )
        for i in range(10):
            await execute_update(handle, FleetAutoscalerWorkflow.delete_instance, f"kafka-{i}")
        st = await eventually(handle, lambda st: len(st.awaiting_approval) == 1)
        candidate = st.awaiting_approval[0]
        assert ClusterPhase.DEPROVISIONING not in phases(st)

        await execute_update(handle, FleetAutoscalerWorkflow.approve_deletion, candidate)
        await eventually(
            handle, lambda st: any(c.id == candidate and c.phase == ClusterPhase.DEPROVISIONING for c in st.clusters)
        )
        # Blocked before the re-check: the re-check brings it back to ready and it stays.
        await execute_update(handle, FleetAutoscalerWorkflow.block_deletion, candidate)
        st = await eventually(handle, lambda st: any("back to ready" in e for e in st.events))
        st = await eventually(handle, lambda st: phases(st) == [ClusterPhase.READY] * 2)
        assert st.clusters_deleted == 0 and contracts.DELETE_OCM_CLUSTER not in world.calls
        cluster = env.client.get_workflow_handle(contracts.cluster_workflow_id(candidate))

        async def cluster_ready() -> bool:
            return (await cluster.query(DataPlaneClusterWorkflow.status)).phase == ClusterPhase.READY

        await until(cluster_ready)  # the cluster itself took the restore


async def test_failed_cluster_backs_off_and_continue_as_new_keeps_the_registry(env: WorkflowEnvironment) -> None:
    world = FleetWorld(error_on_create=True)
    s = settings(iterations_per_run=3, failure_backoff_s=3600.0)
    async with region(env, world, s) as handle:
        st = await eventually(handle, lambda st: st.clusters_failed == 1)
        assert st.clusters == [] and st.clusters_created == 1
        st = await eventually(handle, lambda st: st.runs >= 2)  # continued as new, twice
        assert st.clusters_created == 1 and st.clusters_failed == 1  # backing off: no new cluster
    assert len(world.clusters) == 1 and world.live_clusters() == []  # the failed one was deleted
