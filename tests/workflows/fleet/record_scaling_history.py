"""Record a FleetAutoscaler history that scales (for the replay and what-if tests):

    .venv/bin/python -m tests.workflows.fleet.record_scaling_history [OUT.json]

An empty region on the dev server with the stub OCM world: it starts a cluster at once (nothing can
hold the biggest size), 6 instances of 2 units arrive and wait, the first cluster fills and a second one is
started, every instance is deleted, and one empty cluster is marked, re-checked and deleted. Its
history holds each kind of decision the region makes: placements, scale-ups and a scale-down.
"""

from __future__ import annotations

import sys
from pathlib import Path

from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment

from activities.updates import execute_update
from bench.runtime import run
from tests.workflows.fleet.stubs import FleetWorld
from tests.workflows.fleet.test_autoscaler import create, eventually, region, settings
from tests.workflows.release_histories import HISTORIES, save
from workflows.fleet.autoscaler import FleetAutoscalerWorkflow

TEMPORAL = Path(sys.executable).parent / "temporal"
INSTANCES = 6  # of 2 units: a cluster holds 10, so the sixth needs a second cluster
SHARDS = 2  # the index shards are started first: 64 of them would be most of the history


async def record(out: Path) -> None:
    async with await WorkflowEnvironment.start_local(
        dev_server_existing_path=str(TEMPORAL), data_converter=pydantic_data_converter, dev_server_log_level="error"
    ) as env:
        world = FleetWorld(hold_addons=True)
        async with region(env, world, settings(iterations_per_run=10_000, index_shards=SHARDS)) as handle:
            await eventually(handle, lambda st: st.clusters_created == 1)
            for i in range(INSTANCES):
                await create(handle, f"kafka-{i}", size="x2")
            world.hold_addons = False
            await eventually(handle, lambda st: st.instances_placed == INSTANCES and st.instances_waiting == 0)
            for i in range(INSTANCES):
                await execute_update(handle, FleetAutoscalerWorkflow.delete_instance, f"kafka-{i}")
            await eventually(handle, lambda st: st.clusters_deleted == 1 and len(st.clusters) == 1)
            history = await handle.fetch_history()
    save(history, out, max_bytes=300_000)  # whole if it fits: its scale-down comes last
    print(f"{out}: {len(history.events)} events, {len(history.to_json())} bytes, {out.stat().st_size} kept")


if __name__ == "__main__":
    run(record(Path(sys.argv[1]) if len(sys.argv) > 1 else HISTORIES / "0.2.0" / "fleet_FleetAutoscaler_scaling.json"))
