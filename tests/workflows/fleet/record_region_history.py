"""Record a FleetAutoscaler history for the replay test (after an intended workflow change):

.venv/bin/python -m tests.workflows.fleet.record_region_history [OUT.json]

Three clusters registered as `growth fleet start` registers them (`register_clusters`) whose
agents report Ready; instances of two types are created, one is deleted, so the history holds child
starts, cluster reports and the region's outbox sends; the run ends in continue-as-new (its registry
carried as columns, patch compact-registry). Also the history of the index shard that holds s2
(claimed, placed, removed).
"""

from __future__ import annotations

import asyncio
import sys
import uuid
from pathlib import Path

from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment

from activities.updates import execute_update
from bench.runtime import run
from scaling.fleet.config import load_fleet_config_text
from scaling.fleet.index import shard_of, shard_workflow_id
from scaling.fleet.region import FleetAutoscalerInput, RegionStatus
from starters.fleet import register_listed
from tests.workflows.fleet.stubs import FleetWorld, stop_agents
from tests.workflows.fleet.test_autoscaler import settings
from tests.workflows.fleet.test_registered_clusters import CONFIG, agents, create
from tests.workflows.release_histories import HISTORIES, save
from tests.workflows.workers import new_worker
from workflows.fleet.autoscaler import FleetAutoscalerWorkflow

REGION_HISTORY = HISTORIES / "0.2.0" / "fleet_FleetAutoscaler_registered.json"
# The index shard that holds s1 and s2 (claimed, placed, s2 removed), from the same run: beside it.
INDEX_HISTORY = "fleet_InstanceIndex.json"
TEMPORAL = Path(sys.executable).parent / "temporal"
SHARDS = 2  # the index shards are started first: 64 of them would be most of the history
RUN_ROUNDS = 30  # the first run's rounds: the scenario takes about 20 (each message wakes the loop)


async def record(out: Path) -> None:
    async with await WorkflowEnvironment.start_local(
        dev_server_existing_path=str(TEMPORAL), data_converter=pydantic_data_converter, dev_server_log_level="error"
    ) as env:
        tq = f"fleet-{uuid.uuid4().hex[:6]}"
        async with new_worker(env.client, tq, activities=FleetWorld().activities()):
            config = load_fleet_config_text(CONFIG)
            handle = await env.client.start_workflow(
                FleetAutoscalerWorkflow.run,
                FleetAutoscalerInput(
                    settings=settings(iterations_per_run=RUN_ROUNDS, index_shards=SHARDS),
                    config=config.without_clusters(),
                ),
                id=f"fleet/aws/recorded-{uuid.uuid4().hex[:6]}",
                task_queue=tq,
            )
            await register_listed(handle, config.manual_clusters("aws", "us-east-1"))
            agent = asyncio.create_task(agents(env.client, handle))
            while True:
                st: RegionStatus = await handle.query(FleetAutoscalerWorkflow.status)
                if [c.phase.value for c in st.clusters] == ["ready"] * 3:
                    break
                await asyncio.sleep(0.3)
            await create(handle, "s1", "standard")
            await create(handle, "s2", "standard")
            await create(handle, "d1", "developer")
            await execute_update(handle, FleetAutoscalerWorkflow.delete_instance, "s2")
            while (await handle.query(FleetAutoscalerWorkflow.status)).runs < 1:
                await asyncio.sleep(0.3)  # the first run's rounds are done: it continued as new
            await stop_agents(agent)
            history = await env.client.get_workflow_handle(handle.id, run_id=handle.result_run_id).fetch_history()
            shard = env.client.get_workflow_handle(shard_workflow_id(handle.id, shard_of("s2", SHARDS)))
            shard_history = await shard.fetch_history()
            await shard.terminate()
            await handle.terminate()
            for cid in ("both", "std", "ent"):
                await env.client.get_workflow_handle(f"fleet/cluster/{cid}").terminate()
    save(history, out, max_bytes=250_000)  # whole: its continue-as-new carries the registry's columns
    save(shard_history, out.with_name(INDEX_HISTORY))


if __name__ == "__main__":
    run(record(Path(sys.argv[1]) if len(sys.argv) > 1 else REGION_HISTORY))
