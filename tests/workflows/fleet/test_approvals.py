"""Approval gates on a DataPlaneCluster (scaling.fleet.approvals), on the time-skipping server:
creating at OCM and deleting wait for approve/deny, or for the durable timeout's default."""

from __future__ import annotations

import pytest
from temporalio.client import WorkflowHandle, WorkflowUpdateFailedError
from temporalio.testing import WorkflowEnvironment

from activities.updates import execute_update
from scaling.fleet import contracts
from scaling.fleet.approvals import ClusterApprovalGate
from scaling.fleet.lifecycle import DataPlaneClusterState
from scaling.fleet.models import ClusterPhase
from tests.polling import until
from tests.workflows.fleet.stubs import FleetWorld
from tests.workflows.fleet.test_autoscaler import create, eventually, phases, region, settings
from tests.workflows.fleet.test_cluster import cluster_input, in_phase, report, running
from workflows.fleet.autoscaler import FleetAutoscalerWorkflow
from workflows.fleet.cluster import DataPlaneClusterWorkflow


async def state(handle: WorkflowHandle) -> DataPlaneClusterState:
    return await handle.query(DataPlaneClusterWorkflow.status)


async def awaiting(handle: WorkflowHandle, step: str) -> bool:
    st = await state(handle)
    return st.approval is not None and st.approval.step == step and not st.approval.decision


@pytest.mark.parametrize("default", ["deny", "approve"])
async def test_creation_waits_then_the_timeout_applies_the_default(env: WorkflowEnvironment, default: str) -> None:
    world = FleetWorld()
    gate = ClusterApprovalGate(create=True, timeout_s=3600, default=default)
    inp = cluster_input().model_copy(update={"approval": gate})
    async with running(env, world, inp) as handle:
        await until(lambda: awaiting(handle, "create"))
        st = await state(handle)
        assert st.phase == ClusterPhase.ACCEPTED and world.clusters == {}  # nothing at OCM while it waits
        assert st.message.startswith("awaiting approval: create data-plane cluster")
        if default == "deny":
            final: DataPlaneClusterState = await handle.result()  # skips time to the timer
            assert final.phase == ClusterPhase.FAILED and final.failed_step == "approval"
            assert final.message == "create denied by timeout: no decision within 3600 s"
            assert world.clusters == {} and contracts.DELETE_OCM_CLUSTER not in world.calls
        else:
            await env.sleep(3601)  # the server's clock, skipped past the durable timer
            await until(lambda: in_phase(handle, ClusterPhase.WAITING))  # the timeout approved it
            assert len(world.clusters) == 1 and (await state(handle)).approval.by == "timeout"
            await handle.terminate()


async def test_operator_approves_creation_and_a_second_decision_is_refused(env: WorkflowEnvironment) -> None:
    world = FleetWorld()
    inp = cluster_input().model_copy(update={"approval": ClusterApprovalGate(create=True)})
    async with running(env, world, inp) as handle:
        await until(lambda: awaiting(handle, "create"))
        assert await execute_update(handle, DataPlaneClusterWorkflow.approve, "go") == f"{handle.id}: approved"
        with pytest.raises(WorkflowUpdateFailedError) as refused:
            await execute_update(handle, DataPlaneClusterWorkflow.deny, "too late")
        assert refused.value.cause.message == f"id: {handle.id} was already approved (by operator)"
        st = await state(handle)
        assert st.approval is not None and (st.approval.decision, st.approval.by) == ("approved", "operator")
        await until(lambda: in_phase(handle, ClusterPhase.WAITING))
        assert len(world.clusters) == 1
        await handle.terminate()


