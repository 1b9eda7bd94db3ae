"""The workflow template's first-activation rule: state comes from the input in
``@workflow.init``, so a signal delivered in the same activation as the start (what happens to a
child's report that lands right after continue-as-new) is applied to the carried state, not to
a blank one that run() then overwrites.

Signal-with-start puts the signal in the very first activation, deterministically; that is the
continue-as-new boundary without racing a real one. Time-skipping server; the loop is paused so
no activity runs."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from temporalio.testing import WorkflowEnvironment

from scaling.nodes.models import Attempt, AttemptResult, RequestPhase
from scaling.nodes.scale_down.removals import ScaleDownPhase, ScaleDownStatus
from scaling.nodes.scale_up.requests import NodeRequestStatus
from scaling.nodes.settings import AutoscalerSettings
from scaling.nodes.state import AutoscalerInput, NodeAutoscalerState
from tests.workflows.nodes.stubs import World
from tests.workflows.workers import new_worker
from workflows.nodes.autoscaler import NodeAutoscalerWorkflow

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def carried_state(cluster: str) -> NodeAutoscalerState:
    """What a previous run hands over: one request and one scale-down in flight, paused."""
    request = NodeRequestStatus(
        id=f"nodes/{cluster}/request/000001-abcd", group="general", current_pool="kwok-cx22", started_at=T0
    )
    removal = ScaleDownStatus(node="n1", workflow_id=f"nodes/{cluster}/scale-down/n1", kind="Empty", scale_down_at=0)
    return NodeAutoscalerState(
        paused=True,
        runs=3,
        seq=1,
        in_flight={request.id: request},
        scale_downs={"n1": removal},
    )


TASK_QUEUE = f"tq-{uuid.uuid4().hex[:6]}"


async def test_request_report_in_the_first_activation_is_applied(env: WorkflowEnvironment) -> None:
    async with new_worker(env.client, TASK_QUEUE, activities=World().activities()):
        cluster = f"c{uuid.uuid4().hex[:6]}"
        state = carried_state(cluster)
        (request,) = state.in_flight.values()
        final = request.model_copy(
            update={
                "phase": RequestPhase.READY,
                "node_name": "growth-1",
                "attempts": [Attempt(pool="kwok-cx22", result=AttemptResult.READY, timestamp=T0)],
            }
        )
        handle = await env.client.start_workflow(
            NodeAutoscalerWorkflow.run,
            AutoscalerInput(
                settings=AutoscalerSettings(cluster=cluster, scan_interval_s=30, machine_gc=False), state=state
            ),
            id=f"nodes/{cluster}",
            task_queue=TASK_QUEUE,
            start_signal="request_changed",
            start_signal_args=[final],
        )
        status = await handle.query(NodeAutoscalerWorkflow.status)
        # The report closed the carried request, and the rest of the carried state survived.
        assert status.in_flight == []
        assert status.nodes_created == 1
        assert status.requests_by_phase.get("Ready") == 1
        assert status.runs == 3 and status.paused
        assert [s.node for s in status.scale_downs] == ["n1"]
        await handle.terminate()


async def test_scale_down_report_in_the_first_activation_is_applied(env: WorkflowEnvironment) -> None:
    async with new_worker(env.client, TASK_QUEUE, activities=World().activities()):
        cluster = f"c{uuid.uuid4().hex[:6]}"
        state = carried_state(cluster)
        final = state.scale_downs["n1"].model_copy(update={"phase": ScaleDownPhase.REMOVED})
        handle = await env.client.start_workflow(
            NodeAutoscalerWorkflow.run,
            AutoscalerInput(
                settings=AutoscalerSettings(cluster=cluster, scan_interval_s=30, machine_gc=False), state=state
            ),
            id=f"nodes/{cluster}",
            task_queue=TASK_QUEUE,
            start_signal="scale_down_changed",
            start_signal_args=[final],
        )
        status = await handle.query(NodeAutoscalerWorkflow.status)
        assert status.scale_downs == []
        assert status.scale_down_by_phase.get("Removed") == 1
        assert len(status.in_flight) == 1  # the carried request is still there
        await handle.terminate()


async def test_resume_in_the_first_activation_is_applied(env: WorkflowEnvironment) -> None:
    """A paused loop resumed right at the boundary runs: the resume is not overwritten by the
    carried paused=True."""
    world = World(hold_readiness=True)
    async with new_worker(env.client, TASK_QUEUE, activities=world.activities()):
        cluster = f"c{uuid.uuid4().hex[:6]}"
        handle = await env.client.start_workflow(
            NodeAutoscalerWorkflow.run,
            AutoscalerInput(
                settings=AutoscalerSettings(cluster=cluster, scan_interval_s=30, machine_gc=False),
                state=carried_state(cluster),
            ),
            id=f"nodes/{cluster}",
            task_queue=TASK_QUEUE,
            start_signal="resume",
        )
        status = await handle.query(NodeAutoscalerWorkflow.status)
        assert not status.paused
        await handle.terminate()
