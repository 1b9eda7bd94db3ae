"""Drifted (Karpenter's drift): a node made from an earlier spec of its pool, or from a pool its group no
longer lists (scaling.nodes.disruption.drift). It goes at once, within the Drifted budgets, through a
NodeReplacement: its successor from the current spec is Ready before it is cordoned and drained."""

from __future__ import annotations

from scaling.kube.drain import Blocker
from scaling.nodes.disruption.drift import drift_message
from scaling.nodes.disruption.models import DisruptionReason
from scaling.nodes.models import ScaleDownSettings
from scaling.nodes.scale_down.methods.base import Candidate, Wait
from scaling.nodes.scale_down.methods.replacing import replacement_cancels
from scaling.nodes.scale_down.models import NodeState

NOT_DRIFTED = "NodeNotDrifted"


class Drifted:
    kind: str = NodeState.DRIFTED.value
    wait = Wait.NONE
    require_empty = False
    reason: DisruptionReason | None = DisruptionReason.DRIFTED
    replaces = True
    min_saving: float | None = None

    def is_candidate(self, candidate: Candidate, settings: ScaleDownSettings) -> bool:
        return drift_message(candidate.node, candidate.group) is not None

    def why_not(self, candidate: Candidate, settings: ScaleDownSettings) -> Blocker:
        return Blocker(code=NOT_DRIFTED, message=f"node {candidate.node.name} matches its pool's spec")

    def cancels(self, blockers: list[Blocker]) -> list[Blocker]:
        return replacement_cancels(blockers)


DRIFTED = Drifted()
