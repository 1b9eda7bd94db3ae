"""Approval gates, what every loop shares: a gated step waits durably (phase AwaitingApproval)
for an operator's approve/deny, or until its timeout applies the default. Each loop's own rules
(which steps are gated) live beside it: scaling.nodes.scale_up.approvals, scaling.fleet.approvals."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel

from scaling.text import too_long

Default = Literal["approve", "deny"]
# The GrowthPhase search attribute's value (and a NodeRequest's phase) while a step waits.
AWAITING_APPROVAL = "AwaitingApproval"


class ApprovalState(BaseModel):
    """A gated step's wait for approval, in its workflow's status (and so in `growth … approvals`)."""

    reason: str
    step: str  # what waits: a NodeRequest's pool, a cluster's "create" or "delete"
    deadline: datetime
    default: Default
    decision: Literal["", "approved", "denied"] = ""
    by: str = ""  # "operator" or "timeout"
    note: str = ""


def applies_default(default: Default) -> bool:
    """Whether a gate whose timeout passed without a decision is approved."""
    return default == "approve"


def decision_refused(awaiting: bool, approval: ApprovalState | None, what: str, note: object = "") -> str:
    """Why an approve/deny is refused ("" when it is taken): only a wait still open is decided,
    with a note that is text (or none) of bounded length."""
    if note is not None and not isinstance(note, str):
        return f"note: a string, got {type(note).__name__}"
    note = note or ""
    if too_long("note", note):
        return too_long("note", note)
    if approval is not None and approval.decision:
        return f"id: {what} was already {approval.decision} (by {approval.by})"
    if not awaiting:
        return f"id: {what} is not awaiting approval"
    return ""
