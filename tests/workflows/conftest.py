from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment

from tests.conftest import DEV_SERVER_ARGS, SERVER_STARTUP


@pytest.fixture(scope="session")
async def dev_env(temporal_cli_path: str) -> AsyncIterator[WorkflowEnvironment]:
    """The real dev server, for loop tests that run in real time and poll with queries (the
    time-skipping server stalled such tests under CPU load)."""
    async with await WorkflowEnvironment.start_local(
        dev_server_existing_path=temporal_cli_path,
        dev_server_startup_timeout=SERVER_STARTUP,
        data_converter=pydantic_data_converter,
        dev_server_log_level="error",
        dev_server_extra_args=DEV_SERVER_ARGS,
    ) as e:
        yield e
