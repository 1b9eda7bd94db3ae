"""Re-record the committed DataPlaneCluster history after an intended workflow change:

.venv/bin/python -m tests.workflows.fleet.record_history

With --autoscaler-from-db DB (a fleet demo's temporal.db: `growth demo --scenario fleet --headless
--workdir W`, then W/temporal.db), also writes the FleetAutoscaler's history to
histories/fleet_autoscaler.json, which the what-if and trail tests read.
"""

import argparse
import json
import sys
from pathlib import Path

from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment

from bench.runtime import run
from tests.workflows.fleet.test_cluster import record_history

BIN = Path(sys.executable).parent
AUTOSCALER_HISTORY = Path(__file__).parent / "histories" / "fleet_autoscaler.json"


async def save_autoscaler_history(db: Path) -> None:
    async with await WorkflowEnvironment.start_local(
        dev_server_existing_path=str(BIN / "temporal"),
        data_converter=pydantic_data_converter,
        dev_server_extra_args=["--db-filename", str(db)],
        dev_server_log_level="error",
    ) as env:
        runs = [e async for e in env.client.list_workflows('WorkflowType="FleetAutoscaler"')]
        if not runs:
            raise SystemExit(f"no FleetAutoscaler run in {db}")
        run = max(runs, key=lambda r: r.history_length or 0)
        history = await env.client.get_workflow_handle(run.id, run_id=run.run_id).fetch_history()
        AUTOSCALER_HISTORY.write_text(json.dumps(history.to_json_dict(), separators=(",", ":")))
        print(f"{AUTOSCALER_HISTORY.name}: {run.id} ({len(history.events)} events)")


async def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--autoscaler-from-db", type=Path, help="a fleet demo's temporal.db")
    args = p.parse_args()
    if args.autoscaler_from_db:
        await save_autoscaler_history(args.autoscaler_from_db)
    server = str(BIN / "temporal-test-server")
    async with await WorkflowEnvironment.start_time_skipping(
        test_server_existing_path=server, data_converter=pydantic_data_converter
    ) as env:
        await record_history(env)


if __name__ == "__main__":
    run(main())
