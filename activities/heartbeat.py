"""Heartbeats for every activity, and long waits that hand back on shutdown and resume on retry.

A worker that dies mid-activity is noticed by the server only through a timeout: without a
heartbeat that is the whole start-to-close limit (the issue measured 60-121 s stalls). With one,
it is the heartbeat timeout, a few seconds, after which the retry goes to any live worker.

`HeartbeatInterceptor` (registered on the worker) beats in the background while any activity
scheduled with a heartbeat_timeout runs, so short activities need no code of their own; it
repeats the activity's last details, so a wait's progress is never overwritten by an empty beat.
The SDK throttles what it sends to the server (worker's max_heartbeat_throttle_interval).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Any

from temporalio import activity
from temporalio.exceptions import ApplicationError
from temporalio.worker import (
    ActivityInboundInterceptor,
    ActivityOutboundInterceptor,
    ExecuteActivityInput,
    Interceptor,
)

# The error a wait raises when its worker shuts down: retryable, so the server hands the wait to
# another worker at once instead of after the heartbeat timeout.
WORKER_SHUTDOWN = "WorkerShutdown"


class HeartbeatInterceptor(Interceptor):
    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        return _Inbound(next)


class _Outbound(ActivityOutboundInterceptor):
    """Remembers the last details an activity sent, for the background beat to repeat."""

    details: Sequence[Any] = ()

    def heartbeat(self, *details: Any) -> None:
        self.details = details
        super().heartbeat(*details)


class _Inbound(ActivityInboundInterceptor):
    def init(self, outbound: ActivityOutboundInterceptor) -> None:
        self._outbound = _Outbound(outbound)
        super().init(self._outbound)

    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        timeout = activity.info().heartbeat_timeout
        if not timeout:
            return await super().execute_activity(input)
        # A third of the timeout: two beats can be late before the server gives up on this worker.
        beat = asyncio.create_task(self._beat(timeout.total_seconds() / 3))
        try:
            return await super().execute_activity(input)
        finally:
            beat.cancel()

    async def _beat(self, every_s: float) -> None:
        # Sleep first: the server's timeout runs from the start, and most activities end before
        # a first beat, so they cost no heartbeat call at all.
        while True:
            await asyncio.sleep(every_s)
            self._outbound.heartbeat(*self._outbound.details)


def resumed_deadline(timeout_s: float) -> float:
    """The wall-clock deadline of a wait: the one a previous attempt recorded in its heartbeat,
    so a retried wait on another worker ends when the first would have, not timeout_s later."""
    details = activity.info().heartbeat_details
    if details and isinstance(details[0], dict) and isinstance(details[0].get("deadline"), int | float):
        return float(details[0]["deadline"])
    return time.time() + timeout_s


def beat_progress(deadline: float, **progress: Any) -> None:
    """Heartbeat the wait's deadline (and what it has seen), for a retry to resume from."""
    activity.heartbeat({"deadline": deadline, **progress})


async def pause(seconds: float) -> None:
    """Sleep between polls of a wait, but hand the wait back when the worker shuts down: a
    rolling update then loses no time to the graceful-shutdown limit or the heartbeat timeout."""
    try:
        await asyncio.wait_for(activity.wait_for_worker_shutdown(), timeout=max(0.0, seconds))
    except TimeoutError:
        return
    raise ApplicationError("worker shutting down: the wait resumes on another worker", type=WORKER_SHUTDOWN)
