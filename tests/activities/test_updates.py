"""Updates the server rejected as unprocessed (a worker's workflow task timed out) are sent
again; a validator's or handler's failure reaches the caller at once. Queries the server could
not answer yet are asked again; a query of an unknown workflow fails at once."""

from __future__ import annotations

from typing import Any

import pytest
from temporalio.client import WorkflowUpdateFailedError
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

from activities.updates import UNPROCESSED_UPDATE, execute_update, query


class ScriptedHandle:
    """Answers execute_update from a script: exceptions are raised, other values returned."""

    def __init__(self, *answers: Any) -> None:
        self.answers = list(answers)
        self.calls: list[tuple[Any, ...]] = []

    async def execute_update(self, update: Any, *args: Any, rpc_timeout: Any = None) -> Any:
        return self._answer(update, *args)

    async def query(self, query_fn: Any, *args: Any, rpc_timeout: Any = None, result_type: Any = None) -> Any:
        return self._answer(query_fn, *args)

    def _answer(self, *call: Any) -> Any:
        self.calls.append(call)
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


def rpc_error(status: RPCStatusCode, message: str) -> RPCError:
    return RPCError(message, status, b"")


async def test_a_query_the_server_could_not_answer_yet_is_asked_again() -> None:
    busy = rpc_error(RPCStatusCode.RESOURCE_EXHAUSTED, "consistent query buffer is full")
    handle = ScriptedHandle(busy, busy, {"rounds": 3})
    assert await query(handle, "status", backoff_s=0.01) == {"rounds": 3}  # type: ignore[arg-type]
    assert handle.calls == [("status",)] * 3


async def test_a_query_of_an_unknown_workflow_fails_at_once() -> None:
    handle = ScriptedHandle(rpc_error(RPCStatusCode.NOT_FOUND, "workflow not found"), "never")
    with pytest.raises(RPCError, match="not found"):
        await query(handle, "status", backoff_s=0.01)  # type: ignore[arg-type]
    assert len(handle.calls) == 1


async def test_a_query_gives_up_after_its_attempts() -> None:
    handle = ScriptedHandle(*[rpc_error(RPCStatusCode.UNAVAILABLE, "down")] * 2)
    with pytest.raises(RPCError, match="down"):
        await query(handle, "status", attempts=2, backoff_s=0.01)  # type: ignore[arg-type]
    assert len(handle.calls) == 2
