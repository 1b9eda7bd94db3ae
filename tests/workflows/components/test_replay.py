"""Every kept ComponentAutoscaler history replays on the current code (tests/workflows/histories/
<release>/components_*.json): runs started by the previous release (0.2.0), whose groups'
bookkeeping and plans are recorded local activities. Recorded on the
time-skipping server with the scripted TiDB world (TiKV's cpu rule without min_threshold, TiDB on
an external recommender asking for 9 with maxReplicas 4). Record again after an intended change
(release policy: docs/development.md):

    .venv/bin/python -m tests.workflows.components.test_replay [OUT.json]"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment

from scaling.components import contracts
from scaling.components.trail import component_trail
from starters.history import history_from_file
from starters.processes import free_port
from tests.conftest import SERVER_STARTUP
from tests.workflows.components.stubs import ComponentsWorld
from tests.workflows.components.test_autoscaler import autoscaler, rounds_past
from tests.workflows.release_histories import HISTORIES, kept, local_activities, patches, replays, scheduled
from workflows.components.activity_options import LOCAL_REPORTS
from workflows.components.autoscaler import DECISIONS_RECORDED, LOCAL_REPORTS_PATCH

NAME = "components_ComponentAutoscaler.json"
CURRENT = HISTORIES / "0.2.0" / NAME
# A release's runs, and runs recorded by the code before a patch, replaying its old branch
# (components_ComponentAutoscaler_wake_forgotten.json: patch wake-kept-during-round).
KEPT = [*kept("components_*.json"), *sorted(HISTORIES.glob("components_*.json"))]
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


@pytest.mark.parametrize("path", KEPT, ids=lambda p: str(p.relative_to(HISTORIES)))
async def test_kept_history_replays(path: Path) -> None:
    await replays(path)


def test_0_2_0_recorded_its_decisions() -> None:
    assert DECISIONS_RECORDED in patches(CURRENT)
    assert set(local_activities(CURRENT)) >= contracts.DECISION_NAMES
    assert contracts.PATCH_REPLICAS in scheduled(CURRENT)  # its writes: activities, as before


async def test_a_round_reports_in_the_workflow_task_that_made_its_change(
    env: WorkflowEnvironment, tmp_path: Path
) -> None:
    """Patch round-reports-local: the Events and the status write are local activities (markers),
    the replica changes stay activities; 0.2.0's runs (above) wrote every report as an activity."""
    path = tmp_path / NAME
    await record(env, path)
    assert LOCAL_REPORTS_PATCH in patches(path) and LOCAL_REPORTS_PATCH not in patches(CURRENT)
    assert set(LOCAL_REPORTS) <= set(local_activities(path))
    assert not set(LOCAL_REPORTS) & set(scheduled(path))
    assert contracts.PATCH_REPLICAS in scheduled(path)
    assert set(LOCAL_REPORTS) <= set(scheduled(CURRENT))
    await replays(path)
    # The trail still gives each change with the reason its Event said (from the markers' answers).
    trail = component_trail(history_from_file(str(path)))
    scaled = [e.detail for e in trail.entries if e.what == "ScaledOut"]
    assert any("tikv" in d and "cpu average over max" in d for d in scaled), trail.entries


async def _main(path: Path) -> None:
    async with await WorkflowEnvironment.start_time_skipping(
        port=free_port(),
        test_server_startup_timeout=SERVER_STARTUP,
        test_server_existing_path=str(Path(sys.executable).parent / "temporal-test-server"),
        data_converter=pydantic_data_converter,
    ) as env:
        await record(env, path)
    print(f"{path}: recorded")


if __name__ == "__main__":
    asyncio.run(_main(Path(sys.argv[1]) if len(sys.argv) > 1 else CURRENT))
