"""Children a workflow starts and then leaves to themselves (ParentClosePolicy.ABANDON)."""

from __future__ import annotations

import asyncio
from typing import Any

from temporalio import workflow
from temporalio.common import TypedSearchAttributes
from temporalio.exceptions import WorkflowAlreadyStartedError


async def start_abandoned(
    run: Any,
    arg: Any,
    *,
    id: str,  # noqa: A002 - start_child_workflow's own name
    static_summary: str,
    search_attributes: TypedSearchAttributes | None = None,
) -> bool:
    """Start a child that outlives this run (a continue-as-new, a restart of the parent) and leave
    it to itself; False when one with its id is at work already (started by an earlier run, or a
    start replayed): it reports to the parent as the new one would."""
    try:
        handle = await workflow.start_child_workflow(
            run,
            arg,
            id=id,
            parent_close_policy=workflow.ParentClosePolicy.ABANDON,
            search_attributes=search_attributes,
            static_summary=static_summary,  # the Web UI's workflow list
        )
    except WorkflowAlreadyStartedError:
        return False
    abandon(handle)
    return True


def abandon(handle: asyncio.Future[Any]) -> None:
    """Take the child's outcome when it ends, and nothing else: its end is not the parent's
    business, and a child that fails or is terminated otherwise leaves "exception was never
    retrieved" and a traceback in the worker's log when its handle is collected."""
    handle.add_done_callback(_taken)


def _taken(fut: asyncio.Future[Any]) -> None:
    if not fut.cancelled():
        fut.exception()
