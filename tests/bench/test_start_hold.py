"""bench/start_hold.py: armed, the first NodeRequest or NodeRequestBatch start waits, unsent, until
the bench lifts it; every other start passes straight through, and an unarmed hold holds nothing."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import pytest
from temporalio.api.workflowservice.v1 import StartWorkflowExecutionRequest
from temporalio.service import WorkflowService

from bench import start_hold
from tests.polling import until


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[str]:
    """The starts that reached the server (a stand-in for the RPC), with the hold installed."""
    out: list[str] = []

    async def send(self: Any, req: StartWorkflowExecutionRequest, *args: Any, **kwargs: Any) -> str:
        out.append(req.workflow_id)
        return req.workflow_id

    monkeypatch.setattr(WorkflowService, "start_workflow_execution", send)
    start_hold.install(tmp_path)
    return out


def start(workflow_type: str, workflow_id: str) -> Any:
    req = StartWorkflowExecutionRequest(workflow_id=workflow_id)
    req.workflow_type.name = workflow_type
    return WorkflowService.start_workflow_execution(object(), req)  # type: ignore[arg-type]


async def test_the_first_request_start_waits_until_lifted(sent: list[str], tmp_path: Path) -> None:
    (tmp_path / start_hold.ARMED).touch()
    first = asyncio.create_task(start("NodeRequest", "nodes/c/request/a"))
    held = start_hold.held_path(tmp_path, os.getpid())
    await until(lambda: held.exists() and held.read_text() == "nodes/c/request/a", 10.0, "the start held", every=0.05)
    # the hold is taken: the next request start and any other start pass while the first waits
    assert await start("NodeRequest", "nodes/c/request/b") == "nodes/c/request/b"
    assert await start("NodeAutoscaler", "nodes/c") == "nodes/c"
    assert sent == ["nodes/c/request/b", "nodes/c"] and not first.done()
    held.unlink()  # lifted
    assert await first == "nodes/c/request/a"
    assert sent[-1] == "nodes/c/request/a"


async def test_a_batch_start_is_held_as_a_request_start_is(sent: list[str], tmp_path: Path) -> None:
    (tmp_path / start_hold.ARMED).touch()
    assert await start("NodeAutoscaler", "nodes/c") == "nodes/c"  # not a request: never held
    first = asyncio.create_task(start("NodeRequestBatch", "nodes/c/request/000001-ab12"))
    held = start_hold.held_path(tmp_path, os.getpid())
    await until(lambda: held.exists(), 10.0, "the batch start held", every=0.05)
    assert held.read_text() == "nodes/c/request/000001-ab12"
    assert await start("NodeRequestBatch", "nodes/c/request/000002-cd34") == "nodes/c/request/000002-cd34"
    assert sent == ["nodes/c", "nodes/c/request/000002-cd34"] and not first.done()
    held.unlink()
    assert await first == "nodes/c/request/000001-ab12"


async def test_unarmed_it_holds_nothing(sent: list[str], tmp_path: Path) -> None:
    assert await start("NodeRequest", "nodes/c/request/a") == "nodes/c/request/a"
    assert await start("NodeRequestBatch", "nodes/c/request/b") == "nodes/c/request/b"
    assert list(tmp_path.iterdir()) == []
