"""ComponentAutoscaler replays a history recorded on the time-skipping server with the scripted
TiDB world, and those recorded before a patch (histories/before/<patch id>/:
`tidb-operator-parity`, `change-time-after-write`, `local-round-reads`; replayed along the patch's old branch by
tests/workflows/nodes/test_replay.py too). Re-record the current one after an intended change:

    .venv/bin/python -m tests.workflows.components.test_replay

The scenario differs between the branches: TiKV's cpu rule has no min_threshold (refused before
the patch, defaulted to 0.1 after) and TiDB asks an external recommender for 9 with maxReplicas
4 (2 external replicas before, 4 after)."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment

from scaling.components import contracts
from tests.conftest import SERVER_STARTUP
from tests.workflows.components.stubs import ComponentsWorld
from tests.workflows.components.test_autoscaler import autoscaler, rounds_past
from tests.workflows.nodes.test_replay import load_file, patches_in, replay_failure
from tests.workflows.record_history import HISTORIES
from workflows.components.autoscaler import CHANGE_TIME_AFTER_WRITE, LOCAL_ROUND_READS, TIDB_OPERATOR_PARITY

NAME = "components_ComponentAutoscaler.json"
CURRENT = HISTORIES / NAME
BEFORE = HISTORIES / "before" / TIDB_OPERATOR_PARITY / NAME
BEFORE_CHANGE_TIME = HISTORIES / "before" / CHANGE_TIME_AFTER_WRITE / NAME
BEFORE_LOCAL_READS = HISTORIES / "before" / LOCAL_ROUND_READS / NAME
SPEC = {
    "cluster": {"name": "db"},
    "tikv": {"resources": {"big": {"cpu": "4", "memory": "8Gi", "count": 2}}, "rules": {"cpu": {"max_threshold": 0.8}}},
    "tidb": {"external": {"endpoint": {"host": "rec", "port": 8080, "path": "/"}, "maxReplicas": 4}},
}


async def record(env: WorkflowEnvironment, path: Path) -> None:
    world = ComponentsWorld(spec=SPEC, load={"tikv": 5.4}, recommended=9)
    async with autoscaler(env, world) as handle:
        await rounds_past(env, handle, 3)
        history = await handle.fetch_history()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(history.to_json_dict(), separators=(",", ":")))


def scheduled(path: Path) -> list[str]:
    return [
        e["activityTaskScheduledEventAttributes"]["activityType"]["name"]
        for e in json.loads(path.read_text())["events"]
        if "activityTaskScheduledEventAttributes" in e
    ]


async def test_current_history_replays_and_went_through_the_patch() -> None:
    assert TIDB_OPERATOR_PARITY in patches_in(json.loads(CURRENT.read_text())["events"])
    history = load_file(CURRENT)
    assert len(history.events) > 10
    assert await replay_failure(history) is None


async def test_history_from_before_the_patch_replays_the_old_decisions() -> None:
    assert TIDB_OPERATOR_PARITY not in patches_in(json.loads(BEFORE.read_text())["events"])
    assert await replay_failure(load_file(BEFORE)) is None
    # The branches differ in commands: before, TiKV's spec was refused (no patch of the base).
    assert scheduled(BEFORE).count(contracts.PATCH_REPLICAS) < scheduled(CURRENT).count(contracts.PATCH_REPLICAS)


async def test_history_from_before_the_change_time_patch_replays() -> None:
    """Recorded when a change was stamped with its round's start: it replays along that branch."""
    assert CHANGE_TIME_AFTER_WRITE not in patches_in(json.loads(BEFORE_CHANGE_TIME.read_text())["events"])
    assert CHANGE_TIME_AFTER_WRITE in patches_in(json.loads(CURRENT.read_text())["events"])
    assert await replay_failure(load_file(BEFORE_CHANGE_TIME)) is None


def workflow_tasks(path: Path) -> int:
    return sum(1 for e in json.loads(path.read_text())["events"] if "workflowTaskCompletedEventAttributes" in e)


async def test_history_from_before_local_reads_replays_its_activity_reads() -> None:
    """Before: every read an activity of its own; now the reads are local (markers in the round's
    workflow task) and the writes stay activities."""
    assert LOCAL_ROUND_READS in patches_in(json.loads(CURRENT.read_text())["events"])
    assert await replay_failure(load_file(BEFORE_LOCAL_READS)) is None
    before, now = scheduled(BEFORE_LOCAL_READS), scheduled(CURRENT)
    assert contracts.GET_AUTOSCALER in before and contracts.QUERY_METRICS in before
    assert not {
        contracts.GET_AUTOSCALER,
        contracts.GET_TIDB_CLUSTER,
        contracts.LIST_AUTO_CLUSTERS,
        contracts.QUERY_METRICS,
    } & set(now)
    assert contracts.PATCH_REPLICAS in now and contracts.EMIT_AUTOSCALER_EVENT in now
    # The same three rounds: 40 workflow tasks before, 12 now (recorded with the scripted world).
    assert workflow_tasks(CURRENT) * 2 < workflow_tasks(BEFORE_LOCAL_READS)


async def _main(path: Path) -> None:
    async with await WorkflowEnvironment.start_time_skipping(
        test_server_startup_timeout=SERVER_STARTUP,
        test_server_existing_path=str(Path(sys.executable).parent / "temporal-test-server"),
        data_converter=pydantic_data_converter,
    ) as env:
        await record(env, path)
    print(f"{path}: recorded")


if __name__ == "__main__":
    asyncio.run(_main(Path(sys.argv[1]) if len(sys.argv) > 1 else CURRENT))
