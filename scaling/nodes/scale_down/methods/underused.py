"""Underused (Cluster Autoscaler): requested/allocatable, the larger of the cpu and memory ratios, below
the group's threshold. It must stay so, untainted, for its unneeded time before it is selected, and then
goes at once: pods that arrive meanwhile can still use it."""

from __future__ import annotations

from scaling.kube.drain import Blocker
from scaling.nodes.disruption.models import ConsolidationPolicy, DisruptionReason
from scaling.nodes.models import ScaleDownSettings
from scaling.nodes.scale_down.methods.base import Candidate, Wait
from scaling.nodes.scale_down.models import NodeState

UTILIZED = "NodeUtilized"
WHEN_EMPTY = "ConsolidationPolicyWhenEmpty"


class Underused:
    kind: str = NodeState.UNDERUSED.value
    wait = Wait.BEFORE_SELECTION
    require_empty = False
    replaces = False
    min_saving: float | None = None
    reason: DisruptionReason | None = DisruptionReason.UNDERUTILIZED

    def is_candidate(self, candidate: Candidate, settings: ScaleDownSettings) -> bool:
        if settings.policy is ConsolidationPolicy.WHEN_EMPTY:
            return False  # an empty node is the Empty method's
        # An empty node qualifies whatever its DaemonSets use: there is nothing to move.
        return candidate.empty or candidate.utilization < settings.utilization_threshold

    def why_not(self, candidate: Candidate, settings: ScaleDownSettings) -> Blocker:
        if settings.policy is ConsolidationPolicy.WHEN_EMPTY:
            return Blocker(code=WHEN_EMPTY, message=f"node {candidate.node.name}'s group consolidates only empty nodes")
        return Blocker(
            code=UTILIZED,
            message=f"node {candidate.node.name} is at or above {settings.utilization_threshold:.0%} utilization",
        )

    def cancels(self, blockers: list[Blocker]) -> list[Blocker]:
        return list(blockers)


UNDERUSED = Underused()
