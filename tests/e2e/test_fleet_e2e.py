"""Fleet loop end to end: `make demo SCENARIO=fleet HEADLESS=1` in small — Temporal dev server,
the fake OCM, the real worker process (fleet activities + agent API) and the fake agents."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

from tests.e2e.leaks import scan_demo

ROOT = Path(__file__).resolve().parents[2]
LIFECYCLE_TO_READY = [
    "cluster_accepted",
    "cluster_provisioning",
    "cluster_provisioned",
    "waiting_for_kas_fleetshard_operator",
    "ready",
]


def test_demo_fleet_headless(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "starters.demo", "--scenario", "fleet", "--headless", "--temporal-port", "0",
         "--ui-port", "0", "--workdir", str(tmp_path / "demo"), "--instances", "30", "--timeout", "150"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    assert list(summary) == [
        "scenario", "instances", "instances_placed", "clusters_created", "clusters_deleted", "clusters_final",
        "flaps", "phases_seen", "ocm_clusters_leaked", "seconds_to_all_placed",
    ]  # fmt: skip
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
    scan = asyncio.run(scan_demo(tmp_path / "demo"))
    assert {"growth-fleet.yaml:token_file", "growth-fleet.yaml:token_secret_file"} <= set(scan.secrets)
    assert sum(name.startswith("agent token of ") for name in scan.secrets) == summary["clusters_created"]
    assert scan.histories > summary["clusters_created"] and scan.found == []
