"""Approval gates on a region's data-plane clusters (growth's own settings, not kas-fleet-manager's:
`approve_cluster_create`, `approve_cluster_delete`, `approval_timeout_s`, `approval_default`).

The gated steps are the two that cost or lose the most: creating a cluster at OCM, and deleting
one the region's re-check found removable. The DataPlaneCluster waits durably (GrowthPhase
AwaitingApproval) until `approve`/`deny` or its timeout's default. While a creation waits the
cluster stays `cluster_accepted`: the region counts the scale-up as under way (no second cluster
for that type) and goes on with every other type and cluster. A denied creation ends the cluster
`failed` before anything exists at OCM, so the region's failure backoff (`failure_backoff_s`)
holds that type's next scale-up. A denied deletion takes the cluster back to serving, and the
region blocks its deletion as `growth fleet block-deletion` does, until `approve-deletion`.
"""

from __future__ import annotations

from pydantic import BaseModel

from scaling.approvals import Default
from scaling.fleet.models import ClusterPhase, ClusterRecord

CREATE, DELETE = "create", "delete"


class ClusterApprovalGate(BaseModel):
    """What a DataPlaneCluster must have approved, carried in its input."""

    create: bool = False
    delete: bool = False
    timeout_s: float = 1800.0
    default: Default = "deny"


def cluster_gate(create: bool, delete: bool, timeout_s: float, default: Default) -> ClusterApprovalGate | None:
    """The gate for the region's new clusters; None when neither step is gated."""
    if not (create or delete):
        return None
    return ClusterApprovalGate(create=create, delete=delete, timeout_s=timeout_s, default=default)


def gate_reason(gate: ClusterApprovalGate | None, step: str, cluster_id: str, instance_type: str, region: str) -> str:
    """Why `step` waits for approval ("" when it goes ahead)."""
    if gate is None or not getattr(gate, step):
        return ""
    if step == CREATE:
        return f"create data-plane cluster {cluster_id} ({instance_type}) in {region}"
    return f"delete data-plane cluster {cluster_id} ({instance_type}): empty, and the region keeps enough capacity"


def after_denied_deletion(record: ClusterRecord, serving: ClusterPhase) -> ClusterRecord:
    """The region's record once a cluster's deletion was denied: serving again, never removed until
    an operator approves its deletion."""
    return record.model_copy(
        update={"phase": serving, "delete_sent": False, "deletion_blocked": True, "deletion_approved": False}
    )
