"""Consolidated (Karpenter's single-node consolidation): an underused node whose pods fit on no other node
is replaced by a cheaper one that holds them. Only groups that write Karpenter's
consolidationPolicy: WhenEmptyOrUnderutilized get it (growth's default stays Cluster Autoscaler's).
It qualifies as Underused does (below the group's utilization threshold for its unneeded time) and is
walked after it: a node whose pods fit elsewhere is simply removed. Its NodeReplacement plans the
successor with the scale-up planner and goes on only when it saves at least MIN_SAVING of the node's
price per hour; else it ends NotWorthIt, buying nothing, and the node's unneeded timer starts again.
"""

from __future__ import annotations

from scaling.kube.drain import Blocker
from scaling.nodes.disruption.models import ConsolidationPolicy, DisruptionReason
from scaling.nodes.models import ScaleDownSettings
from scaling.nodes.scale_down.methods.base import Candidate, Wait
from scaling.nodes.scale_down.methods.replacing import replacement_cancels
from scaling.nodes.scale_down.methods.underused import UNDERUSED
from scaling.nodes.scale_down.models import NodeState

MIN_SAVING = 0.10  # a successor must cost at most 90 % of the node


class Consolidated:
    kind: str = NodeState.CONSOLIDATED.value
    wait = Wait.BEFORE_SELECTION
    require_empty = False
    reason: DisruptionReason | None = DisruptionReason.UNDERUTILIZED
    replaces = True
    min_saving: float | None = MIN_SAVING

    def is_candidate(self, candidate: Candidate, settings: ScaleDownSettings) -> bool:
        return (
            settings.policy is ConsolidationPolicy.WHEN_EMPTY_OR_UNDERUTILIZED
            and not candidate.empty
            and UNDERUSED.is_candidate(candidate, settings)
        )

    def why_not(self, candidate: Candidate, settings: ScaleDownSettings) -> Blocker:
        return UNDERUSED.why_not(candidate, settings)

    def cancels(self, blockers: list[Blocker]) -> list[Blocker]:
        return replacement_cancels(blockers)


CONSOLIDATED = Consolidated()
