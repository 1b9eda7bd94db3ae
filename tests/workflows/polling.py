"""Waiting on a running nodes autoscaler through its status query (tests/polling.py waits)."""

from __future__ import annotations

from collections.abc import Callable

from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowHandle

from scaling.nodes.status import AutoscalerStatus
from tests.polling import query_until
from workflows.nodes.autoscaler import NodeAutoscalerWorkflow


async def eventually(
    handle: WorkflowHandle, check: Callable[[AutoscalerStatus], bool], timeout: float = 90.0
) -> AutoscalerStatus:
    """Ask the status query until `check` holds (a condition, not a sleep)."""
    return await query_until(handle, NodeAutoscalerWorkflow.status, check, timeout)


async def signalled(handle: WorkflowHandle) -> bool:
    """A signal is in the run's history (taken by the server, whatever the workflow does with it)."""
    return any(
        [e.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED async for e in handle.fetch_history_events()]
    )
