"""Send signals and updates to the time-skipping server only while no timer is about to fire.

temporal-test-server refuses a workflow task that cancels a timer which fired while the task was
with the worker ("invalid history builder state for action", temporalio/sdk-java#2606) and
never times the task out or sends it again (#3088): the run stalls for good. A signal or update
that wakes a loop cancels its timer. Between skips the server's clock runs at real pace, so a
timer due a moment after the send fires during the task. In CI (30 Nov) the refusal came 0.4 s
after a ComponentAutoscaler test's worker started: the loop's first tick (its phase drawn from
the workflow id, anywhere in the scan) fell as the test's first update came, and the test hung
until pytest's timeout. The real server drops the buffered fire: the fault is the test
server's, so the tests work around it, not the workflows.

Before each send the interceptor reads the run's history: while one of its timers falls due
within GUARD_S it waits in real time for the fire, which is what the server's clock does anyway,
and while a workflow task is in flight (it may start a short timer) it waits up to TASK_WAIT_S
(a test may send to a run whose worker is gone). Server time is never moved, so no test's timing
changes."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta
from typing import Any

from temporalio.api.enums.v1 import EventType
from temporalio.client import (
    Interceptor,
    OutboundInterceptor,
    SignalWorkflowInput,
    StartWorkflowUpdateInput,
    WorkflowHandle,
)
from temporalio.service import RPCError
from temporalio.testing import WorkflowEnvironment

# Longer than a workflow task takes on a loaded machine.
GUARD_S = 3.0
TASK_WAIT_S = 2.0
POLL_S = 0.05

_TASK_OPEN = EventType.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED
_TASK_ENDS = {
    EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED,
    EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED,
    EventType.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT,
}
_CLOSED = {
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED,
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED,
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_TIMED_OUT,
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED,
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CANCELED,
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW,
}


async def settled(handle: WorkflowHandle[Any, Any]) -> tuple[bool, dict[str, datetime]]:
    """(no workflow task in flight, when each pending timer falls due) from the run's history."""
    due: dict[str, datetime] = {}
    task_open = False
    async for event in handle.fetch_history_events():
        kind = event.event_type
        if kind == EventType.EVENT_TYPE_TIMER_STARTED:
            attrs = event.timer_started_event_attributes
            due[attrs.timer_id] = event.event_time.ToDatetime() + attrs.start_to_fire_timeout.ToTimedelta()
        elif kind == EventType.EVENT_TYPE_TIMER_FIRED:
            due.pop(event.timer_fired_event_attributes.timer_id, None)
        elif kind == EventType.EVENT_TYPE_TIMER_CANCELED:
            due.pop(event.timer_canceled_event_attributes.timer_id, None)
        elif kind == _TASK_OPEN:
            task_open = True
        elif kind in _TASK_ENDS:
            task_open = False
        elif kind in _CLOSED:
            return True, {}
    return not task_open, due


async def wait_clear_of_timers(env: WorkflowEnvironment, handle: WorkflowHandle[Any, Any]) -> None:
    """Until the timers due within GUARD_S have fired. Only those: a loop whose next timer is
    shorter than the guard would otherwise hold the send back for good."""
    loop = asyncio.get_running_loop()
    task_deadline = loop.time() + TASK_WAIT_S
    deadline = loop.time() + 10 * GUARD_S  # a due timer fires within the guard, plus a slow task
    awaited: set[str] = set()
    while loop.time() < deadline:
        quiet, pending = await settled(handle)
        if awaited:
            if not awaited & pending.keys():
                return
        else:
            now = (await env.get_current_time()).replace(tzinfo=None)
            awaited = {timer for timer, due in pending.items() if due - now <= timedelta(seconds=GUARD_S)}
            if not awaited and (quiet or loop.time() >= task_deadline):
                return
        await asyncio.sleep(POLL_S)


class ClearOfTimers(Interceptor):
    """Set `env` once the environment exists (its client carries this interceptor)."""

    env: WorkflowEnvironment | None = None

    def intercept_client(self, next: OutboundInterceptor) -> OutboundInterceptor:
        return _Outbound(next, self)


class _Outbound(OutboundInterceptor):
    def __init__(self, next: OutboundInterceptor, root: ClearOfTimers) -> None:
        super().__init__(next)
        self.root = root

    async def _wait(self, workflow_id: str, run_id: str | None) -> None:
        env = self.root.env
        if env is None:
            return
        try:
            await wait_clear_of_timers(env, env.client.get_workflow_handle(workflow_id, run_id=run_id))
        except RPCError:
            pass  # no such run: the send itself answers as the test expects

    async def signal_workflow(self, input: SignalWorkflowInput) -> None:
        await self._wait(input.id, input.run_id)
        await super().signal_workflow(input)

    async def start_workflow_update(self, input: StartWorkflowUpdateInput) -> Any:  # noqa: ANN401
        await self._wait(input.id, input.run_id)
        return await super().start_workflow_update(input)
