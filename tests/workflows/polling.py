"""Waiting on a running autoscaler or on the stubs' own state, with a deadline (never a bare sleep)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from temporalio.client import WorkflowHandle
from temporalio.service import RPCError

from scaling.nodes.status import AutoscalerStatus
from workflows.nodes.autoscaler import NodeAutoscalerWorkflow


async def eventually(
    handle: WorkflowHandle, check: Callable[[AutoscalerStatus], bool], timeout: float = 90.0
) -> AutoscalerStatus:
    """Poll the status query until `check` holds (a condition, not a sleep)."""
    deadline = asyncio.get_running_loop().time() + timeout
    status = None
    while True:
        try:
            status = await handle.query(NodeAutoscalerWorkflow.status)
        except RPCError:
            pass  # a query can race with a continue-as-new hand-over; ask again
        else:
            if check(status):
                return status
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(
                f"condition not reached; last status: {status and status.model_dump_json(indent=1)[:2000]}"
            )
        await asyncio.sleep(0.25)


async def until(check: Callable[[], bool], timeout: float = 60.0) -> None:
    """Wait on the stub world's own state: no server calls while runs hand over."""
    deadline = asyncio.get_running_loop().time() + timeout
    while not check():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition on the stub world not reached")
        await asyncio.sleep(0.1)
