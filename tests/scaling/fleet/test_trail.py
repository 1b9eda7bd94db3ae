"""A data-plane cluster's trail over the recorded histories (tests/workflows/histories/0.2.0/): the
FleetAutoscaler's (a region that scales up and down) and a DataPlaneCluster lifecycle."""

from __future__ import annotations

from pathlib import Path

from scaling.fleet.trail import cluster_trail
from starters.history import history_from_file

HISTORIES = Path(__file__).parents[2] / "workflows" / "histories" / "0.2.0"
REGION = HISTORIES / "fleet_FleetAutoscaler_scaling.json"


def test_a_cluster_reads_from_its_creation_through_its_instances_to_its_deletion() -> None:
    autoscaler = history_from_file(str(REGION))
    cid = next(e for e in autoscaler.events if e.kind == "child" and e.name == "DataPlaneCluster").input[0][
        "cluster_id"
    ]
    trail = cluster_trail(cid, autoscaler)
    kinds = [e.what for e in trail.entries]
    assert kinds[0] == "Created" and "no_room_for_biggest" in trail.entries[0].detail  # the recorded evaluation's rule
    phases = [e.detail.split(",")[0].split(":")[0] for e in trail.entries if e.what == "Reported"]
    assert phases[:4] == ["cluster_provisioning", "cluster_provisioned", "waiting_for_kas_fleetshard_operator", "ready"]
    assert kinds.count("InstancePlaced") == kinds.count("InstanceReleased") == 5  # 5 of 2 units fill its 10
    assert kinds.index("Reported") < kinds.index("InstancePlaced") < kinds.index("Deprovisioning")
    assert kinds.index("Deprovisioning") < kinds.index("DeleteSent") and phases[-1] == "deleted"
    assert cluster_trail("other-cluster", autoscaler).entries == []


def test_a_cluster_started_by_a_0_1_0_region_says_its_rule_was_not_recorded() -> None:
    autoscaler = history_from_file(str(HISTORIES.parent / "0.1.0" / "fleet_FleetAutoscaler_scaling.json"))
    cid = next(e for e in autoscaler.events if e.kind == "child" and e.name == "DataPlaneCluster").input[0][
        "cluster_id"
    ]
    created = cluster_trail(cid, autoscaler).entries[0]
    assert created.what == "Created" and "0.2.0" in created.detail


def test_the_clusters_own_history_adds_its_steps_and_agent_reports() -> None:
    autoscaler = history_from_file(str(REGION))
    own = history_from_file(str(HISTORIES / "fleet_DataPlaneCluster.json"))
    trail = cluster_trail("c1", autoscaler, own, max_entries=10)
    steps = [e.detail for e in trail.entries if e.what == "Step"]
    assert steps and steps[0] == "create_ocm_cluster: done"
    assert len(trail.entries) == 10 and "left out" in trail.truncated
    assert trail.entries[-1].what == "Ended"
