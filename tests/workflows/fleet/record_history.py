"""Record the kept DataPlaneCluster history (tests/workflows/histories/0.2.0/fleet_DataPlaneCluster.json)
after an intended workflow change:

.venv/bin/python -m tests.workflows.fleet.record_history
"""

import sys
from pathlib import Path

from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment

from bench.runtime import run
from starters.processes import free_port
from tests.workflows.fleet.test_cluster import record_history


async def main() -> None:
    server = str(Path(sys.executable).parent / "temporal-test-server")
    async with await WorkflowEnvironment.start_time_skipping(
        port=free_port(), test_server_existing_path=server, data_converter=pydantic_data_converter
    ) as env:
        await record_history(env)


if __name__ == "__main__":
    run(main())
