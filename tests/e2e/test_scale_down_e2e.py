"""Scale-down end to end: Temporal dev server + simulated cluster (+ sim-Longhorn) + the real
worker, through the demo's headless scenarios (seed 003's test plan on the simulated cluster)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run_demo(tmp_path: Path, scenario: str, *extra: str) -> dict:
    proc = subprocess.run(
        [sys.executable, "-m", "starters.demo", "--headless", "--scenario", scenario, "--temporal-port", "0",
         "--ui-port", "0", "--workdir", str(tmp_path / scenario), "--timeout", "120", "--scan-interval", "1", *extra],
        cwd=ROOT, capture_output=True, text=True, timeout=240,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_scale_up_then_back_to_the_pool_minimum(tmp_path: Path) -> None:
    """Seed 003 "test CA": double the nodes with a deployment's replicas, then scale back."""
    s = run_demo(tmp_path, "scale-down", "--pods", "16")
    assert s["scenario"] == "scale-down"
    assert s["nodes_peak"] >= 2
    assert s["nodes_final"] == 0  # the pools' minimum
    assert s["nodes_removed"] == s["nodes_peak"]  # each node removed exactly once
    assert s["evictions_refused"] == 0 and s["blocked"] == {}


def test_storage_node_with_the_last_healthy_replica_goes_only_after_a_rebuild(tmp_path: Path) -> None:
    """Seed 003 "scale down all nodes containing volume replicas" with sim-Longhorn."""
    s = run_demo(tmp_path, "storage")
    assert s["scenario"] == "storage"
    assert s["nodes_peak"] == 6 and s["nodes_final"] == 3  # double, then the original number
    assert s["blocked_nodes_final"] == 1  # original + 1 blocked node before the re-attach
    assert s["blocked"].get("LonghornLastHealthyReplica") == 1
    assert s["blocked"].get("ScaleDownDisabledAnnotation") == 3  # the pinned new nodes
    assert s["nodes_removed"] == 3  # each old node removed once
    assert s["volume_checksum_unchanged"] is True
