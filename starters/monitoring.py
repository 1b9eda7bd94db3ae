"""growth's dashboard and alert rules (deploy/monitoring/) read as expressions, and checked against
a live Prometheus that scrapes a worker.

Each expression belongs to a loop by the metrics it names (growth_component_* to components,
growth_fleet_* and the agent API to fleet, the worker's readiness and the SDK's temporal_* to
worker, every other growth_* to nodes), so a demo of one loop checks that loop's queries.
"""

from __future__ import annotations

import json
import re
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


def exported_name(metric: str) -> str:
    """The name a metric family is declared under: a histogram's series drop their suffix."""
    return _HISTOGRAM.sub("", metric)


def _vector(url: str, query: str) -> list[dict[str, Any]]:
    resp = httpx.get(f"{url}/api/v1/query", params={"query": query}, timeout=10)
    body = resp.json()
    if body.get("status") != "success":
        raise ValueError(f"{query}: {body.get('error')}")
    return list(body["data"]["result"])


def check_live(url: str, loops: set[str]) -> dict[str, Any]:
    """Every panel and alert of `loops` against the Prometheus at `url`: a panel's query must
    return a series, an alert's every metric must have one (its condition is healthy here, so its
    result is empty), and every rule Prometheus loaded must evaluate without error."""
    empty: list[str] = []
    checked = 0
    for e in [*panels(), *alerts()]:
        if e.loop not in loops:
            continue
        checked += 1
        if e.source == "panel":
            if not _vector(url, e.expr):
                empty.append(f"panel {e.title}: {e.expr}")
            continue
        for metric in e.metrics:
            if not _vector(url, f"count({metric})"):
                empty.append(f"alert {e.title}: no series of {metric}")
    rules = httpx.get(f"{url}/api/v1/rules", timeout=10).json()["data"]["groups"]
    unhealthy = [
        f"{r['name']}: {r.get('lastError')}" for g in rules for r in g["rules"] if r.get("health") not in ("ok", None)
    ]
    loaded = sum(len(g["rules"]) for g in rules)
    return {"checked": checked, "empty": empty, "rules_loaded": loaded, "rules_unhealthy": unhealthy}
