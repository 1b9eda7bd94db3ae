"""Components loop end to end: `make demo SCENARIO=components HEADLESS=1` as a subprocess —
the Temporal dev server, the simulated cluster with the sim's TiDB world (TidbCluster
controller, fake Prometheus and PD) and the real worker process, all on 127.0.0.1, driven by
`run_components_scenario` in real time (intervals of 4 s out / 5 s in). The demo runs once per
module: one test checks its summary and scans it for secrets, the other reads its changes back
with `growth components trail`.

Metrics source: with `prometheus` on PATH the loop reads a real Prometheus scraping the sim's
TiKV/TiDB exposition (GROWTH_METRICS_SOURCE=auto, the demo's default; `sim` keeps the sim's own
PromQL), and the same Prometheus scrapes the worker: the dashboard's components and worker queries
and the alert rules are run on it. Without the binary the demo says how to get it and reads the
sim."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from starters import monitoring, prometheus
from starters.scenarios.components import interval_violations
from tests.cli import growth
from tests.e2e.demo import demo_database, run_headless_demo
from tests.e2e.leaks import scan_demo

SOURCE = os.environ.get("GROWTH_METRICS_SOURCE", "auto")
SUMMARY_KEYS = [
    "scenario", "homogeneous_scale_outs", "heterogeneous_created", "storage_scale_outs", "scale_ins",
    "groups_deleted", "interval_violations", "invalid_specs_reported", "change_events", "invalid_spec_status",
    "metrics", "metrics_source",
]  # fmt: skip


@pytest.fixture(scope="module")
def components_demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess[str]]:
    workdir = tmp_path_factory.mktemp("components") / "demo"
    return workdir, run_headless_demo(workdir, "--scenario", "components", "--metrics-source", SOURCE)


def test_demo_components_headless(components_demo: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    workdir, proc = components_demo
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    real = prometheus.binary() is not None
    reads_real = SOURCE == "prometheus" or (SOURCE == "auto" and real)
    assert list(summary) == SUMMARY_KEYS + (["monitoring"] if real else [])
    assert summary["scenario"] == "components"
    assert (
        re.fullmatch(r"prometheus \d+\.\d+\.\d+", summary["metrics_source"])
        if reads_real
        else summary["metrics_source"] == "sim"
    ), summary["metrics_source"]
    assert summary["homogeneous_scale_outs"] >= 1 and summary["storage_scale_outs"] >= 1
    (created,) = summary["heterogeneous_created"]  # one hot subset, one resource type's group
    assert created.startswith("auto-")
    # Load drops: every heterogeneous instance goes, one per scale-in interval, and the emptied
    # group is drained and deleted.
    assert summary["scale_ins"] >= 1 and summary["groups_deleted"] == 1
    # Counted from the Events on the TidbClusterAutoScaler, not from the workflow: at least the
    # three scale-out rounds and one scale-in were there to check.
    assert summary["interval_violations"] == 0 and summary["change_events"] >= 4
    # The invalid autoscaler was reported (counter and its object's status) while `basic` worked.
    assert summary["invalid_specs_reported"] == 1
    assert summary["invalid_spec_status"].startswith("spec.tikv.rules.cpu.min_threshold:")
    # The worker's /metrics (issue 21): the loop's changes, sizes and rounds. The counter is read
    # after the last change the scenario waited for, and the loop may change more since.
    metrics = summary["metrics"]
    changes = summary["homogeneous_scale_outs"] + summary["storage_scale_outs"] + summary["scale_ins"] + 1
    assert metrics["growth_component_changes_total"] >= changes  # + 1: the heterogeneous group's scale-out
    assert "growth_component_groups_count" in metrics  # its value is checked in tests/workflows/components
    assert metrics["growth_component_replicas_count"] >= 3
    assert metrics["growth_component_round_duration_seconds_count"] >= 10
    if real:
        # The real Prometheus scraped the worker: every components and worker panel of
        # deploy/monitoring/dashboard.json and every alert of those loops (its condition read as
        # 0/1) returned a series, and every alert rule it loaded evaluated without error.
        check = summary["monitoring"]
        assert check["empty"] == [] and check["checked"] == len(monitoring.of({"components", "worker"})), check
        assert check["rules_loaded"] == len(monitoring.alerts()) and check["rules_unhealthy"] == [], check
    # Progress lines name what changed.
    assert re.search(rf"heterogeneous cluster created: TiKV replicas basic \d+, {created} 1 ", proc.stdout)
    # Secrets never in history (issue 20): the sim API server's token (and any token the config names).
    scan = asyncio.run(scan_demo(workdir))
    assert "kubeconfig:token" in scan.secrets and scan.histories >= 1 and scan.events >= 1
    assert scan.found == []


async def test_components_trail_reads_the_demos_changes(
    components_demo: tuple[Path, subprocess.CompletedProcess[str]], tmp_path: Path
) -> None:
    workdir, _ = components_demo
    with demo_database(workdir, tmp_path / "read") as port:
        connect = ["--address", f"127.0.0.1:{port}"]
        out = await growth(*connect, "components", "-n", "tidb", "basic", "trail", "-o", "json")
        kinds = [e["what"] for e in json.loads(out.stdout)["entries"]]
        for step in ("Patched", "ScaledOut", "GroupCreate", "GroupCreated", "ScaledIn", "GroupDelete"):
            assert step in kinds, (step, kinds)
        assert kinds.index("GroupCreated") < kinds.index("GroupDelete")
        table = (await growth(*connect, "components", "-n", "tidb", "basic", "trail", "--component", "tikv")).stdout
        assert table.startswith("trail of tidb/basic") and "tikv" in table


def test_interval_violations_counts_rounds_closer_than_the_interval() -> None:
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    ok = [
        (t0, "tikv", "ScaledOut"),
        (t0 + timedelta(seconds=1), "tikv", "ScaledIn"),  # one round
        (t0 + timedelta(seconds=9), "tikv", "ScaledOut"),
        (t0 + timedelta(seconds=22), "tikv", "ScaledIn"),
        (t0 + timedelta(seconds=5), "tidb", "ScaledOut"),
    ]
    assert interval_violations(ok, 8, 12) == 0
    bad = [(t0, "tikv", "ScaledOut"), (t0 + timedelta(seconds=4), "tikv", "ScaledIn")]
    assert interval_violations(bad, 8, 12) == 1
