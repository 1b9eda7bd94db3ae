"""Fleet and components trails (and fleet what-if by workflow id) end to end: the headless demos
run their loops on the dev server with the real worker and the sims, then the `growth` command
reads the recorded histories back from the demo's Temporal database."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from temporalio.client import Client

from starters.processes import Processes
from tests.cli import growth

ROOT = Path(__file__).resolve().parents[2]


def run_demo(workdir: Path, *args: str) -> None:
    argv = [sys.executable, "-m", "starters.demo", "--headless", "--temporal-port", "0", "--ui-port", "0"]
    proc = subprocess.run(
        [*argv, "--workdir", str(workdir), "--timeout", "150", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]


async def test_fleet_trail_and_what_if_read_the_demos_histories(tmp_path: Path) -> None:
    run_demo(tmp_path / "demo", "--scenario", "fleet", "--instances", "30")
    procs = Processes(tmp_path / "read")
    try:
        port, _ = procs.temporal(tmp_path / "demo" / "temporal.db", ui=False)
        client = await Client.connect(f"127.0.0.1:{port}")
        deleted = [
            wf.id.rsplit("/", 1)[-1]
            async for wf in client.list_workflows('WorkflowType="DataPlaneCluster"')
            if wf.close_time is not None
        ]
        assert deleted, "the demo deprovisions a cluster once the burst is gone"
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
    finally:
        procs.stop_all()


async def test_components_trail_reads_the_demos_changes(tmp_path: Path) -> None:
    run_demo(tmp_path / "demo", "--scenario", "components")
    procs = Processes(tmp_path / "read")
    try:
        port, _ = procs.temporal(tmp_path / "demo" / "temporal.db", ui=False)
        connect = ["--address", f"127.0.0.1:{port}"]
        out = await growth(*connect, "components", "-n", "tidb", "basic", "trail", "-o", "json")
        kinds = [e["what"] for e in json.loads(out.stdout)["entries"]]
        for step in ("Patched", "ScaledOut", "GroupCreate", "GroupCreated", "ScaledIn", "GroupDelete"):
            assert step in kinds, (step, kinds)
        assert kinds.index("GroupCreated") < kinds.index("GroupDelete")
        table = (await growth(*connect, "components", "-n", "tidb", "basic", "trail", "--component", "tikv")).stdout
        assert table.startswith("trail of tidb/basic") and "tikv" in table
    finally:
        procs.stop_all()
