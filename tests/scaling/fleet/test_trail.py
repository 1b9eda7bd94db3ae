"""A data-plane cluster's trail over the recorded histories: the FleetAutoscaler's (the fleet
demo) and a DataPlaneCluster lifecycle (tests/workflows/fleet/histories/)."""

from __future__ import annotations

from pathlib import Path

from scaling.fleet.trail import cluster_trail
from starters.history import history_from_file

HISTORIES = Path(__file__).parents[2] / "workflows" / "fleet" / "histories"


def test_a_cluster_reads_from_its_creation_through_its_instances() -> None:
    autoscaler = history_from_file(str(HISTORIES / "fleet_autoscaler.json"))
    cid = next(e for e in autoscaler.events if e.kind == "child").input[0]["cluster_id"]
    trail = cluster_trail(cid, autoscaler)
    kinds = [e.what for e in trail.entries]
    assert kinds[0] == "Created" and "no_room_for_biggest" in trail.entries[0].detail  # the rule, re-evaluated
    phases = [e.detail.split(",")[0].split(":")[0] for e in trail.entries if e.what == "Reported"]
    assert phases[:4] == ["cluster_provisioning", "cluster_provisioned", "waiting_for_kas_fleetshard_operator", "ready"]
    assert kinds.count("InstancePlaced") == kinds.count("InstanceReleased") == 12
    assert kinds.index("Reported") < kinds.index("InstancePlaced")  # placed once it reported
    assert cluster_trail("other-cluster", autoscaler).entries == []


def test_the_clusters_own_history_adds_its_steps_and_agent_reports() -> None:
    autoscaler = history_from_file(str(HISTORIES / "fleet_autoscaler.json"))
    own = history_from_file(str(HISTORIES / "data_plane_cluster_lifecycle.json"))
    trail = cluster_trail("c1", autoscaler, own, max_entries=10)
    steps = [e.detail for e in trail.entries if e.what == "Step"]
    assert steps and steps[0] == "create_ocm_cluster: done"
    assert len(trail.entries) == 10 and "left out" in trail.truncated
    assert trail.entries[-1].what == "Ended"
