"""Re-record the committed replay histories after an intended workflow change.

    .venv/bin/python -m tests.workflows.record_history            # all of them (~3 minutes)
    .venv/bin/python -m tests.workflows.record_history --from-db .growth/temporal.db

Node workflows: runs the headless scale-down demo (dev server + sim + the real worker) in a
scratch directory, reopens its Temporal database, and writes one history per node workflow type
to tests/workflows/histories/nodes_<Type>.json (tests/workflows/nodes/test_replay.py replays
them). With --from-db, histories are taken from an existing demo database instead. The
NodeRequest fallback history (node_request_fallback.json) is re-recorded on the time-skipping
server as before, and so is the NodeRequestBatch history (node_request_batch.json).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from temporalio.client import Client, WorkflowExecution
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment

from bench.runtime import run
from starters.processes import free_port
from tests.workflows.nodes.test_node_request import record_history as record_fallback
from tests.workflows.nodes.test_node_request_batch import record_history as record_batch

BIN = Path(sys.executable).parent
HISTORIES = Path(__file__).parent / "histories"
# What the demo runs now. Its loop starts NodeRequestBatch workflows; a NodeRequest (what an
# operator may start by hand) is recorded on the time-skipping server (node_request_fallback.json),
# and so is a NodeReplacement (node_replacement.json: python -m tests.workflows.nodes.test_node_replacement).
RECORDED_TYPES = ("NodeAutoscaler", "NodeRequestBatch", "NodeScaleDown", "MachineGC")
NODE_TYPES = (*RECORDED_TYPES, "NodeRequest", "NodeReplacement")
# One run of a loop workflow is enough to catch a non-deterministic change, and a whole demo's
# worth of NodeAutoscaler events would make a large file.
MAX_EVENTS = 400


def node_history_file(workflow_type: str, directory: Path = HISTORIES) -> Path:
    if workflow_type == "NodeRequest":
        return directory / "node_request_fallback.json"
    if workflow_type == "NodeReplacement":
        return directory / "node_replacement.json"
    return directory / f"nodes_{workflow_type}.json"


def run_demo(workdir: Path) -> None:
    argv = [sys.executable, "-m", "starters.demo", "--scenario", "scale-down", "--headless"]
    argv += ["--workdir", str(workdir), "--temporal-port", "0", "--ui-port", "0"]
    subprocess.run(argv, check=True, timeout=600)


async def pick(client: Client, workflow_type: str) -> WorkflowExecution:
    """The richest run of this type that stays under MAX_EVENTS (closed runs first)."""
    runs = [e async for e in client.list_workflows(f'WorkflowType="{workflow_type}"')]
    if not runs:
        raise SystemExit(f"no {workflow_type} run in the database: did the demo get that far?")
    fitting = [r for r in runs if (r.history_length or 0) <= MAX_EVENTS] or runs
    return max(fitting, key=lambda r: (r.close_time is not None, r.history_length or 0))


async def save_node_histories(db: Path) -> None:
    async with await WorkflowEnvironment.start_local(
        dev_server_existing_path=str(BIN / "temporal"),
        data_converter=pydantic_data_converter,
        dev_server_extra_args=["--db-filename", str(db)],
        dev_server_log_level="error",
    ) as env:
        for workflow_type in RECORDED_TYPES:
            run = await pick(env.client, workflow_type)
            history = await env.client.get_workflow_handle(run.id, run_id=run.run_id).fetch_history()
            path = node_history_file(workflow_type)
            path.write_text(json.dumps(history.to_json_dict(), separators=(",", ":")))  # compact: a loop run is long
            print(f"{path.name}: {run.id} ({len(history.events)} events)")


async def save_fallback_history() -> None:
    async with await WorkflowEnvironment.start_time_skipping(
        port=free_port(),
        test_server_existing_path=str(BIN / "temporal-test-server"),
        data_converter=pydantic_data_converter,
    ) as env:
        await record_fallback(env)
        await record_batch(env)


async def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--from-db", type=Path, help="a demo's temporal.db to take the node histories from")
    args = p.parse_args()
    if args.from_db:
        await save_node_histories(args.from_db)
    else:
        with tempfile.TemporaryDirectory(prefix="growth-record-") as tmp:
            run_demo(Path(tmp))
            await save_node_histories(Path(tmp) / "temporal.db")
    await save_fallback_history()


if __name__ == "__main__":
    run(main())
