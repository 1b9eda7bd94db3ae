"""`growth fleet approvals | approve | deny` against the dev server (growth's search attributes
registered): a region loop whose new clusters wait for approval before they are created."""

from __future__ import annotations

import asyncio
import json
import uuid
from contextlib import suppress

import pytest
from temporalio.service import RPCError
from temporalio.testing import WorkflowEnvironment

from activities.settings import Settings, TemporalSettings
from scaling.fleet import contracts
from starters.cli import REFUSED, CliError, invoke
from tests.cli import growth
from tests.workflows.fleet.stubs import FleetWorld
from tests.workflows.fleet.test_autoscaler import CONFIG
from tests.workflows.workers import new_worker


async def test_cli_approves_and_denies_cluster_creation(search_env: WorkflowEnvironment, tmp_path) -> None:
    client = search_env.client
    tq = f"fleet-approvals-{uuid.uuid4().hex[:6]}"
    region = f"appr-{uuid.uuid4().hex[:6]}"
    cfg = tmp_path / "fleet.yaml"
    cfg.write_text(CONFIG.replace("us-east-1", region))
    settings = Settings(temporal=TemporalSettings(task_queue=tq, address=client.service_client.config.target_host))
    flags = ["--provider", "aws", "--region", region]

    async def cli(*argv: str) -> str:
        return await invoke(client, settings, ["fleet", *flags, *argv])

    async def awaiting(exclude: set[str]) -> dict:
        deadline = asyncio.get_running_loop().time() + 60
        while True:
            found = [a for a in json.loads(await cli("approvals", "-o", "json"))["approvals"] if a["id"] not in exclude]
            if found:
                return found[0]
            assert asyncio.get_running_loop().time() < deadline, "no cluster awaiting approval"
            await asyncio.sleep(0.25)

    world = FleetWorld()
    clusters: list[str] = []
    async with new_worker(client, tq, activities=world.activities()):
        try:
            await cli(
                "start", "--fleet-config", str(cfg), "--interval", "1", "--cluster-timeouts", '{"poll_s": 1}',
                "--approve-cluster-create", "--approval-timeout", "3600", "--failure-backoff", "0",
                "--use-search-attributes",
            )  # fmt: skip
            first = await awaiting(set())
            clusters.append(first["id"])
            assert first["what"].endswith(": create") and first["default"] == "deny"
            assert world.clusters == {}  # nothing at OCM while it waits
            assert first["id"] in await cli("approvals") and "deny at" in await cli("approvals")

            # Deny it: the cluster ends failed, and (failure backoff 0) the loop asks for a new one.
            assert await cli("deny", first["id"], "--note", "not yet") == f"fleet/cluster/{first['id']}: denied"
            # Refused either way: already denied while the workflow winds up, then no longer running.
            with pytest.raises(CliError, match="already denied|not a running workflow awaiting approval") as info:
                await cli("approve", first["id"])
            assert info.value.code == REFUSED
            with pytest.raises(CliError, match="not a running workflow awaiting approval") as info:
                await cli("approve", "no-such-cluster")
            assert info.value.code == REFUSED
            second = await awaiting({first["id"]})
            clusters.append(second["id"])
            assert world.clusters == {}

            # As an operator runs it: the `growth` command in its own process.
            server = ["--address", client.service_client.config.target_host]
            out = (await growth(*server, "fleet", *flags, "approve", second["id"])).stdout
            assert f"fleet/cluster/{second['id']}: approved" in out
            deadline = asyncio.get_running_loop().time() + 60
            while not world.clusters:
                assert asyncio.get_running_loop().time() < deadline, "the approved cluster was never created"
                await asyncio.sleep(0.25)
            status = json.loads(await cli("status", "-o", "json"))
            phases = {c["id"]: c["phase"] for c in status["clusters"]}
            assert first["id"] not in phases and phases[second["id"]] != "failed"
            assert any(f"{first['id']} failed: create denied by operator: not yet" in e for e in status["events"])
        finally:
            for cid in clusters:
                with suppress(RPCError):
                    await client.get_workflow_handle(contracts.cluster_workflow_id(cid)).terminate()
            with suppress(RPCError):
                await client.get_workflow_handle(contracts.autoscaler_workflow_id("aws", region)).terminate()
