"""Children a workflow starts and then leaves to themselves (ParentClosePolicy.ABANDON)."""

from __future__ import annotations

import asyncio
from typing import Any


def abandon(handle: asyncio.Future[Any]) -> None:
    """Take the child's outcome when it ends, and nothing else: its end is not the parent's
    business, and a child that fails or is terminated otherwise leaves "exception was never
    retrieved" and a traceback in the worker's log when its handle is collected."""
    handle.add_done_callback(_taken)


def _taken(fut: asyncio.Future[Any]) -> None:
    if not fut.cancelled():
        fut.exception()
