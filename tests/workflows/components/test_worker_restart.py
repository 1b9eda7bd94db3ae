"""A worker killed between creating a heterogeneous TidbCluster and recording it: the retry
finds the object by its deterministic auto-<hash> name, nothing is created twice.

In its own module (its own time-skipping server): the dead worker's activity attempt lingers
at the server and would hold up time skipping for the tests after it."""

from __future__ import annotations

import asyncio
import uuid

from temporalio.testing import WorkflowEnvironment

from scaling.components.state import ComponentAutoscalerInput, ComponentAutoscalerSettings
from tests.polling import until
from tests.workflows.components.stubs import ComponentsWorld
from tests.workflows.components.test_autoscaler import report, rounds_past, skip, tikv_spec
from tests.workflows.workers import new_worker
from workflows.components.autoscaler import ComponentAutoscalerWorkflow


async def test_worker_killed_between_creating_a_group_and_recording_it(env: WorkflowEnvironment) -> None:
    world = ComponentsWorld(spec=tikv_spec(), load={"tikv": 3.0}, hot={"tikv": (1, 0.95)}, crash_next_create=True)
    tq = f"components-{uuid.uuid4().hex[:6]}"
    settings = ComponentAutoscalerSettings(namespace="ns", name="tas", scan_interval_s=30, activity_timeout_s=20)
    handle = None
    # No workflow cache: no sticky queue holds the run's next task for a worker that is gone.
    async with new_worker(env.client, tq, activities=world.activities(), max_cached_workflows=0):
        handle = await env.client.start_workflow(
            ComponentAutoscalerWorkflow.run,
            ComponentAutoscalerInput(settings=settings),
            id=f"components/ns/tas-{uuid.uuid4().hex[:6]}",
            task_queue=tq,
        )
        await asyncio.wait_for(world.crashed.wait(), timeout=60)
    # The first worker is gone; the object exists but the workflow never heard of it.
    assert world.objects_created and len(world.autos) == 1
    try:
        # A new worker starts with an empty cache: it replays the history once, as a new process
        # would (with none, every later task replayed the whole history again).
        async with new_worker(env.client, tq, activities=world.activities()):
            await skip(env, 30)
            await until(lambda: "auto" in str((world.last_status().get("tikv") or {}).keys()))
            rep = await report(handle)
            (name,) = world.autos
            assert list(rep.components["tikv"].groups) == [name]
            assert rep.components["tikv"].groups[name].uid == world.autos[name].uid
            await skip(env, 400)
            await rounds_past(env, handle, 2)
            assert world.objects_created == [name]  # created exactly once
            assert len(world.autos) == 1 and rep.counters.heterogeneous_created == [name]
    finally:
        await handle.terminate()
