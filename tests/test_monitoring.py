"""deploy/monitoring/ as the real tools read it: the dashboard names only metrics growth exports,
`promtool check rules` accepts the alert rules and `promtool test rules` runs a unit test per
alert, firing and not firing (skipped without promtool, saying how to get it); docs/operations.md
says what to do for each alert. The live half (a real Prometheus scraping a worker that ran the
loop: every panel's query and every alert's condition read as 0/1 returns a series, every loaded
rule evaluates) is in the e2e test of each loop: tests/e2e/test_hetzner_e2e.py (nodes: burst,
fallbacks, failed scale-ups, the Hetzner budget, a scale-down and a node blocked from it),
test_components_e2e.py and test_fleet_e2e.py, each with the worker's panels and alerts."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

import worker
from scaling.components import loop_metrics
from scaling.fleet import metrics as fleet_metrics
from scaling.nodes import metrics as node_metrics
from starters import monitoring
from starters.prometheus import INSTALL_HINT

ROOT = Path(__file__).resolve().parents[1]
GROWTH_METRICS = {*node_metrics.ALL, *loop_metrics.ALL, *fleet_metrics.ALL, worker.WORKER_READY}
needs_promtool = pytest.mark.skipif(shutil.which("promtool") is None, reason=INSTALL_HINT)


def test_every_query_names_only_metrics_growth_exports() -> None:
    expressions = [*monitoring.panels(), *monitoring.alerts()]
    for e in expressions:
        assert e.metrics, e
        for metric in e.metrics:
            if metric.startswith("growth_"):
                assert metric in GROWTH_METRICS or monitoring.exported_name(metric) in GROWTH_METRICS, (e.title, metric)
    # Every loop and the worker have panels, and every metric growth exports is on the dashboard.
    # Every expression belongs to a loop an e2e run checks live (the module docstring).
    assert {e.loop for e in monitoring.panels()} == {"nodes", "fleet", "components", "worker"}
    assert {e.loop for e in monitoring.alerts()} <= {"nodes", "fleet", "components", "worker"}
    shown = {n for e in monitoring.panels() for m in e.metrics for n in (m, monitoring.exported_name(m))}
    assert GROWTH_METRICS <= shown, GROWTH_METRICS - shown


def test_as_bool_reads_an_alert_condition_as_zero_or_one_for_every_series_it_compares() -> None:
    assert monitoring.as_bool("sum(x) == 0") == "sum(x) == bool 0"
    assert monitoring.as_bool("a >= 5 or b < 1") == "a >= bool 5 or b < bool 1"
    assert monitoring.as_bool("a > bool 1") == "a > bool 1"  # already bool: unchanged
    # Matchers and strings are not comparisons.
    assert (
        monitoring.as_bool('sum(rate(x{code=~"5..",a!="b"}[5m])) > 0 unless label_replace(y, "d", "<", "s", ">=")')
        == 'sum(rate(x{code=~"5..",a!="b"}[5m])) > bool 0 unless label_replace(y, "d", "<", "s", ">=")'
    )
    # Every alert's condition has a comparison to turn.
    for a in monitoring.alerts():
        assert " bool " in monitoring.as_bool(a.expr), a.title


def test_dashboard_is_grafana_json_with_a_datasource_variable() -> None:
    board = json.loads(monitoring.DASHBOARD.read_text())
    assert board["uid"] and board["schemaVersion"] >= 36
    assert [v["name"] for v in board["templating"]["list"]] == ["datasource"]
    ids = [p["id"] for p in board["panels"]]
    assert len(ids) == len(set(ids))
    for p in board["panels"]:
        if p["type"] != "row":
            assert p["datasource"]["uid"] == "${datasource}" and p["targets"], p["title"]


@needs_promtool
def test_promtool_checks_the_rules() -> None:
    proc = subprocess.run(["promtool", "check", "rules", str(monitoring.RULES)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"SUCCESS: {len(monitoring.alerts())} rules found" in proc.stdout


@needs_promtool
def test_promtool_accepts_the_conditions_as_the_live_check_asks_them(tmp_path: Path) -> None:
    groups = monitoring.rule_groups()
    for g in groups:
        for r in g["rules"]:
            r["expr"] = monitoring.as_bool(r["expr"])
    rules = tmp_path / "bool.rules.yaml"
    rules.write_text(yaml.safe_dump({"groups": groups}))
    proc = subprocess.run(["promtool", "check", "rules", str(rules)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


@needs_promtool
def test_promtool_unit_tests_every_alert_firing_and_not() -> None:
    tests = monitoring.MONITORING / "alerts.test.yaml"
    cases = [c for t in yaml.safe_load(tests.read_text())["tests"] for c in t["alert_rule_test"]]
    for a in monitoring.alerts():
        mine = [c for c in cases if c["alertname"] == a.title]
        assert any(c["exp_alerts"] for c in mine), f"{a.title}: no firing case"
        assert any(not c["exp_alerts"] for c in mine), f"{a.title}: no case where it stays quiet"
    proc = subprocess.run(["promtool", "test", "rules", tests.name], cwd=tests.parent, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_operations_doc_says_what_to_do_for_each_alert() -> None:
    doc = (ROOT / "docs" / "operations.md").read_text()
    for a in monitoring.alerts():
        assert f"`{a.title}`" in doc, a.title
