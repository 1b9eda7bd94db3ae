"""An abandoned child's end (failed, terminated) is taken without a word in the worker's log."""

from __future__ import annotations

import asyncio
import gc

import pytest

from workflows.children import abandon


@pytest.mark.parametrize("abandoned", [True, False])
def test_a_terminated_childs_outcome_is_taken_only_when_abandoned(abandoned: bool) -> None:
    loop = asyncio.new_event_loop()
    reported: list[str] = []
    loop.set_exception_handler(lambda _loop, context: reported.append(context["message"]))
    try:
        handle = loop.create_future()
        if abandoned:
            abandon(handle)
        handle.set_exception(RuntimeError("Child Workflow execution terminated"))
        loop.run_until_complete(asyncio.sleep(0))  # its done callbacks run
        del handle
        gc.collect()
    finally:
        loop.close()
    # Without abandon() the collected handle reports "exception was never retrieved".
    assert reported == ([] if abandoned else ["Future exception was never retrieved"])
