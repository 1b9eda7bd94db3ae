"""Secrets never in history: the Hetzner demo, run headless in its own workdir, leaves its cloud
token, join token and the sim API server's bearer token in no workflow history, process log or
Kubernetes Event. (The fleet and components demo tests run the same scan: tests/e2e/leaks.py.)"""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests.e2e.demo import demo_summary
from tests.e2e.leaks import scan_demo


async def test_hetzner_demo_leaves_no_secret_behind(tmp_path: Path) -> None:
    workdir = tmp_path / "demo"
    args = ("--provider", "hetzner", "--pods", "8", "--scan-interval", "1")
    summary = await asyncio.to_thread(demo_summary, workdir, *args)
    assert summary["pods_running"] == 8
    scan = await scan_demo(workdir)
    # What the scan must have looked for, and where: a scan that finds nothing to look at passes falsely.
    assert {"growth.yaml:token_file", "growth.yaml:join_token_file", "kubeconfig:token"} <= set(scan.secrets)
    assert scan.histories >= 3  # the loop, MachineGC and at least one NodeRequest
    assert scan.logs >= 4 and scan.events >= 1  # temporal, sim cluster, fake Hetzner, worker; Events
    assert scan.found == []
