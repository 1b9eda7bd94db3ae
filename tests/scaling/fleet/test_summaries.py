"""The Web UI's text for the fleet loop."""

from __future__ import annotations

from scaling.fleet.lifecycle import ClusterReport
from scaling.fleet.models import ClusterPhase, ClusterRecord, ManagedInstance
from scaling.fleet.region import FleetAutoscalerSettings, RegionStatus
from scaling.fleet.summaries import cluster_details, placed_units, region_details, region_summary


def test_region_and_cluster_text() -> None:
    settings = FleetAutoscalerSettings(provider="aws", region="us-east-1", deletion_requires_approval=True)
    assert region_summary(settings) == "FleetAutoscaler aws/us-east-1, deletions need approval"
    status = RegionStatus.model_construct(
        paused=False,
        evaluations=4,
        runs=1,
        clusters=[
            ClusterRecord(id="a", instance_type="standard", phase=ClusterPhase.READY),
            ClusterRecord(id="b", instance_type="standard", phase=ClusterPhase.READY),
            ClusterRecord(id="c", instance_type="developer", phase=ClusterPhase.PROVISIONING),
        ],
        instances_placed=3,
        instances_waiting=1,
        awaiting_approval=["a"],
    )
    text = region_details(status)
    assert "clusters: 1 cluster_provisioning, 2 ready" in text and "3 placed, 1 waiting" in text
    assert "awaiting approval to remove: a" in text
    report = ClusterReport(
        cluster_id="a", instance_type="standard", phase=ClusterPhase.READY, max_units=10, remaining_units=7
    )
    assert cluster_details(report) == "ready, 3/10 units used"
    # The Web UI counts what growth placed there, as `growth fleet status` does; an agent report
    # that has not caught up (or counts more) is named as the agent's, not shown as the usage.
    placed = [
        ManagedInstance(id="k1", instance_type="standard", size="x1", units=2),
        ManagedInstance(id="k2", instance_type="standard", size="x1", units=1, deleted=True),  # released
        ManagedInstance(id="d1", instance_type="developer", size="x1", units=1),  # another type's units
    ]
    assert placed_units(placed, "standard") == 2
    assert cluster_details(report, placed_units(placed, "standard")) == "ready, 2/10 units used (agent reports 3)"
    assert cluster_details(report, 3) == "ready, 3/10 units used"
