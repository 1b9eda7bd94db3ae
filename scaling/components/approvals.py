"""Approval gate on creating a heterogeneous group (growth's own setting, `approve_group_create`;
tidb-operator's TidbClusterAutoScaler has no such field, and its CRD stays as upstream has it).

A new group is the one step that adds a whole TidbCluster (and its nodes' cost). When the plan
wants one, the loop records a wait under the group's name (`auto-<hash>`, the same for the same
shape every round) and applies the round's other changes: nothing else waits behind it. Each
round the same plan finds the wait: approved, the group is created; still open after
`approval_timeout_s`, the default applies (the loop's sleep ends at that deadline: a durable
timer). Denied, the group is not asked for again for `approval_timeout_s` after the decision;
then a plan that still wants it asks again. A wait the plan no longer wants is dropped.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Literal

from scaling.approvals import ApprovalState, Default, applies_default

Verdict = Literal["go", "wait", "skip"]


def create_verdict(
    entry: ApprovalState | None, reason: str, now: datetime, timeout_s: float, default: Default
) -> tuple[Verdict, ApprovalState, bool]:
    """What to do with a planned group create this round: go (approved), wait (asked, no
    decision yet) or skip (denied lately); the entry to keep, and whether the wait is new."""
    if entry is None or (entry.decision == "denied" and now >= entry.deadline):
        fresh = ApprovalState(
            reason=reason, step="create", deadline=now + timedelta(seconds=timeout_s), default=default
        )
        return "wait", fresh, True
    if not entry.decision and now >= entry.deadline:
        entry = decided(
            entry, applies_default(entry.default), "timeout", f"no decision within {timeout_s:g} s", now, timeout_s
        )
    if entry.decision == "approved":
        return "go", entry, False
    if entry.decision == "denied":
        return "skip", entry, False
    return "wait", entry, False


def decided(entry: ApprovalState, approve: bool, by: str, note: str, now: datetime, timeout_s: float) -> ApprovalState:
    """The entry after a decision; a denial's deadline becomes when the plan may ask again."""
    update: dict = {"decision": "approved" if approve else "denied", "by": by, "note": note}
    if not approve:
        update["deadline"] = now + timedelta(seconds=timeout_s)
    return entry.model_copy(update=update)


def next_deadline(approvals: dict[str, ApprovalState]) -> datetime | None:
    """When the loop must look again: the earliest open wait's default."""
    open_ = [a.deadline for a in approvals.values() if not a.decision]
    return min(open_) if open_ else None
