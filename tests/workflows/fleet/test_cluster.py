"""DataPlaneCluster lifecycle on the time-skipping server, OCM replaced by stubs registered
under the contract's activity names."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
from temporalio.client import WorkflowHandle, WorkflowUpdateFailedError
from temporalio.testing import WorkflowEnvironment

from activities.updates import execute_update
from scaling.fleet import contracts
from scaling.fleet.config import NodeAutoscaling, WorkloadMachines
from scaling.fleet.contracts import (
    AgentClusterView,
    AgentCondition,
    AgentStatusReport,
    InstanceStatusReport,
    ManagedInstance,
    ocm_cluster_name,
)
from scaling.fleet.lifecycle import ClusterTimeouts, DataPlaneClusterInput, DataPlaneClusterState
from scaling.fleet.models import ClusterPhase
from tests.polling import until
from tests.workflows.fleet.stubs import FleetWorld, StubCluster
from tests.workflows.release_histories import HISTORIES, save
from tests.workflows.workers import new_worker
from workflows.fleet.cluster import DataPlaneClusterWorkflow

TERRAFORMING = [
    contracts.CREATE_MACHINE_POOL,
    contracts.ENSURE_INGRESS_DNS,
    contracts.ENSURE_IDENTITY_PROVIDER,
    contracts.APPLY_CLUSTER_RESOURCES,
    contracts.INSTALL_ADDON,
]


def cluster_input(poll_s: float = 0.2, **timeouts: float) -> DataPlaneClusterInput:
    cid = f"us-east-1-standard-{uuid.uuid4().hex[:6]}"
    return DataPlaneClusterInput(
        cluster_id=cid,
        provider="aws",
        region="us-east-1",
        instance_type="standard",
        multi_az=True,
        cluster_machines=WorkloadMachines(
            compute_machine_type="m5.2xlarge",
            compute_node_autoscaling=NodeAutoscaling(min_compute_nodes=6, max_compute_nodes=18),
        ),
        type_machines=WorkloadMachines(
            compute_machine_type="r5.xlarge",
            compute_node_autoscaling=NodeAutoscaling(min_compute_nodes=1, max_compute_nodes=20),
        ),
        fleetshard_parameters={"poll-interval": "15s"},
        reserved=[ManagedInstance(id="reserved-kafka-standard-1", instance_type="standard", size="x1", units=1)],
        timeouts=ClusterTimeouts(poll_s=poll_s, **timeouts),
    )


def report(ready: bool = True, max_units: int = 10, remaining: int = 10, **extra: object) -> AgentStatusReport:
    body = {
        "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        "capacity": {"standard": {"maxUnits": max_units, "remainingUnits": remaining}},
        "strimzi": [
            {
                "version": "strimzi-cluster-operator.v0.23.0-4",
                "ready": True,
                "kafkaVersions": ["3.1.0"],
                "kafkaIbpVersions": ["3.1"],
            }
        ],
        **extra,
    }
    return AgentStatusReport.model_validate(body)


@asynccontextmanager
async def running(
    env: WorkflowEnvironment, world: FleetWorld, inp: DataPlaneClusterInput, tq: str = "", **worker_options: int
) -> AsyncIterator[WorkflowHandle]:
    tq = tq or f"fleet-{uuid.uuid4().hex[:6]}"
    async with new_worker(
        env.client, tq, workflows=[DataPlaneClusterWorkflow], activities=world.activities(), **worker_options
    ):
        handle = await env.client.start_workflow(
            DataPlaneClusterWorkflow.run, inp, id=contracts.cluster_workflow_id(inp.cluster_id), task_queue=tq
        )
        yield handle


async def phase(handle: WorkflowHandle) -> ClusterPhase:
    st: DataPlaneClusterState = await handle.query(DataPlaneClusterWorkflow.status)
    return st.phase


async def in_phase(handle: WorkflowHandle, want: ClusterPhase) -> bool:
    return await phase(handle) == want


async def test_lifecycle_from_accepted_to_deleted(env: WorkflowEnvironment) -> None:
    world = FleetWorld(dns_missing_calls=2)  # the default ingress appears a little late
    inp = cluster_input()
    async with running(env, world, inp) as handle:
        await until(lambda: in_phase(handle, ClusterPhase.WAITING))
        view: AgentClusterView = await handle.query(DataPlaneClusterWorkflow.agent_view)
        assert view.capacity["standard"].max_nodes == 18  # multi-AZ: 20 rounded down to 18
        assert view.reserved == []  # reserved instances only for ready clusters

        await execute_update(handle, DataPlaneClusterWorkflow.report_agent_status, report(max_units=12, remaining=9))
        assert await phase(handle) == ClusterPhase.READY
        view = await handle.query(DataPlaneClusterWorkflow.agent_view)
        assert view.capacity["standard"].max_units == 12 and view.capacity["standard"].remaining_units == 9
        assert [r.id for r in view.reserved] == ["reserved-kafka-standard-1"]

        # ready <-> waiting on the agent's Ready condition
        await execute_update(handle, DataPlaneClusterWorkflow.report_agent_status, report(ready=False))
        assert await phase(handle) == ClusterPhase.WAITING
        await execute_update(handle, DataPlaneClusterWorkflow.report_agent_status, report())
        assert await phase(handle) == ClusterPhase.READY

        await handle.signal(DataPlaneClusterWorkflow.deprovision)
        await handle.signal(DataPlaneClusterWorkflow.delete)
        final: DataPlaneClusterState = await handle.result()

    assert final.phase == ClusterPhase.DELETED and final.cleaned_up
    phases = [h.phase for h in final.history]
    assert phases[:4] == [
        ClusterPhase.ACCEPTED,
        ClusterPhase.PROVISIONING,
        ClusterPhase.PROVISIONED,
        ClusterPhase.WAITING,
    ]
    assert phases[-3:] == [ClusterPhase.DEPROVISIONING, ClusterPhase.CLEANUP, ClusterPhase.DELETED]
    # One OCM cluster, keyed by the cluster id, created with seed 000's default pool (autoscaled
    # between 6 and 18 nodes) and now gone.
    assert len(world.clusters) == 1 and world.clusters[inp.cluster_id].gone
    (create,) = world.create_inputs
    assert create.cluster_id == inp.cluster_id and create.multi_az
    assert (create.default_min_nodes, create.default_max_nodes) == (6, 18)
    # Terraforming in order, each step once.
    firsts = [c for c in world.calls if c in TERRAFORMING]
    assert sorted(set(firsts), key=firsts.index) == TERRAFORMING
    pool = world.pools[final.ocm_id]["kafka-standard"]
    assert (pool.min_nodes, pool.max_nodes) == (3, 18)
    assert pool.labels == {"bf2.org/kafkaInstanceProfileType": "standard"}
    assert [(t.key, t.value, t.effect) for t in pool.taints] == [
        ("bf2.org/kafkaInstanceProfileType", "standard", "NoExecute")
    ]
    assert [a.addon_id for a in world.addon_inputs] == [contracts.STRIMZI_ADDON, contracts.FLEETSHARD_ADDON]
    assert world.addon_inputs[1].parameters == {"poll-interval": "15s"}
    assert final.dns_name.startswith("apps.") and final.strimzi_versions == ["strimzi-cluster-operator.v0.23.0-4"]
    assert world.cleaned == [inp.cluster_id]


async def test_bad_reports_are_refused_naming_the_field(env: WorkflowEnvironment) -> None:
    world = FleetWorld()
    async with running(env, world, cluster_input()) as handle:
        await until(lambda: in_phase(handle, ClusterPhase.WAITING))
        no_version = report(strimzi=[{"version": "", "ready": True, "kafkaVersions": ["3.6.0"]}])
        with pytest.raises(WorkflowUpdateFailedError) as info:
            await execute_update(handle, DataPlaneClusterWorkflow.report_agent_status, no_version)
        assert info.value.cause.message == ".status.strimzi[0].version cannot be empty"
        not_bool = report().model_copy(update={"conditions": [AgentCondition(type="Ready", status="Maybe")]})
        with pytest.raises(WorkflowUpdateFailedError) as info:
            await execute_update(handle, DataPlaneClusterWorkflow.report_agent_status, not_bool)
        assert info.value.cause.message.startswith("conditions[0].status")
        assert await phase(handle) == ClusterPhase.WAITING  # nothing was applied
        st: DataPlaneClusterState = await handle.query(DataPlaneClusterWorkflow.status)
        assert st.reports == 0
        await handle.terminate()


async def test_ocm_error_fails_and_cleans_up(env: WorkflowEnvironment) -> None:
    world = FleetWorld(error_on_create=True)
    inp = cluster_input()
    async with running(env, world, inp) as handle:
        final: DataPlaneClusterState = await handle.result()
    assert final.phase == ClusterPhase.FAILED and final.failed_step == "provisioning"
    assert "error" in final.message and final.cleaned_up
    assert world.clusters[inp.cluster_id].gone and world.cleaned == [inp.cluster_id]
    assert contracts.CREATE_MACHINE_POOL not in world.calls


async def test_cluster_found_uninstalling_at_create_fails_at_once(env: WorkflowEnvironment) -> None:
    """The create finds the id's cluster already being uninstalled at OCM (deleted behind the
    workflow's back, or a reset workflow): it can never become ready, so provisioning fails at
    once (no polling until it is gone) and the removal runs; no second cluster."""
    world = FleetWorld()
    inp = cluster_input()
    world.clusters[inp.cluster_id] = StubCluster(
        ocm_id="ocm-old", external_id=inp.cluster_id, name=ocm_cluster_name(inp.cluster_id), deleted=True
    )
    async with running(env, world, inp) as handle:
        final: DataPlaneClusterState = await handle.result()
    assert final.phase == ClusterPhase.FAILED and final.failed_step == "provisioning"
    assert "uninstalling" in final.message and final.cleaned_up and final.ocm_id == "ocm-old"
    assert world.calls[:2] == [contracts.CREATE_OCM_CLUSTER, contracts.DELETE_OCM_CLUSTER]
    assert len(world.clusters) == 1 and world.clusters[inp.cluster_id].gone


async def test_refused_token_fails_the_step_at_once_and_cleans_up(env: WorkflowEnvironment) -> None:
    world = FleetWorld(pool_error=contracts.ERR_OCM_UNAUTHORIZED)
    inp = cluster_input()
    async with running(env, world, inp) as handle:
        final: DataPlaneClusterState = await handle.result()
    assert final.phase == ClusterPhase.FAILED and final.failed_step == "machine_pools"
    assert world.calls.count(contracts.CREATE_MACHINE_POOL) == 1  # not retried: a refused token stays refused
    assert world.clusters[inp.cluster_id].gone and final.cleaned_up


async def test_addon_that_never_gets_ready_fails_after_the_step_timeout(env: WorkflowEnvironment) -> None:
    world = FleetWorld(addon_never_ready=contracts.FLEETSHARD_ADDON)
    # A poll a minute: the time-skipping server skips the 30 minutes in 30 polls, not 1,800
    # (each an activity that no time skip shortens).
    inp = cluster_input(step_s=1800.0, poll_s=60.0)
    async with running(env, world, inp) as handle:
        final: DataPlaneClusterState = await handle.result()  # time skips over the 30 minutes
    assert final.phase == ClusterPhase.FAILED and final.failed_step == "addons"
    assert contracts.FLEETSHARD_ADDON in final.message
    assert world.clusters[inp.cluster_id].gone and final.cleaned_up
    assert ClusterPhase.WAITING not in [h.phase for h in final.history]


async def test_agent_that_never_reports_fails_the_cluster(env: WorkflowEnvironment) -> None:
    world = FleetWorld()
    inp = cluster_input(agent_s=900.0)
    async with running(env, world, inp) as handle:
        final: DataPlaneClusterState = await handle.result()
    assert final.phase == ClusterPhase.FAILED and final.failed_step == ClusterPhase.WAITING.value
    assert world.clusters[inp.cluster_id].gone and final.cleaned_up


async def test_lost_create_response_makes_no_second_cluster(env: WorkflowEnvironment) -> None:
    world = FleetWorld(lose_first_create_response=True)
    inp = cluster_input()
    async with running(env, world, inp) as handle:
        await until(lambda: in_phase(handle, ClusterPhase.WAITING))
        await handle.terminate()
    # The retry carried the same key and found the cluster the lost request made.
    assert len(world.create_inputs) == 2 and {c.cluster_id for c in world.create_inputs} == {inp.cluster_id}
    assert len(world.clusters) == 1


@pytest.mark.parametrize("stopped_in", ["a timer between addon polls", "a machine-pool call"])
async def test_worker_restart_mid_terraforming_makes_no_duplicate_cluster(
    env: WorkflowEnvironment, stopped_in: str
) -> None:
    """The worker stops mid-terraforming, either while the workflow waits on a durable timer
    (four steps done) or while an activity is in flight whose effect OCM already applied (the
    pool exists, the answer never came). A new worker replays the history (its cache starts empty, as
    a new process's does), retries only what never answered, and the lifecycle completes."""
    in_flight = stopped_in == "a machine-pool call"
    world = FleetWorld(hold_addons=not in_flight, hang_after_pool_created=in_flight)
    inp = cluster_input()
    tq = f"fleet-{uuid.uuid4().hex[:6]}"
    async with running(env, world, inp, tq=tq, max_cached_workflows=0) as handle:
        if in_flight:
            await asyncio.wait_for(world.hanging.wait(), 60)
        else:
            await until(lambda: contracts.GET_ADDON in world.calls)
        st: DataPlaneClusterState = await handle.query(DataPlaneClusterWorkflow.status)
        assert st.phase == ClusterPhase.PROVISIONED and len(st.steps_done) == (0 if in_flight else 4)
    # The first worker is gone mid-terraforming; a new one picks the workflow up.
    world.hold_addons = world.hang_after_pool_created = False
    calls_before = len(world.calls)
    async with new_worker(env.client, tq, workflows=[DataPlaneClusterWorkflow], activities=world.activities()):
        await until(lambda: in_phase(handle, ClusterPhase.WAITING))
        await execute_update(handle, DataPlaneClusterWorkflow.report_agent_status, report())
        await handle.signal(DataPlaneClusterWorkflow.deprovision)
        await handle.signal(DataPlaneClusterWorkflow.delete)
        final: DataPlaneClusterState = await handle.result()
    assert final.phase == ClusterPhase.DELETED
    assert len(world.clusters) == 1 and world.calls.count(contracts.CREATE_OCM_CLUSTER) == 1
    assert len(world.pools) == 1 and len(world.pools[final.ocm_id]) == 1
    after = world.calls[calls_before:]
    if in_flight:  # the lost call again, by the new worker, which found the pool
        assert world.calls.count(contracts.CREATE_MACHINE_POOL) == 2 and after[0] == contracts.CREATE_MACHINE_POOL
    else:  # nothing done before the stop is done again
        assert world.calls.count(contracts.CREATE_MACHINE_POOL) == 1 and after[0] == contracts.GET_ADDON
        for step in TERRAFORMING[1:4]:
            assert world.calls.count(step) == 1


async def test_restore_takes_a_deprovisioning_cluster_back_to_ready(env: WorkflowEnvironment) -> None:
    world = FleetWorld()
    # A parent that does not exist: the cluster's signals to it fail and are logged, as when
    # its region is gone; the history still holds them (and the rejected-instance patch).
    inp = cluster_input().model_copy(update={"parent_workflow_id": "fleet/aws/recorded-region"})
    async with running(env, world, inp) as handle:
        await until(lambda: in_phase(handle, ClusterPhase.WAITING))
        await execute_update(handle, DataPlaneClusterWorkflow.report_agent_status, report())
        placed = ManagedInstance(id="k1", instance_type="standard", size="x1", units=1, cluster_id=inp.cluster_id)
        await handle.signal(DataPlaneClusterWorkflow.instance_placed, placed)
        refused = InstanceStatusReport(conditions=[AgentCondition(type="Ready", status="False", reason="Rejected")])
        await execute_update(handle, DataPlaneClusterWorkflow.report_instance_statuses, {"k1": refused})
        await handle.signal(DataPlaneClusterWorkflow.deprovision)
        await until(lambda: in_phase(handle, ClusterPhase.DEPROVISIONING))
        view: AgentClusterView = await handle.query(DataPlaneClusterWorkflow.agent_view)
        assert view.reserved == []
        await handle.signal(DataPlaneClusterWorkflow.restore)
        await until(lambda: in_phase(handle, ClusterPhase.READY))
        assert contracts.DELETE_OCM_CLUSTER not in world.calls
        await handle.terminate()


async def test_continue_as_new_keeps_state(env: WorkflowEnvironment) -> None:
    world = FleetWorld()
    inp = cluster_input().model_copy(update={"reports_per_run": 3})
    async with running(env, world, inp) as handle:
        await until(lambda: in_phase(handle, ClusterPhase.WAITING))
        for i in range(7):
            await execute_update(handle, DataPlaneClusterWorkflow.report_agent_status, report(remaining=10 - i))
        await until(lambda: in_phase(handle, ClusterPhase.READY))
        latest = env.client.get_workflow_handle(handle.id)
        st: DataPlaneClusterState = await latest.query(DataPlaneClusterWorkflow.status)
        assert (
            st.reports == 7 and st.capacity["standard"].remaining_units == 4 and st.capacity["standard"].max_nodes == 18
        )
        desc = await latest.describe()
        assert desc.run_id != handle.result_run_id  # it did continue as new
        await latest.terminate()
    assert len(world.clusters) == 1


LIFECYCLE_HISTORY = HISTORIES / "0.2.0" / "fleet_DataPlaneCluster.json"


async def record_history(env: WorkflowEnvironment) -> None:
    """Used by tests.workflows.fleet.record_history to make the file above."""
    world = FleetWorld()
    # A parent that does not exist: the cluster's signals to it fail and are logged, as when
    # its region is gone; the history still holds them (and the rejected-instance patch).
    inp = cluster_input().model_copy(update={"parent_workflow_id": "fleet/aws/recorded-region"})
    async with running(env, world, inp) as handle:
        await until(lambda: in_phase(handle, ClusterPhase.WAITING))
        await execute_update(handle, DataPlaneClusterWorkflow.report_agent_status, report())
        placed = ManagedInstance(id="k1", instance_type="standard", size="x1", units=1, cluster_id=inp.cluster_id)
        await handle.signal(DataPlaneClusterWorkflow.instance_placed, placed)
        refused = InstanceStatusReport(conditions=[AgentCondition(type="Ready", status="False", reason="Rejected")])
        await execute_update(handle, DataPlaneClusterWorkflow.report_instance_statuses, {"k1": refused})
        await execute_update(handle, DataPlaneClusterWorkflow.report_agent_status, report(ready=False))
        await execute_update(handle, DataPlaneClusterWorkflow.report_agent_status, report())
        await handle.signal(DataPlaneClusterWorkflow.deprovision)
        await handle.signal(DataPlaneClusterWorkflow.delete)
        await handle.result()
        history = await handle.fetch_history()
    save(history, LIFECYCLE_HISTORY)
