"""The time-skipping env's client holds a signal or update back until the run's imminent timer has
fired (tests/workflows/clear_of_timers.py): the test server strands a run whose workflow task
cancels a timer that fired while the task was with the worker."""

from __future__ import annotations

import uuid
from datetime import timedelta

from temporalio import workflow
from temporalio.api.enums.v1 import EventType
from temporalio.testing import WorkflowEnvironment

from tests.workflows.cleanup import running
from tests.workflows.clear_of_timers import GUARD_S
from tests.workflows.workers import new_worker

SHORT = timedelta(seconds=GUARD_S / 2)
LONG = timedelta(seconds=GUARD_S * 20)


@workflow.defn(sandboxed=False)
class WakeableLoop:
    """A loop that a timer or an update wakes, as growth's loops are."""

    @workflow.init
    def __init__(self) -> None:
        self.woken = 0

    @workflow.run
    async def run(self) -> None:
        timeout = SHORT
        while True:
            try:
                await workflow.wait_condition(lambda: self.woken > 0, timeout=timeout)
            except TimeoutError:
                timeout = LONG
                continue
            return

    @workflow.update
    def wake(self) -> int:
        self.woken += 1
        return self.woken


async def test_an_update_waits_for_a_timer_due_within_the_guard(env: WorkflowEnvironment) -> None:
    tq = f"clear-{uuid.uuid4().hex[:6]}"
    async with running(new_worker(env.client, tq, workflows=[WakeableLoop])):
        handle = await env.client.start_workflow(WakeableLoop.run, id=tq, task_queue=tq)
        assert await handle.execute_update(WakeableLoop.wake) == 1  # sent at once, due in GUARD_S / 2
        await handle.result()
    kinds = [e.event_type async for e in handle.fetch_history_events()]
    # The update came after the first timer fired (not before it): it cancelled the second.
    accepted = kinds.index(EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED)
    assert EventType.EVENT_TYPE_TIMER_FIRED in kinds[:accepted]
    assert kinds.count(EventType.EVENT_TYPE_TIMER_CANCELED) == 1
