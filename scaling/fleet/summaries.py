"""What the Temporal Web UI shows for the fleet loop's workflows without opening a query: a
start's one-line `static_summary` (the workflow list) and the current details a workflow sets
as its phase changes (the workflow page)."""

from __future__ import annotations

from collections import Counter

from scaling.fleet.lifecycle import ClusterReport, DataPlaneClusterInput
from scaling.fleet.models import ManagedInstance
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


def placed_units(instances: list[ManagedInstance], instance_type: str) -> int:
    """Units of the instances growth placed on a cluster and has not released: what the region's
    registry counts as consumed there (`growth fleet status`)."""
    return sum(i.units for i in instances if not i.deleted and i.instance_type == instance_type)


def cluster_details(report: ClusterReport, placed: int | None = None) -> str:
    """`placed` (growth's count, as `growth fleet status` shows it) is the units used; where the
    agent's last report counts otherwise (it has not caught up, or runs instances growth did not
    place), its figure follows, named as the agent's."""
    units = ""
    if report.max_units is not None:
        reported = report.max_units - (report.remaining_units or 0)
        used = reported if placed is None else placed
        units = f", {used}/{report.max_units} units used"
        if used != reported:
            units += f" (agent reports {reported})"
    message = f": {report.message}" if report.message else ""
    return f"{report.phase.value}{units}{message}"
