"""Pure rules of the cluster lifecycle (agent reports) and the region's registry."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from scaling.fleet.contracts import AgentStatusReport
from scaling.fleet.lifecycle import (
    MAX_PHASE_HISTORY,
    ClusterReport,
    DataPlaneClusterState,
    apply_report,
    phase_after_report,
    report_problems,
    set_phase,
)
from scaling.fleet.models import ClusterPhase, ClusterRecord, TypeCapacity
from scaling.fleet.region import merge_cluster_report

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def state(phase: ClusterPhase) -> DataPlaneClusterState:
    return DataPlaneClusterState(cluster_id="c1", provider="aws", region="r", instance_type="standard", phase=phase)


def report(ready: str = "True", **capacity: tuple[int, int]) -> AgentStatusReport:
    return AgentStatusReport.model_validate(
        {
            "conditions": [{"type": "Ready", "status": ready}],
            "capacity": {k: {"maxUnits": m, "remainingUnits": r} for k, (m, r) in capacity.items()},
        }
    )


def test_ready_condition_moves_waiting_and_ready() -> None:
    assert phase_after_report(ClusterPhase.WAITING, True) == ClusterPhase.READY
    assert phase_after_report(ClusterPhase.READY, False) == ClusterPhase.WAITING
    for phase in (ClusterPhase.DEPROVISIONING, ClusterPhase.PROVISIONED):
        assert phase_after_report(phase, True) == phase and phase_after_report(phase, False) == phase


def test_apply_report_stores_capacity_and_keeps_max_nodes() -> None:
    st = state(ClusterPhase.WAITING)
    st.capacity["standard"] = TypeCapacity(max_nodes=18)
    assert apply_report(st, report(standard=(10, 4)), NOW)
    cap = st.capacity["standard"]
    assert (cap.max_nodes, cap.max_units, cap.remaining_units) == (18, 10, 4)
    assert st.phase == ClusterPhase.READY and st.reports == 1 and st.last_report_at == NOW
    assert apply_report(st, report(standard=(10, 3)), NOW)  # capacity moved
    assert not apply_report(st, report(standard=(10, 3)), NOW)  # nothing moved


def test_report_problems_name_the_field() -> None:
    assert report_problems(report(standard=(1, 1)), state(ClusterPhase.WAITING)) == []
    assert report_problems(report(developer=(1, 1)), state(ClusterPhase.READY)) == []  # ignored, not refused
    bad_strimzi = AgentStatusReport.model_validate({"strimzi": [{"version": "v1", "kafkaVersions": ["3.6.0"]}]})
    assert report_problems(bad_strimzi, state(ClusterPhase.READY)) == [
        ".status.strimzi[0].kafkaIbpVersions cannot be empty"
    ]
    assert report_problems(report(ready="Maybe"), state(ClusterPhase.READY)) == [
        "conditions[0].status: 'Maybe' is not a boolean"
    ]


def test_no_ready_condition_is_not_ready() -> None:
    st = state(ClusterPhase.READY)
    no_ready = AgentStatusReport.model_validate({"conditions": [{"type": "Other", "status": "True"}]})
    assert report_problems(no_ready, st) == [] and apply_report(st, no_ready, NOW)
    assert st.phase == ClusterPhase.WAITING and st.agent_ready is False


def test_capacity_of_types_the_cluster_does_not_run_is_ignored() -> None:
    st = state(ClusterPhase.WAITING)
    st.capacity["standard"] = TypeCapacity(max_nodes=18)
    assert apply_report(st, report(standard=(4, 0), developer=(90, 89)), NOW)
    assert set(st.capacity) == {"standard"} and st.capacity["standard"].max_units == 4


def test_not_ready_report_stores_no_capacity() -> None:
    st = state(ClusterPhase.READY)
    st.capacity["standard"] = TypeCapacity(max_nodes=18, max_units=10, remaining_units=4)
    assert apply_report(st, report(ready="False", standard=(2, 2)), NOW)
    assert st.phase == ClusterPhase.WAITING and st.capacity["standard"].max_units == 10


@pytest.mark.parametrize(
    "phase", [ClusterPhase.PROVISIONED, ClusterPhase.DEPROVISIONING, ClusterPhase.CLEANUP, ClusterPhase.FAILED]
)
def test_reports_outside_waiting_and_ready_change_nothing(phase: ClusterPhase) -> None:
    st = state(phase)
    before = st.model_copy(deep=True)
    assert not apply_report(st, report(standard=(4, 1)), NOW)
    assert st == before


def test_report_with_remaining_above_max_is_invalid() -> None:
    with pytest.raises(ValueError, match=r"capacity\.standard\.remainingUnits"):
        report(standard=(2, 5))


def test_phase_history_is_bounded() -> None:
    st = state(ClusterPhase.READY)
    for i in range(MAX_PHASE_HISTORY * 3):
        set_phase(st, ClusterPhase.WAITING if i % 2 else ClusterPhase.READY, NOW)
    assert len(st.history) == MAX_PHASE_HISTORY


def rec(phase: ClusterPhase) -> ClusterRecord:
    return ClusterRecord(id="c1", instance_type="standard", phase=phase, consumed_units=3, instances=2)


def rep(phase: ClusterPhase, max_units: int | None = 10) -> ClusterReport:
    return ClusterReport(cluster_id="c1", instance_type="standard", phase=phase, max_units=max_units)


def test_registry_takes_a_clusters_phase_and_capacity_and_keeps_its_own_counts() -> None:
    merged = merge_cluster_report(rec(ClusterPhase.WAITING), rep(ClusterPhase.READY, 12))
    assert merged is not None and merged.phase == ClusterPhase.READY and merged.units("standard").max_units == 12
    assert (merged.consumed_units, merged.instances) == (3, 2)


def test_finished_clusters_leave_the_registry() -> None:
    assert merge_cluster_report(rec(ClusterPhase.CLEANUP), rep(ClusterPhase.DELETED)) is None
    assert merge_cluster_report(rec(ClusterPhase.PROVISIONING), rep(ClusterPhase.FAILED)) is None
    assert merge_cluster_report(None, rep(ClusterPhase.DELETED)) is None


def test_only_the_autoscaler_moves_deprovisioning() -> None:
    # A report sent before the mark arrived does not make the cluster look ready again ...
    assert (
        merge_cluster_report(rec(ClusterPhase.DEPROVISIONING), rep(ClusterPhase.READY)).phase
        == ClusterPhase.DEPROVISIONING
    )
    # ... nor does one sent before the restore arrived put it back to deprovisioning.
    assert merge_cluster_report(rec(ClusterPhase.READY), rep(ClusterPhase.DEPROVISIONING)).phase == ClusterPhase.READY
    # The cluster's own removal phases always apply.
    assert (
        merge_cluster_report(rec(ClusterPhase.DEPROVISIONING), rep(ClusterPhase.CLEANUP)).phase == ClusterPhase.CLEANUP
    )


def test_unknown_live_cluster_is_registered_from_its_report() -> None:
    merged = merge_cluster_report(None, rep(ClusterPhase.READY, 8))
    assert merged == ClusterRecord(id="c1", instance_type="standard", phase=ClusterPhase.READY, max_units=8)
