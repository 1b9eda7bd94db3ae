"""Waiting on a condition with a deadline, for every test (never a bare sleep standing in for
synchronisation): `eventually` for plain code, `until` inside an event loop, `query_until` on a
running workflow's query."""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from temporalio.client import WorkflowHandle
from temporalio.service import RPCError

T = TypeVar("T")


def eventually(
    probe: Callable[[], T], timeout: float = 30.0, interval: float = 0.02, message: str = "condition not met"
) -> T:
    """Poll until probe() returns something truthy, and return it; fail after timeout seconds."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = probe()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"{message} within {timeout}s (last value: {last!r})")


async def until(
    check: Callable[[], T | Awaitable[T]],
    timeout: float = 60.0,
    what: str = "condition",
    every: float = 0.1,
    tolerate: tuple[type[BaseException], ...] = (RPCError,),
) -> T:
    """Await until check() (a function or a coroutine function) gives something truthy, and
    return it. An error in `tolerate` counts as not yet (by default a failed RPC: a query racing
    a continue-as-new); the timeout's message shows it if it was the last answer."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while True:
        try:
            got = check()
            last = await got if inspect.isawaitable(got) else got
        except tolerate as err:
            last = err
        else:
            if last:
                return last
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what} (last: {str(last)[:3000]})")
        await asyncio.sleep(every)


async def query_until(
    handle: WorkflowHandle, query: Any, check: Callable[[Any], bool], timeout: float = 90.0, every: float = 0.25
) -> Any:
    """Ask a workflow's query until `check` holds on its answer, and return that answer. A
    query that fails (racing a continue-as-new hand-over) is asked again."""

    seen: list[Any] = []

    async def answer() -> tuple[Any] | None:
        got = await handle.query(query)
        seen[:] = [got]
        return (got,) if check(got) else None  # a tuple: an answer that is falsy still counts

    try:
        (got,) = await until(answer, timeout, "the query's answer", every)
    except AssertionError:
        last = seen[0] if seen else None
        text = last.model_dump_json(indent=1) if hasattr(last, "model_dump_json") else repr(last)
        raise AssertionError(f"condition not reached within {timeout}s; last answer: {text[:3000]}") from None
    return got
