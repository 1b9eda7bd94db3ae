"""The fleet loop's gauges as its FleetAutoscaler records them each round. `workflow.metric_meter()`
records nothing while a workflow replays and adds no command (no patch id)."""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from scaling.fleet import metrics as names
    from scaling.fleet.region import RegionStatus


def region_observed(status: RegionStatus) -> None:
    meter = workflow.metric_meter()
    region = f"{status.provider}/{status.region}"
    clusters = meter.create_gauge(names.CLUSTERS, "data-plane clusters in the region's registry, by phase")
    for phase, n in names.clusters_by_phase(status).items():
        clusters.set(n, {"region": region, "phase": phase})
    instances = meter.create_gauge(names.INSTANCES, "managed instances, placed or waiting for room")
    instances.set(status.instances_placed, {"region": region, "state": "placed"})
    instances.set(status.instances_waiting, {"region": region, "state": "waiting"})
    units = meter.create_gauge(names.UNITS, "streaming units over the region's clusters, used or max")
    for (itype, state), n in names.units_by_type(status).items():
        units.set(n, {"region": region, "instance_type": itype, "state": state})