async def test_a_denied_deletion_takes_the_cluster_back_to_ready(env: WorkflowEnvironment) -> None:
    world = FleetWorld()
    inp = cluster_input().model_copy(update={"approval": ClusterApprovalGate(delete=True)})
    async with running(env, world, inp) as handle:
        await until(lambda: in_phase(handle, ClusterPhase.WAITING))  # creation is not gated
        await execute_update(handle, DataPlaneClusterWorkflow.report_agent_status, report())
        await handle.signal(DataPlaneClusterWorkflow.deprovision)
        await handle.signal(DataPlaneClusterWorkflow.delete)
        await until(lambda: awaiting(handle, "delete"))
        assert "empty, and the region keeps enough capacity" in (await state(handle)).approval.reason
        await execute_update(handle, DataPlaneClusterWorkflow.deny, "keep it")
        await until(lambda: in_phase(handle, ClusterPhase.READY))
        st = await state(handle)
        assert st.message == "delete denied by operator: keep it" and not st.deletion_confirmed
        assert contracts.DELETE_OCM_CLUSTER not in world.calls
        await handle.terminate()


async def test_an_approved_deletion_deletes(env: WorkflowEnvironment) -> None:
    world = FleetWorld()
    gate = ClusterApprovalGate(delete=True, timeout_s=600, default="approve")
    inp = cluster_input().model_copy(update={"approval": gate})
    async with running(env, world, inp) as handle:
        await until(lambda: in_phase(handle, ClusterPhase.WAITING))
        await execute_update(handle, DataPlaneClusterWorkflow.report_agent_status, report())
        await handle.signal(DataPlaneClusterWorkflow.deprovision)
        await handle.signal(DataPlaneClusterWorkflow.delete)
        await until(lambda: awaiting(handle, "delete"))
        final: DataPlaneClusterState = await handle.result()  # the timeout approves
    assert final.phase == ClusterPhase.DELETED and final.approval is not None and final.approval.by == "timeout"
    assert contracts.DELETE_OCM_CLUSTER in world.calls


async def test_the_region_blocks_a_cluster_whose_deletion_was_denied(dev_env: WorkflowEnvironment) -> None:
    """The whole loop on the dev server: a removable cluster waits before its deletion; denied, it
    is back to ready in the region's registry, blocked until approve-deletion."""
    world = FleetWorld()
    async with region(dev_env, world, settings(approve_cluster_delete=True)) as handle:
        await eventually(handle, lambda st: st.clusters_created == 1)
        for i in range(10):
            await create(handle, f"kafka-{i}")
        await eventually(handle, lambda st: st.instances_placed == 10 and phases(st) == [ClusterPhase.READY] * 2)
        for i in range(10):
            await execute_update(handle, FleetAutoscalerWorkflow.delete_instance, f"kafka-{i}")
        clusters = [c.id for c in (await handle.query(FleetAutoscalerWorkflow.status)).clusters]
        handles = {cid: dev_env.client.get_workflow_handle(contracts.cluster_workflow_id(cid)) for cid in clusters}

        async def deletion_waiting() -> str | None:
            for cid, h in handles.items():
                if await awaiting(h, "delete"):
                    return cid
            return None

        found: list[str] = []

        async def check() -> bool:
            cid = await deletion_waiting()
            found[:] = [cid] if cid else []
            return bool(cid)

        await until(check)
        [candidate] = found
        await execute_update(handles[candidate], DataPlaneClusterWorkflow.deny, "keep capacity")
        st = await eventually(
            handle, lambda st: any(c.id == candidate and c.deletion_blocked for c in st.clusters), timeout=60
        )
        rec = next(c for c in st.clusters if c.id == candidate)
        assert rec.phase == ClusterPhase.READY and not rec.delete_sent
        assert any(f"{candidate}: delete denied by operator: keep capacity" in e for e in st.events)
        later = st.rounds + 3  # blocked: later rounds neither mark it nor delete it
        st = await eventually(handle, lambda st: st.rounds >= later)
        rec = next(c for c in st.clusters if c.id == candidate)
        assert rec.phase == ClusterPhase.READY and rec.deletion_blocked
        # Nothing was deleted: the other empty cluster may be marked now, and waits for approval too.
        assert contracts.DELETE_OCM_CLUSTER not in world.calls
