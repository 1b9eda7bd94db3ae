"""Signals and updates with malformed and oversized arguments, as a careless script or a hostile
caller would send them: every update is refused (its validator names the field, or the client
refuses a payload over MAX_UPDATE_BYTES unsent, or the argument does not decode), a malformed
signal is dropped, and the loop is unharmed: it answers its status and takes the next good
message. Time-skipping server; stubs under the contracts' activity names."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from temporalio.client import WorkflowHandle, WorkflowUpdateFailedError
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from activities.updates import MAX_UPDATE_BYTES, PayloadTooLarge, execute_update
from scaling.fleet import contracts
from scaling.fleet.lifecycle import DataPlaneClusterState
from scaling.fleet.models import ClusterPhase
from scaling.nodes.settings import AutoscalerSettings
from scaling.nodes.state import AutoscalerInput
from scaling.text import MAX_UPDATE_TEXT
from tests.polling import until
from tests.workflows.fleet.stubs import FleetWorld
from tests.workflows.fleet.test_cluster import cluster_input, in_phase, report, running
from tests.workflows.nodes.stubs import World
from workflows.all import WORKFLOWS
from workflows.fleet.cluster import DataPlaneClusterWorkflow
from workflows.nodes.autoscaler import NodeAutoscalerWorkflow

HUGE = "x" * (MAX_UPDATE_BYTES + 1)
LONG = "x" * (MAX_UPDATE_TEXT + 1)


async def refused(handle: WorkflowHandle, update: str, arg: Any, field: str = "") -> str:
    """The update is refused; the reason (naming `field` when given)."""
    with pytest.raises((WorkflowUpdateFailedError, PayloadTooLarge)) as info:
        await execute_update(handle, update, arg)
    err = info.value
    reason = str(err) if isinstance(err, PayloadTooLarge) else str(getattr(err.cause, "message", err.cause))
    assert not field or reason.startswith(field), reason
    return reason


async def test_a_clusters_updates_and_signals_refuse_garbage_and_it_keeps_serving(env: WorkflowEnvironment) -> None:
    inp = cluster_input()
    async with running(env, FleetWorld(), inp) as handle:
        await until(lambda: in_phase(handle, ClusterPhase.WAITING))
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
    async with Worker(env.client, task_queue=tq, workflows=WORKFLOWS, activities=World().activities()):
        handle = await env.client.start_workflow(
            NodeAutoscalerWorkflow.run,
            AutoscalerInput(settings=AutoscalerSettings(cluster=cluster, scan_interval_s=30, machine_gc=False)),
            id=f"nodes/{cluster}",
            task_queue=tq,
        )
        await until(lambda: _iterations(handle), what="a first iteration")
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
