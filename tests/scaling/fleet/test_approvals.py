"""Fleet approval gates: which cluster steps wait, and the region's record after a denied deletion."""

from scaling.fleet.approvals import CREATE, DELETE, cluster_gate, gate_reason
from scaling.fleet.lifecycle import ClusterReport
from scaling.fleet.models import ClusterPhase, ClusterRecord
from scaling.fleet.region import FleetAutoscalerSettings, merge_cluster_report


def test_no_gate_unless_a_step_is_gated() -> None:
    assert cluster_gate(False, False, 60, "deny") is None
    gate = cluster_gate(True, False, 60, "approve")
    assert gate is not None and (gate.create, gate.delete, gate.timeout_s, gate.default) == (True, False, 60, "approve")
    assert (
        gate_reason(gate, CREATE, "c1", "standard", "us-east-1")
        == "create data-plane cluster c1 (standard) in us-east-1"
    )
    assert gate_reason(gate, DELETE, "c1", "standard", "us-east-1") == ""
    assert gate_reason(None, CREATE, "c1", "standard", "us-east-1") == ""


def test_settings_default_to_no_gate_and_refuse_a_zero_timeout() -> None:
    s = FleetAutoscalerSettings(provider="aws", region="us-east-1")
    assert (s.approve_cluster_create, s.approve_cluster_delete, s.approval_default) == (False, False, "deny")
    try:
        FleetAutoscalerSettings(provider="aws", region="us-east-1", approval_timeout_s=0)
    except ValueError as err:
        assert "approval_timeout_s" in str(err)
    else:
        raise AssertionError("a zero approval timeout was accepted")


def test_a_denied_deletion_puts_the_cluster_back_and_blocks_its_deletion() -> None:
    marked = ClusterRecord(id="c1", instance_type="standard", phase=ClusterPhase.DEPROVISIONING, delete_sent=True)
    plain = ClusterReport(cluster_id="c1", instance_type="standard", phase=ClusterPhase.READY, max_units=10)
    # A serving report sent before the mark arrived does not undo it ...
    assert merge_cluster_report(marked, plain).phase == ClusterPhase.DEPROVISIONING
    # ... but a denial does, and the region will not mark it again until approve-deletion.
    after = merge_cluster_report(marked, plain.model_copy(update={"deletion_denied": True}))
    assert after is not None and after.phase == ClusterPhase.READY and after.max_units == 10
    assert after.deletion_blocked and not after.delete_sent and not after.deletion_approved
