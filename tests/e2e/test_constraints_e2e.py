"""`make demo SCENARIO=constraints HEADLESS=1` end to end (issue 29): Temporal dev server, the
simulated cluster (its scheduler runs the kube-scheduler's filters: sim/kube/filters/) and the
real worker. GPU pods, a zone anti-affine database, web pods affine to a cache, host-port agents,
a pod on a zone-pinned PersistentVolume and one impossible pod: no node growth buys goes
unused, and no pod is left Pending without a reason."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from starters.scenarios.constraints import gpu_types
from tests.e2e.demo import run_headless_demo

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("scaling.kube.scheduling") is None,
    reason="waits for the planner's scheduling filters (scaling/kube/scheduling/, issue 29 item 1)",
)


def test_constraints_scenario_wastes_no_node_and_leaves_no_pod_unexplained(tmp_path: Path) -> None:
    proc = run_headless_demo(tmp_path / "constraints", "--scenario", "constraints", "--scan-interval", "1")
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    assert summary["scenario"] == "constraints"
    assert (summary["wasted_nodes"], summary["unreported_pending"]) == (0, 0), summary
    pending = set(summary["pending"])
    expected = {"impossible"} | (set() if gpu_types() else {p for p in pending if p.startswith("gpu-train-")})
    assert pending == expected, summary["pending"]
    assert summary["pods_running"] == summary["pods"] - len(expected)
