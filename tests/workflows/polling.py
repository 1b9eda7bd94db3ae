"""Waiting on a running nodes autoscaler through its status query (tests/polling.py waits)."""

from __future__ import annotations

from collections.abc import Callable

from temporalio.client import WorkflowHandle

from scaling.nodes.status import AutoscalerStatus
from tests.polling import query_until
from workflows.nodes.autoscaler import NodeAutoscalerWorkflow


async def eventually(
    handle: WorkflowHandle, check: Callable[[AutoscalerStatus], bool], timeout: float = 90.0
) -> AutoscalerStatus:
    """Ask the status query until `check` holds (a condition, not a sleep)."""
    return await query_until(handle, NodeAutoscalerWorkflow.status, check, timeout)
