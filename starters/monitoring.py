"""growth's dashboard and alert rules (deploy/monitoring/) read as expressions, and checked against
a live Prometheus that scrapes a worker.

Each expression belongs to a loop by the metrics it names (growth_component_* to components,
growth_fleet_* and the agent API to fleet, the worker's readiness and the SDK's temporal_* to
worker, every other growth_* to nodes), so a demo of one loop checks that loop's queries.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import yaml

MONITORING = Path(__file__).resolve().parents[1] / "deploy" / "monitoring"
DASHBOARD = MONITORING / "dashboard.json"
RULES = MONITORING / "alerts.rules.yaml"
_METRIC = re.compile(r"\b((?:growth|temporal)_[a-z_]+|up)\b(?=\s*[{\[)]|\s*$|\s*[=<>!])")
_HISTOGRAM = re.compile(r"_(bucket|count|sum)$")
# What a comparison must not touch: label matchers ({code=~"5.."}) and string literals.
_MATCHERS_AND_STRINGS = re.compile(r'(\{[^}]*\}|"(?:[^"\\]|\\.)*")')
_COMPARISON = re.compile(r"(==|!=|>=|<=|>|<)(?!\s*bool\b)")


@dataclass(frozen=True)
class Expression:
    source: str  # "panel" or "alert"
    title: str
    expr: str

    @property
    def metrics(self) -> list[str]:
        return sorted(set(_METRIC.findall(self.expr)))

    @property
    def loop(self) -> str:
        names = self.metrics
        if any(n.startswith("growth_component_") for n in names):
            return "components"
        if any(n.startswith(("growth_fleet_", "growth_agent_api_")) for n in names):
            return "fleet"
        if all(n.startswith("temporal_") or n in ("up", "growth_worker_ready") for n in names):
            return "worker"
        return "nodes"


def panels(dashboard: dict[str, Any] | None = None) -> list[Expression]:
    board = dashboard or json.loads(DASHBOARD.read_text())
    return [
        Expression("panel", p["title"], t["expr"])
        for p in board["panels"]
        if p.get("type") != "row"
        for t in p.get("targets", [])
    ]


def rule_groups() -> list[dict[str, Any]]:
    return list(yaml.safe_load(RULES.read_text())["groups"])


def alerts() -> list[Expression]:
    return [Expression("alert", r["alert"], r["expr"]) for g in rule_groups() for r in g["rules"] if "alert" in r]


def of(loops: set[str]) -> list[Expression]:
    """The panels and alerts of `loops`."""
    return [e for e in [*panels(), *alerts()] if e.loop in loops]


def exported_name(metric: str) -> str:
    """The name a metric family is declared under: a histogram's series drop their suffix."""
    return _HISTOGRAM.sub("", metric)


def as_bool(expr: str) -> str:
    """An alert's condition with every comparison made `bool`: 0 or 1 for every series the
    condition compares, where the plain comparison keeps only the series that fire. A healthy
    system's alert returns nothing; this still returns a series iff what it compares exists."""
    parts = _MATCHERS_AND_STRINGS.split(expr)
    # split() with one group: even indexes are outside matchers and strings.
    return "".join(_COMPARISON.sub(r"\1 bool", part) if i % 2 == 0 else part for i, part in enumerate(parts))


def _vector(http: httpx.Client, url: str, query: str) -> list[dict[str, Any]]:
    resp = http.get(f"{url}/api/v1/query", params={"query": query}, timeout=10)
    body = resp.json()
    if body.get("status") != "success":
        raise ValueError(f"{query}: {body.get('error')}")
    return list(body["data"]["result"])


def check_live(url: str, loops: set[str], wait_s: float = 30.0) -> dict[str, Any]:
    """Every panel and alert of `loops` against the Prometheus at `url`: each panel's query, and
    each alert's condition read as 0/1 (`as_bool`), must return a series; every rule Prometheus
    loaded must evaluate without error. Queries that return nothing are asked again until
    `wait_s`: a series recorded just before the check needs two scrapes before rate() or
    increase() see it."""
    todo = {f"{e.source} {e.title}: {e.expr}": e.expr if e.source == "panel" else as_bool(e.expr) for e in of(loops)}
    checked = len(todo)
    deadline = time.monotonic() + wait_s
    # One client for the whole check: each httpx.get made a client, loading the CA bundle
    # (~40 ms of CPU) for every query of every panel.
    with httpx.Client() as http:
        while True:
            todo = {what: q for what, q in todo.items() if not _vector(http, url, q)}
            if not todo or time.monotonic() > deadline:
                break
            time.sleep(1.0)  # Prometheus scrapes every second (starters/prometheus.py)
        rules = http.get(f"{url}/api/v1/rules", timeout=10).json()["data"]["groups"]
    unhealthy = [
        f"{r['name']}: {r.get('lastError')}" for g in rules for r in g["rules"] if r.get("health") not in ("ok", None)
    ]
    loaded = sum(len(g["rules"]) for g in rules)
    return {"checked": checked, "empty": sorted(todo), "rules_loaded": loaded, "rules_unhealthy": unhealthy}
