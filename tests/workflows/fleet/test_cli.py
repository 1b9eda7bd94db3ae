"""`growth fleet` against the dev server: start a region loop, list clusters with phase and
capacity, create/delete instances, approve/block, pause/resume; refusals name the field."""

from __future__ import annotations

import asyncio
import uuid
from contextlib import suppress
from pathlib import Path

import pytest
import yaml
from temporalio.service import RPCError
from temporalio.testing import WorkflowEnvironment

from activities.settings import Settings, TemporalSettings
from scaling.fleet import contracts
from scaling.fleet.region import RegionStatus
from starters.cli import REFUSED, Call, CliError, invoke, parse
from tests.cli import growth
from tests.workflows.fleet.stubs import FleetWorld
from tests.workflows.fleet.test_autoscaler import CONFIG, _terminate_all, run_input
from tests.workflows.workers import new_worker
from workflows.fleet.autoscaler import FleetAutoscalerWorkflow

REGION_FLAGS = ["--provider", "aws", "--region", "us-east-1"]


async def test_bad_fleet_config_is_refused_naming_the_field(tmp_path) -> None:
    bad = tmp_path / "fleet.yaml"
    bad.write_text(CONFIG.replace("capacity_consumed: 2", "capacity_consumed: 0"))
    with pytest.raises(CliError) as info:  # refused before any call: no client
        await invoke(None, Settings(), ["fleet", *REGION_FLAGS, "start", "--fleet-config", str(bad)])  # type: ignore[arg-type]
    assert info.value.code == REFUSED and "supported_instance_types[0].sizes[1].capacity_consumed" in str(info.value)
    good = tmp_path / "good.yaml"
    good.write_text(CONFIG)
    argv = ["fleet", "--provider", "gcp", "--region", "us-east-1", "start", "--fleet-config", str(good)]
    with pytest.raises(CliError, match="no gcp/us-east-1"):
        await invoke(None, Settings(), argv)  # type: ignore[arg-type]


def test_the_scan_interval_flag_keeps_its_old_name(tmp_path) -> None:
    cfg = tmp_path / "fleet.yaml"
    cfg.write_text(CONFIG)
    for flag, seconds in (("--scan-interval", "7"), ("--interval", "9")):
        call, _ = parse(["fleet", *REGION_FLAGS, "start", "--fleet-config", str(cfg), flag, seconds])
        assert isinstance(call, Call) and call.check is not None
        assert call.check(Settings()).settings.scan_interval_s == float(seconds)


async def test_fleet_config_may_be_a_kas_fleet_manager_config_directory() -> None:
    upstream = Path(__file__).parents[2] / "scaling" / "fleet" / "upstream"
    argv = ["fleet", "--provider", "gcp", "--region", "us-east1", "start", "--fleet-config", str(upstream)]
    # loaded (its provider file lists aws only), refused before any call
    with pytest.raises(CliError, match="no gcp/us-east1"):
        await invoke(None, Settings(), argv)  # type: ignore[arg-type]


