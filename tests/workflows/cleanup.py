"""Leaving nothing behind after a workflow test: every run it started is terminated, and its
in-process worker stops within a bound or the test fails saying so.

A run left Running keeps its worker busy: the SDK cannot evict a run whose workflow task tripped
the 2 s deadlock detector (it waits on that task, then retries the eviction for ever), and the
worker's shutdown waits on the eviction. A loop test under load once hung in its teardown for
8+ minutes that way, on a NodeRequestBatch nobody terminated."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager

import pytest
from temporalio.client import Client
from temporalio.service import RPCError
from temporalio.worker import Worker

# Far above a clean shutdown (well under a second, seconds under load), far below a hang.
SHUTDOWN_S = 60.0


async def terminate_runs(client: Client, ids: Iterable[str] = (), *, under: str | None = None) -> None:
    """Terminate the workflows of `ids` and every running one whose id starts with `under` (a
    loop's children, batches included, are named under the loop's id; visibility may not list the
    newest yet, hence `ids` too)."""
    listed: set[str] = set()
    if under is not None:
        query = f'WorkflowId STARTS_WITH "{under}" AND ExecutionStatus = "Running"'
        listed = {w.id async for w in client.list_workflows(query)}
    for workflow_id in sorted(listed | set(ids)):
        try:
            await client.get_workflow_handle(workflow_id).terminate()
        except RPCError:
            pass  # already closed


async def stop_worker(worker: Worker, timeout_s: float = SHUTDOWN_S) -> None:
    """Shut the worker down; fail the test (not hang the suite) if that takes over `timeout_s`."""
    try:
        await asyncio.wait_for(worker.__aexit__(None, None, None), timeout_s)
    except TimeoutError:
        pytest.fail(
            f"the worker of task queue {worker.task_queue} did not shut down within {timeout_s:g} s: "
            "a workflow it holds could not be evicted (a workflow task failed as a potential deadlock?)",
            pytrace=False,
        )


@asynccontextmanager
async def running(worker: Worker) -> AsyncIterator[Worker]:
    """`async with Worker(...)` whose exit is stop_worker's: bounded."""
    await worker.__aenter__()
    try:
        yield worker
    finally:
        await stop_worker(worker)
