"""The Replayer every replay test uses: the sandbox as the worker runs it, without the SDK's 2 s
deadlock timer. A replay test checks that the code makes the recorded commands; at load 15-20
one activation's first replay (the sandbox importing the workflow's modules) took over 2 s and
failed as a "potential deadlock". Beside it, how a gated test's committed history is read,
replayed with a fresh run, and recorded again (`python -m <the test module>`)."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

from temporalio.client import WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Replayer

from starters.processes import free_port
from tests.conftest import SERVER_STARTUP
from workflows.sandbox import workflow_runner


def new_replayer(workflows: Sequence[type]) -> Replayer:
    return Replayer(
        workflows=workflows, data_converter=pydantic_data_converter, debug_mode=True, workflow_runner=workflow_runner()
    )


def committed(path: Path) -> WorkflowHistory:
    """A history recorded once and committed under tests/workflows/histories."""
    return WorkflowHistory.from_json(path.stem, json.loads(path.read_text()))


async def assert_replay(workflows: Sequence[type], *histories: WorkflowHistory) -> None:
    """Each history replays on the current code: it makes the recorded commands."""
    replayer = new_replayer(workflows)
    for history in histories:
        result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
        assert result.replay_failure is None, history.workflow_id


def record_again(path: Path, record: Callable[[WorkflowEnvironment], Awaitable[WorkflowHistory]]) -> None:
    """Write `path` again from a run `record` makes on a time-skipping server of its own (after an
    intended change to what the workflow commands)."""

    async def main() -> None:
        async with await WorkflowEnvironment.start_time_skipping(
            port=free_port(),
            test_server_startup_timeout=SERVER_STARTUP,
            test_server_existing_path=str(Path(sys.executable).parent / "temporal-test-server"),
            data_converter=pydantic_data_converter,
        ) as env:
            history = await record(env)
        path.write_text(json.dumps(history.to_json_dict(), indent=1))

    asyncio.run(main())
