"""MachineGC in production: the NodeAutoscaler starts it as a child (nodes/<cluster>/gc) that
outlives the loop's runs, once per run, and a continue-as-new finding it still running is fine.
Stubs under the contract names. The loop that continues as new after every iteration runs on
the dev server: on the time-skipping server one run in two spun for 30-90 s at a full core
before its third run, and five runs on the dev server took 4-5 CPU-s each."""

from __future__ import annotations

import uuid

import pytest
from temporalio import activity
from temporalio.api.enums.v1 import WorkflowExecutionStatus
from temporalio.client import WorkflowFailureError, WorkflowHandle
from temporalio.exceptions import ApplicationError
from temporalio.testing import WorkflowEnvironment

from scaling.nodes import contracts
from scaling.nodes.settings import AutoscalerSettings
from scaling.nodes.state import AutoscalerInput
from tests.polling import until
from tests.workflows.nodes.stubs import World
from tests.workflows.nodes.test_machine_gc import Cloud
from tests.workflows.polling import eventually
from tests.workflows.workers import new_worker
from workflows.nodes.autoscaler import NodeAutoscalerWorkflow
from workflows.nodes.machine_gc import MachineGCWorkflow, machine_gc_id


async def test_autoscaler_starts_machine_gc_once_and_it_survives_continue_as_new(dev_env: WorkflowEnvironment) -> None:
    env = dev_env
    tq = f"tq-{uuid.uuid4().hex[:6]}"
    cluster = f"c{uuid.uuid4().hex[:6]}"
    cloud = Cloud()
    activities = World().activities() + [a for a in cloud.activities() if a.__name__ != "delete_node"]
    async with new_worker(env.client, tq, activities=activities):
        settings = AutoscalerSettings(
            cluster=cluster, scan_interval_s=0.5, iterations_per_run=1, machine_gc_interval_s=45, machine_gc_grace_s=120
        )
        auto = await env.client.start_workflow(
            NodeAutoscalerWorkflow.run, AutoscalerInput(settings=settings), id=f"nodes/{cluster}", task_queue=tq
        )
        gc: WorkflowHandle = env.client.get_workflow_handle(machine_gc_id(cluster))
        try:
            # The loop continues as new after every iteration: several runs, one collector.
            await eventually(auto, lambda s: s.runs >= 3)
            desc = await gc.describe()
            assert desc.status == WorkflowExecutionStatus.WORKFLOW_EXECUTION_STATUS_RUNNING
            assert desc.parent_id == f"nodes/{cluster}"
            first_run = desc.run_id
            gc_status = await gc.query(MachineGCWorkflow.status)
            assert gc_status.cluster == cluster and gc_status.state.runs == 1
            assert cloud.live_asked and set(cloud.live_asked) == {f"nodes/{cluster}"}  # it asks its parent
            assert (await gc.describe()).run_id == first_run
            # The loop did not fail on finding its collector already running: its newest run
            # keeps looping (describe can land mid hand-over and see the run that just ended).
            await eventually(auto, lambda s: s.runs >= 4)
            status = (await env.client.get_workflow_handle(f"nodes/{cluster}").describe()).status
            assert status in (
                WorkflowExecutionStatus.WORKFLOW_EXECUTION_STATUS_RUNNING,
                WorkflowExecutionStatus.WORKFLOW_EXECUTION_STATUS_CONTINUED_AS_NEW,
            )
        finally:
            await auto.terminate()
            await gc.terminate()


async def test_machine_gc_can_be_switched_off(env: WorkflowEnvironment) -> None:
    tq = f"tq-{uuid.uuid4().hex[:6]}"
    cluster = f"c{uuid.uuid4().hex[:6]}"
    async with new_worker(env.client, tq, activities=World().activities()):
        auto = await env.client.start_workflow(
            NodeAutoscalerWorkflow.run,
            AutoscalerInput(settings=AutoscalerSettings(cluster=cluster, scan_interval_s=30, machine_gc=False)),
            id=f"nodes/{cluster}",
            task_queue=tq,
        )
        try:
            await eventually(auto, lambda s: s.iterations >= 1)
            # The decision is made before the first iteration; its history has no child start.
            events = [e async for e in auto.fetch_history_events()]
            assert not any(e.HasField("start_child_workflow_execution_initiated_event_attributes") for e in events)
        finally:
            await auto.terminate()


async def test_a_loop_that_fails_ends_its_machine_gc(env: WorkflowEnvironment) -> None:
    """A worker that does not serve the cluster fails the loop's first observation for good; the
    collector it started must not run on alone (it failed every round, by hand to stop)."""
    tq = f"tq-{uuid.uuid4().hex[:6]}"
    cluster = f"c{uuid.uuid4().hex[:6]}"

    @activity.defn(name=contracts.OBSERVE_CLUSTER)
    async def observe_cluster(_: object) -> None:
        raise ApplicationError(f"cluster {cluster!r} is not in this worker's settings", type="UnknownCluster", non_retryable=True)  # fmt: skip

    activities = [a for a in World().activities() if a.__name__ not in ("observe_cluster", "delete_node")]
    activities += [observe_cluster, *Cloud().activities()]
    async with new_worker(env.client, tq, activities=activities):
        auto = await env.client.start_workflow(
            NodeAutoscalerWorkflow.run,
            AutoscalerInput(settings=AutoscalerSettings(cluster=cluster, scan_interval_s=30)),
            id=f"nodes/{cluster}",
            task_queue=tq,
        )
        with pytest.raises(WorkflowFailureError) as failed:
            await auto.result()
        assert "not in this worker's settings" in str(failed.value.cause.cause)
        gc: WorkflowHandle = env.client.get_workflow_handle(machine_gc_id(cluster))

        async def ended() -> bool:
            return (await gc.describe()).status == WorkflowExecutionStatus.WORKFLOW_EXECUTION_STATUS_COMPLETED

        await until(ended, what="MachineGC ended")
        st = await gc.query(MachineGCWorkflow.status)
        assert st.state.last_error.startswith("ended: its loop failed: ")
