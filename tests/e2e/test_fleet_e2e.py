"""Fleet loop end to end: `make demo SCENARIO=fleet HEADLESS=1` in small — Temporal dev server,
the fake OCM, the real worker process (fleet activities + agent API) and the fake agents. The
demo runs once per module: one test checks its summary and scans it for secrets, the other reads
its recorded histories back with `growth fleet trail` and `what-if`."""

from __future__ import annotations

import asyncio
import json
import subprocess
from pathlib import Path

import pytest
from temporalio.client import Client

from starters import monitoring, prometheus
from tests.cli import growth
from tests.e2e.demo import demo_database, run_headless_demo
from tests.e2e.leaks import scan_demo

LIFECYCLE_TO_READY = [
    "cluster_accepted",
    "cluster_provisioning",
    "cluster_provisioned",
    "waiting_for_kas_fleetshard_operator",
    "ready",
]


@pytest.fixture(scope="module")
def fleet_demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess[str]]:
    workdir = tmp_path_factory.mktemp("fleet") / "demo"
    return workdir, run_headless_demo(workdir, "--scenario", "fleet", "--instances", "30")


def test_demo_fleet_headless(fleet_demo: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    workdir, proc = fleet_demo
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    real = prometheus.binary() is not None
    assert list(summary) == [
        "scenario", "instances", "instances_placed", "clusters_created", "clusters_deleted", "clusters_final",
        "flaps", "phases_seen", "ocm_clusters_leaked", "seconds_to_all_placed", *(["monitoring"] if real else []),
    ]  # fmt: skip
    if real:  # a real Prometheus scraped the worker: every fleet and worker panel and alert returned a series
        check = summary["monitoring"]
        assert check["empty"] == [] and check["checked"] == len(monitoring.of({"fleet", "worker"})), check
        assert check["rules_unhealthy"] == [], check
    assert summary["scenario"] == "fleet"
    assert summary["instances_placed"] == summary["instances"] == 30
    # 30 one-unit instances + a reserved one per cluster do not fit one 18-unit cluster.
    assert summary["clusters_created"] >= 2
    # The burst went away: one empty cluster keeps room for the biggest size (slack 0), every
    # other one was deprovisioned, and none came back.
    assert summary["clusters_deleted"] >= 1 and summary["clusters_final"] == 1
    assert summary["clusters_final"] + summary["clusters_deleted"] == summary["clusters_created"]
    assert summary["flaps"] == 0 and summary["ocm_clusters_leaked"] == 0
    assert summary["phases_seen"] == [*LIFECYCLE_TO_READY, "deprovisioning", "cleanup", "deleted"]
    assert 0 < summary["seconds_to_all_placed"] < 150
    # Secrets never in history (issue 20): OCM token, IdP secret, agent-token secret, every agent token.
    scan = asyncio.run(scan_demo(workdir))
    assert {"growth-fleet.yaml:token_file", "growth-fleet.yaml:token_secret_file"} <= set(scan.secrets)
    assert sum(name.startswith("agent token of ") for name in scan.secrets) == summary["clusters_created"]
    assert scan.histories > summary["clusters_created"] and scan.found == []


async def test_fleet_trail_and_what_if_read_the_demos_histories(
    fleet_demo: tuple[Path, subprocess.CompletedProcess[str]], tmp_path: Path
) -> None:
    workdir, _ = fleet_demo
    with demo_database(workdir, tmp_path / "read") as port:
        client = await Client.connect(f"127.0.0.1:{port}")
        deleted = [
            wf.id.rsplit("/", 1)[-1]
            async for wf in client.list_workflows('WorkflowType="DataPlaneCluster"')
            if wf.close_time is not None
        ]
        assert deleted, "the demo deprovisions a cluster once the burst is gone"
        # The Web UI (issue 33): index shards exist as instances reached them (30 instances: at most
        # 30 of the 64), and the saved view of docs/operations.md lists growth's workflows, no shard.
        shards = [wf.id async for wf in client.list_workflows('WorkflowType="InstanceIndex"')]
        assert 0 < len(shards) <= 30, shards
        view = "GrowthCluster IS NOT NULL OR GrowthRegion IS NOT NULL"
        listed = [wf.workflow_type async for wf in client.list_workflows(view)]
        assert "FleetAutoscaler" in listed and "DataPlaneCluster" in listed and "InstanceIndex" not in listed
        connect = ["--address", f"127.0.0.1:{port}"]
        out = await growth(*connect, "fleet", "trail", deleted[0], "-o", "json")
        trail = json.loads(out.stdout)
        kinds = [e["what"] for e in trail["entries"]]
        for step in ("Created", "Reported", "InstancePlaced", "Deprovisioning", "DeleteSent", "Step", "Ended"):
            assert step in kinds, (step, kinds)
        assert kinds.index("Created") < kinds.index("InstancePlaced") < kinds.index("Deprovisioning")
        assert trail["sources"] == ["fleet/aws/us-east-1", f"fleet/cluster/{deleted[0]}"]
        out = await growth(*connect, "fleet", "what-if", "-o", "json")
        report = json.loads(out.stdout)
        assert report["total_happened"]["scale_up"]["standard"] >= 2
        assert set(report["difference"].values()) == {0}  # the recorded configuration: the same decisions
        missing = await growth(*connect, "fleet", "trail", "no-such-cluster", expect=1)
        assert "no trail of cluster no-such-cluster" in missing.stderr
