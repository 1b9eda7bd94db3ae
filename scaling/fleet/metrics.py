"""The fleet loop's Prometheus metrics: names and what each counts, beside the other loops'
(scaling/nodes/metrics.py, scaling/components/loop_metrics.py), with the same prefix. Every
gauge carries `region` = `<provider>/<region>`, the FleetAutoscaler's."""

from __future__ import annotations

from collections import Counter

from scaling.fleet.models import ClusterPhase
from scaling.fleet.region import RegionStatus

# Gauges, set by the FleetAutoscaler every round (workflow.metric_meter: not during replay).
CLUSTERS = "growth_fleet_clusters_count"  # {region, phase}: data-plane clusters in the registry
INSTANCES = "growth_fleet_instances_count"  # {region, state}: managed instances, placed or waiting
UNITS = "growth_fleet_units"  # {region, instance_type, state}: streaming units, used or max
# Counter, from the agent API (the worker's process meter).
AGENT_API_RESPONSES = "growth_agent_api_responses_total"  # {code}: the agent API's answers by HTTP status

ALL = (CLUSTERS, INSTANCES, UNITS, AGENT_API_RESPONSES)


def clusters_by_phase(status: RegionStatus) -> dict[str, int]:
    """Every phase, 0 where none is: a phase a cluster left reads 0, not its old count."""
    found = Counter(c.phase.value for c in status.clusters)
    return {p.value: found.get(p.value, 0) for p in ClusterPhase}


def units_by_type(status: RegionStatus) -> dict[tuple[str, str], int]:
    """(instance type, "used" | "max") -> units over the registry's clusters (max: reported ones)."""
    out: Counter[tuple[str, str]] = Counter()
    for c in status.clusters:
        for itype, u in c.types.items():
            out[(itype, "used")] += u.consumed_units
            out[(itype, "max")] += u.max_units or 0
    return dict(out)