async def test_cli_drives_a_region(dev_env: WorkflowEnvironment, tmp_path) -> None:
    client = dev_env.client
    tq = f"fleet-cli-{uuid.uuid4().hex[:6]}"
    region = f"cli-{uuid.uuid4().hex[:6]}"
    cfg = tmp_path / "fleet.yaml"
    cfg.write_text(CONFIG.replace("us-east-1", region))
    settings = Settings(temporal=TemporalSettings(task_queue=tq))
    flags = ["--provider", "aws", "--region", region]

    async def cli(*argv: str) -> str:
        return await invoke(client, settings, ["fleet", *flags, *argv])

    world = FleetWorld()
    async with new_worker(client, tq, activities=world.activities()):
        out = await cli("start", "--fleet-config", str(cfg), "--interval", "1", "--cluster-timeouts", '{"poll_s": 1}')
        assert out.startswith(f"started FleetAutoscaler fleet/aws/{region}")
        assert "already running" in await cli("start", "--fleet-config", str(cfg))

        deadline = asyncio.get_running_loop().time() + 60
        while "cluster_provisioning" not in (status := await cli("status")) and "waiting_for" not in status:
            assert asyncio.get_running_loop().time() < deadline, status
            await asyncio.sleep(0.5)
        assert "standard" in status and "USED/MAX UNITS" in status and "scale-up" in status

        assert "waiting for a ready cluster" in await cli("create-instance", "k1", "--type", "standard", "--size", "x2")
        with pytest.raises(CliError, match="refused: size") as info:
            await cli("create-instance", "k2", "--type", "standard", "--size", "x7")
        assert info.value.code == REFUSED
        assert await cli("delete-instance", "k1") == "instance k1 deleted"
        with pytest.raises(CliError):
            await cli("delete-instance", "k1")

        cluster_id = [line.split()[0] for line in status.splitlines() if line.startswith(f"  {region}-standard")][0]
        assert await cli("block-deletion", cluster_id) == f"deletion of {cluster_id} blocked"
        assert f"{cluster_id}" in (s := await cli("status")) and "blocked" in s
        assert await cli("approve-deletion", cluster_id) == f"deletion of {cluster_id} approved"
        with pytest.raises(CliError, match="refused") as info:
            await cli("approve-deletion", "nope")
        assert info.value.code == REFUSED
        assert "pause sent" in await cli("pause")
        deadline = asyncio.get_running_loop().time() + 30
        while "PAUSED" not in (s := await cli("status")):
            assert asyncio.get_running_loop().time() < deadline, s
            await asyncio.sleep(0.5)
        assert "resume sent" in await cli("resume")
        assert '"provider": "aws"' in await cli("status", "-o", "json")
        # The same as an operator runs it: the `growth` command in its own process.
        server = ["--address", client.service_client.config.target_host]
        as_yaml = yaml.safe_load((await growth(*server, "fleet", *flags, "status", "-o", "yaml")).stdout)
        assert as_yaml["region"] == region and as_yaml["clusters"][0]["id"] == cluster_id
        refused = await growth(*server, "fleet", *flags, "approve-deletion", "nope", expect=2)
        assert "refused: cluster_id: no cluster 'nope'" in refused.stderr
        missing = await growth(*server, "fleet", "--region", "nowhere", "status", expect=1)
        assert "no running FleetAutoscaler fleet/aws/nowhere" in missing.stderr
        assert "provider: aws" in await cli("-o", "yaml", "status")

        # Registering existing clusters from kas-fleet-manager's cluster list (other regions'
        # entries are left out); a bad entry is refused naming its field, before connecting.
        listed = tmp_path / "dataplane-cluster-configuration.yaml"
        entries = [
            {"cluster_id": "mine", "cloud_provider": "aws", "region": region, "schedulable": True},
            {"cluster_id": "theirs", "cloud_provider": "aws", "region": "eu-west-1"},
        ]
        listed.write_text(yaml.safe_dump({"clusters": entries}))
        assert await cli("register-clusters", str(listed)) == f"registered 1 cluster(s) in aws/{region}: mine"
        assert "registered" in [line for line in (await cli("status")).splitlines() if "mine" in line][0]
        listed.write_text(yaml.safe_dump({"clusters": [{"cluster_id": "", "region": region}]}))
        with pytest.raises(CliError, match=r"clusters\[0\]\.cluster_id") as info:
            await cli("register-clusters", str(listed))
        assert info.value.code == REFUSED
        with suppress(RPCError):
            await client.get_workflow_handle(contracts.cluster_workflow_id("mine")).terminate()

        with suppress(RPCError):
            await client.get_workflow_handle(contracts.cluster_workflow_id(cluster_id)).terminate()
        await client.get_workflow_handle(contracts.autoscaler_workflow_id("aws", region)).terminate()

        # A configuration that lists clusters: `start` registers the region's ones after starting
        # it (register_clusters), so the loop's input carries no cluster list.
        other = f"{region}-listed"
        doc = yaml.safe_load(CONFIG.replace("us-east-1", other))
        doc["clusters"] = [
            {
                "cluster_id": f"{other}-a",
                "cloud_provider": "aws",
                "region": other,
                "supported_instance_type": "standard",
            },
            {
                "cluster_id": f"{other}-b",
                "cloud_provider": "aws",
                "region": "eu-west-1",
                "supported_instance_type": "standard",
            },
        ]
        cfg.write_text(yaml.safe_dump(doc))
        start = ["fleet", "--provider", "aws", "--region", other, "start", "--fleet-config", str(cfg)]
        assert (await invoke(client, settings, start)).endswith("; 1 listed cluster(s) registered")
        handle = client.get_workflow_handle(contracts.autoscaler_workflow_id("aws", other))
        assert (await run_input(client, handle)).config.clusters == []
        st: RegionStatus = await handle.query(FleetAutoscalerWorkflow.status)
        registered = [c.id for c in st.clusters if c.manual]
        assert registered == [f"{other}-a"]  # not the other region's
        await _terminate_all(client, handle)
