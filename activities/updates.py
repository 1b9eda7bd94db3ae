"""Sending workflow updates and queries from outside a workflow (CLIs, the demo, the fleet
agent API).

On a busy worker a workflow task can time out after it received an update; the server then
rejects that update with the failure type `UnprocessedUpdate` (it was never accepted, so no
handler ran). The request is safe to send again, and the caller should not see that failure:
measured under a loaded 2-core machine in the fleet scenario test.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

from temporalio.client import WorkflowHandle, WorkflowUpdateFailedError
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

from scaling.fleet.contracts import UPDATE_DRAINING

UNPROCESSED_UPDATE = "UnprocessedUpdate"
# A query refused for these is refused for good: no such workflow or query, or no access; or
# the caller's own deadline passed (no worker answered), where asking again only doubles the wait.
FINAL_QUERY_CODES = frozenset(
    {
        RPCStatusCode.DEADLINE_EXCEEDED,
        RPCStatusCode.NOT_FOUND,
        RPCStatusCode.INVALID_ARGUMENT,
        RPCStatusCode.PERMISSION_DENIED,
        RPCStatusCode.UNAUTHENTICATED,
    }
)


def was_not_processed(err: WorkflowUpdateFailedError) -> bool:
    """True when the server rejected the update before any handler saw it."""
    cause = err.cause
    return isinstance(cause, ApplicationError) and cause.type in (UNPROCESSED_UPDATE, UPDATE_DRAINING)


async def _retrying(
    call: Callable[[], Awaitable[Any]], again: Callable[[Exception], bool], attempts: int, backoff_s: float
) -> Any:
    """`call()`, made again (up to `attempts` times, backing off) while `again` says its
    failure was the server's not yet; any other failure is raised at once."""
    for attempt in range(1, attempts + 1):
        try:
            return await call()
        except Exception as err:
            if attempt == attempts or not again(err):
                raise
        await asyncio.sleep(backoff_s * attempt)
    raise AssertionError("unreachable")


async def execute_update(
    handle: WorkflowHandle[Any, Any],
    update: Any,
    *args: Any,
    rpc_timeout: timedelta | None = None,
    attempts: int = 5,
    backoff_s: float = 0.5,
) -> Any:
    """`handle.execute_update`, sent again (up to `attempts` times) while the server answers
    that the worker did not process it. Every other failure (a validator's rejection, a
    handler's error) is raised at once."""
    return await _retrying(
        lambda: handle.execute_update(update, *args, rpc_timeout=rpc_timeout),
        lambda err: isinstance(err, WorkflowUpdateFailedError) and was_not_processed(err),
        attempts,
        backoff_s,
    )


async def query(
    handle: WorkflowHandle[Any, Any],
    query_fn: Any,
    *args: Any,
    rpc_timeout: timedelta | None = None,
    attempts: int = 5,
    backoff_s: float = 0.5,
    result_type: type | None = None,  # for a query named by string
) -> Any:
    """`handle.query`, asked again (up to `attempts` times) while the server cannot answer yet.

    A busy loop's workflow answers queries between its workflow tasks; in a 10,000-pod burst
    the dev server refused one with "consistent query buffer is full" (RESOURCE_EXHAUSTED)
    and the demo, which polls the status, ended. A query can also race a continue-as-new
    hand-over. Unknown workflows and queries fail at once."""
    return await _retrying(
        lambda: handle.query(query_fn, *args, rpc_timeout=rpc_timeout, result_type=result_type),
        lambda err: isinstance(err, RPCError) and err.status not in FINAL_QUERY_CODES,
        attempts,
        backoff_s,
    )


def cause_of(err: BaseException) -> str:
    """The innermost cause's message: a refused update's reason ("group_pool: ...")."""
    while err.__cause__ is not None:
        err = err.__cause__
    return getattr(err, "message", None) or str(err)  # a Temporal failure's own message, without its type
