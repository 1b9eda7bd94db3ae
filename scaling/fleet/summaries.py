"""What the Temporal Web UI shows for the fleet loop's workflows without opening a query: a
start's one-line `static_summary` (the workflow list) and the current details a workflow sets
as its phase changes (the workflow page)."""

from __future__ import annotations

from collections import Counter

from scaling.fleet.lifecycle import ClusterReport, DataPlaneClusterInput
from scaling.fleet.region import FleetAutoscalerSettings, RegionStatus


def region_summary(settings: FleetAutoscalerSettings) -> str:
    approval = ", deletions need approval" if settings.deletion_requires_approval else ""
    return f"FleetAutoscaler {settings.provider}/{settings.region}{approval}"


def region_details(status: RegionStatus) -> str:
    phases = Counter(c.phase.value for c in status.clusters)
    clusters = ", ".join(f"{n} {phase}" for phase, n in sorted(phases.items())) or "none"
    head = "PAUSED" if status.paused else "running"
    lines = [
        f"{head}: evaluation {status.evaluations}, run {status.runs}",
        f"clusters: {clusters}",
        f"instances: {status.instances_placed} placed, {status.instances_waiting} waiting",
    ]
    if status.awaiting_approval:
        lines.append(f"awaiting approval to remove: {', '.join(status.awaiting_approval)}")
    return "\n".join(lines)


def cluster_summary(inp: DataPlaneClusterInput) -> str:
    zones = "multi-AZ" if inp.multi_az else "single-AZ"
    return f"DataPlaneCluster {inp.cluster_id}: {inp.instance_type}, {inp.provider}/{inp.region}, {zones}"


def cluster_details(report: ClusterReport) -> str:
    units = ""
    if report.max_units is not None:
        used = report.max_units - (report.remaining_units or 0)
        units = f", {used}/{report.max_units} units used"
    message = f": {report.message}" if report.message else ""
    return f"{report.phase.value}{units}{message}"
