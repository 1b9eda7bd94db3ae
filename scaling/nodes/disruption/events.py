"""The Events the loop writes about disruption it holds back (Karpenter's DisruptionBlocked)."""

from __future__ import annotations

from scaling.nodes.contracts import NodeEvent
from scaling.nodes.disruption.do_not_disrupt import DO_NOT_DISRUPT, EVENT_REASON
from scaling.nodes.scale_down.removals import CandidateState


def newly_blocked(before: dict[str, CandidateState], after: dict[str, CandidateState]) -> list[NodeEvent]:
    """An Event for each node that do-not-disrupt holds now and did not in the last evaluation
    (one Event per change, not one per loop)."""
    return [
        NodeEvent(node=name, reason=EVENT_REASON, message=c.message, type="Normal")
        for name, c in sorted(after.items())
        if c.reason == DO_NOT_DISRUPT and (name not in before or before[name].reason != DO_NOT_DISRUPT)
    ]
