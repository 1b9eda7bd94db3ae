"""`make demo SCENARIO=constraints HEADLESS=1` end to end (issue 29): Temporal dev server, the
simulated cluster (its scheduler runs the kube-scheduler's filters: sim/kube/filters/) and the
real worker. GPU pods, a zone anti-affine database, web pods affine to a cache, host-port agents,
a pod on a zone-pinned PersistentVolume and one impossible pod: no node growth buys goes
unused, and no pod is left Pending without a reason."""

from __future__ import annotations

import json
from pathlib import Path

from starters.scenarios.constraints import gpu_types
from tests.e2e.demo import run_headless_demo


def test_constraints_scenario_wastes_no_node_and_leaves_no_pod_unexplained(tmp_path: Path) -> None:
    proc = run_headless_demo(tmp_path / "constraints", "--scenario", "constraints", "--scan-interval", "1")
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    assert summary["scenario"] == "constraints"
    assert (summary["wasted_nodes"], summary["unreported_pending"]) == (0, 0), summary
    pending = set(summary["pending"])
    assert "impossible" in pending
    # Whether a web pod finds room beside a cache depends on where the scheduler put the cache
    # (a node a new one cannot be); those that wait say why (counted in unreported_pending).
    assert not {p for p in pending if p.startswith(("gpu-train-", "db-", "agent-", "reports"))}, summary["pending"]
    assert gpu_types()  # the GPU pods ran on a KWOK GPU type
