"""Expired (Karpenter's expireAfter): a node older than its group's spec.disruption.expireAfter. Karpenter v1
expires forcefully, outside budgets; growth replaces it as it replaces a drifted node: within the
Expired budgets, held by do-not-disrupt, its successor Ready before it is drained."""

from __future__ import annotations

from scaling.kube.drain import Blocker
from scaling.nodes.disruption.drift import expiry_message
from scaling.nodes.disruption.models import DisruptionReason
from scaling.nodes.models import ScaleDownSettings
from scaling.nodes.scale_down.methods.base import Candidate, Wait
from scaling.nodes.scale_down.methods.replacing import replacement_cancels
from scaling.nodes.scale_down.models import NodeState

NOT_EXPIRED = "NodeNotExpired"


class Expired:
    kind: str = NodeState.EXPIRED.value
    wait = Wait.NONE
    require_empty = False
    reason: DisruptionReason | None = DisruptionReason.EXPIRED
    replaces = True
    min_saving: float | None = None

    def is_candidate(self, candidate: Candidate, settings: ScaleDownSettings) -> bool:
        return expiry_message(candidate.node, candidate.group, candidate.now) is not None

    def why_not(self, candidate: Candidate, settings: ScaleDownSettings) -> Blocker:
        return Blocker(code=NOT_EXPIRED, message=f"node {candidate.node.name} has not expired")

    def cancels(self, blockers: list[Blocker]) -> list[Blocker]:
        return replacement_cancels(blockers)


EXPIRED = Expired()
