"""Updates the server rejected as unprocessed (a worker's workflow task timed out) are sent
again; a validator's or handler's failure reaches the caller at once."""

from __future__ import annotations

from typing import Any

import pytest
from temporalio.client import WorkflowUpdateFailedError
from temporalio.exceptions import ApplicationError

from activities.updates import UNPROCESSED_UPDATE, execute_update


class ScriptedHandle:
    """Answers execute_update from a script: exceptions are raised, other values returned."""

    def __init__(self, *answers: Any) -> None:
        self.answers = list(answers)
        self.calls: list[tuple[Any, ...]] = []

    async def execute_update(self, update: Any, *args: Any, rpc_timeout: Any = None) -> Any:
        self.calls.append((update, *args))
        answer = self.answers.pop(0)
        if isinstance(answer, BaseException):
            raise answer
        return answer


def failed(type_: str | None, message: str = "m") -> WorkflowUpdateFailedError:
    return WorkflowUpdateFailedError(ApplicationError(message, type=type_))


async def test_unprocessed_update_is_sent_again_with_the_same_argument() -> None:
    handle = ScriptedHandle(failed(UNPROCESSED_UPDATE), failed(UNPROCESSED_UPDATE), "placed")
    assert await execute_update(handle, "create_instance", "burst-1", backoff_s=0.01) == "placed"  # type: ignore[arg-type]
    assert handle.calls == [("create_instance", "burst-1")] * 3


async def test_a_rejection_by_the_workflow_is_not_retried() -> None:
    handle = ScriptedHandle(failed(None, "size: 'x9' is not a size of 'standard'"), "never")
    with pytest.raises(WorkflowUpdateFailedError) as err:
        await execute_update(handle, "create_instance", "burst-1", backoff_s=0.01)  # type: ignore[arg-type]
    assert "x9" in str(err.value.cause)
    assert len(handle.calls) == 1


async def test_gives_up_after_its_attempts() -> None:
    handle = ScriptedHandle(*[failed(UNPROCESSED_UPDATE)] * 3)
    with pytest.raises(WorkflowUpdateFailedError):
        await execute_update(handle, "pause", attempts=3, backoff_s=0.01)  # type: ignore[arg-type]
    assert len(handle.calls) == 3
