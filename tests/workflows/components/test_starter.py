"""`growth components` against a ComponentAutoscaler on the dev server (stub world). Not the
time-skipping server: each pin or block cuts the loop's scan timer short, and under load
temporal-test-server refused such a workflow task ("invalid history builder state for action")
and never sent it again (docs/development.md, testing tiers): the test hung for pytest's 300 s."""

from __future__ import annotations

import json
import uuid

import pytest
from temporalio.testing import WorkflowEnvironment

from activities.settings import Settings, TemporalSettings
from starters.cli import REFUSED, CliError, invoke
from tests.cli import growth
from tests.polling import until
from tests.workflows.components.stubs import ComponentsWorld
from tests.workflows.workers import new_worker


async def test_start_status_pin_block_pause(dev_env: WorkflowEnvironment) -> None:
    env = dev_env
    name = f"tas-{uuid.uuid4().hex[:6]}"
    world = ComponentsWorld(
        spec={"cluster": {"name": "db"}, "tikv": {"rules": {"cpu": {"max_threshold": 0.8, "min_threshold": 0.2}}}},
        name=name,
        load={"tikv": 1.0},
    )
    tq = f"components-{uuid.uuid4().hex[:6]}"
    settings = Settings(temporal=TemporalSettings(task_queue=tq))

    async def cli(*argv: str) -> str:
        return await invoke(env.client, settings, ["components", "-n", "ns", name, *argv])

    async with new_worker(env.client, tq, activities=world.activities()):
        out = await cli("start", "--scan-interval", "30")
        assert out.startswith(f"started ComponentAutoscaler components/ns/{name}")
        assert "already running" in await cli("start")
        await until(lambda: bool(world.statuses))
        text = await cli("status")
        assert f"components/ns/{name} (growth planner) for TidbCluster db: running" in text
        assert "tikv: homogeneous 3" in text
        assert await cli("pin", "--component", "tikv", "4") == "pins now: {'tikv/db': 4}"
        await until(lambda: world.replicas["tikv"] == 4)
        with pytest.raises(CliError, match="refused: .*not a tikv group") as refused:
            await cli("pin", "--component", "tikv", "--cluster", "auto-nope", "1")
        assert refused.value.code == REFUSED
        assert await cli("block-scale-in", "--component", "tikv") == "scale-in blocked for: tikv"
        assert await cli("pause") == f"components/ns/{name} paused"
        assert "PAUSED" in await cli("status")
        assert '"paused": true' in await cli("status", "-o", "json")
        # -o at any level before the loop's NAME argument, or on the command
        assert "paused: true" in await invoke(
            env.client, settings, ["-o", "yaml", "components", "-n", "ns", name, "status"]
        )
        # The same as an operator runs it: the `growth` command in its own process.
        server = ["--address", env.client.service_client.config.target_host]
        out = await growth(*server, "components", "-n", "ns", name, "status", "-o", "json")
        assert json.loads(out.stdout)["paused"] is True
        refused_pin = await growth(
            *server, "components", "-n", "ns", name, "pin", "--component", "tidb", "--cluster", "auto-x", "1", expect=2
        )
        assert "not a tidb group" in refused_pin.stderr
        with pytest.raises(CliError, match="--scan-interval") as refused:
            await cli("start", "--scan-interval", "0")
        assert refused.value.code == REFUSED
        with pytest.raises(CliError, match=f"no running ComponentAutoscaler components/ns/{name}-gone") as missing:
            await invoke(env.client, settings, ["components", "-n", "ns", f"{name}-gone", "status"])
        assert missing.value.code == 1
        await env.client.get_workflow_handle(f"components/ns/{name}").terminate()
