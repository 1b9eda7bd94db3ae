"""`growth components … approvals | approve | deny` against the dev server (search attributes
registered), with the scripted TiDB world: a hot TiKV subset wants a heterogeneous group, which
waits for approval."""

from __future__ import annotations

import asyncio
import json
import subprocess
import uuid

import pytest
from temporalio.testing import WorkflowEnvironment

from activities.settings import Settings, TemporalSettings
from starters.cli import REFUSED, CliError, invoke
from tests.cli import growth
from tests.polling import until
from tests.workflows.components.stubs import ComponentsWorld
from tests.workflows.components.test_autoscaler import tikv_spec
from tests.workflows.workers import new_worker
from workflows.components.autoscaler import workflow_id


async def test_cli_lists_approves_and_refuses(search_env: WorkflowEnvironment) -> None:
    client = search_env.client
    name = f"tas-{uuid.uuid4().hex[:6]}"
    world = ComponentsWorld(spec=tikv_spec(), name=name, load={"tikv": 3.0}, hot={"tikv": (1, 0.95)})
    tq = f"components-appr-{uuid.uuid4().hex[:6]}"
    settings = Settings(temporal=TemporalSettings(task_queue=tq))

    async def cli(*argv: str) -> str:
        return await invoke(client, settings, ["components", "-n", "ns", name, *argv])

    async with new_worker(client, tq, activities=world.activities()):
        try:
            await cli("start", "--scan-interval", "1", "--approve-group-create", "--use-search-attributes")
            deadline = asyncio.get_running_loop().time() + 60
            while not (waits := json.loads(await cli("approvals", "-o", "json"))["approvals"]):
                assert asyncio.get_running_loop().time() < deadline, "no group awaits approval"
                await asyncio.sleep(0.25)
            [wait] = waits
            group = wait["id"]
            assert group.startswith("auto-") and wait["what"] == f"tikv group {group}" and wait["default"] == "deny"
            assert world.autos == {} and "deny at" in await cli("approvals")
            with pytest.raises(CliError, match="no heterogeneous group 'auto-nope' awaits approval") as info:
                await cli("deny", "auto-nope")
            assert info.value.code == REFUSED
            # As an operator runs it: the `growth` command in its own process.
            server = ["--address", client.service_client.config.target_host, "--task-queue", tq]
            out = (await growth(*server, "components", "-n", "ns", name, "approve", group, "--note", "ok")).stdout
            assert f"{group}: approved" in out
            await until(lambda: group in world.autos)

            # Created: its approval is used up, so a late decision is refused (exit code 2). The stub
            # makes the group a moment before the loop records it: until then a deny is refused as
            # "already approved".
            async def late_deny() -> subprocess.CompletedProcess[str] | None:
                r = await growth(*server, "components", "-n", "ns", name, "deny", group, expect=2)
                return r if "awaits approval" in r.stderr else None

            refused = await until(late_deny, what="the loop to record the group and use its approval up")
            assert f"no heterogeneous group '{group}' awaits approval" in refused.stderr
            assert await cli("approvals") == "nothing awaits approval"
        finally:
            await client.get_workflow_handle(workflow_id("ns", name)).terminate()
