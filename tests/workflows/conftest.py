from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from temporalio.testing import WorkflowEnvironment

from tests.conftest import start_dev_server


@pytest.fixture(scope="session")
async def dev_env(temporal_cli_path: str) -> AsyncIterator[WorkflowEnvironment]:
    """The real dev server, for loop tests that run in real time and poll with queries (the
    time-skipping server stalled such tests under CPU load)."""
    async with await start_dev_server(temporal_cli_path) as e:
        yield e
