"""RemovalMethod: one way a node leaves the cluster (Empty, Underused, an operator's Manual remove-now),
as Karpenter's disruption Method is one way a node is disrupted. The callers walk the methods instead of
branching on a kind, so a fourth kind is one new file beside these.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from functools import cached_property
from typing import Protocol

from scaling.kube.drain import Blocker
from scaling.kube.models import NodeInfo, PodInfo
from scaling.nodes.disruption.models import DisruptionReason
from scaling.nodes.models import NodeGroup, ScaleDownSettings
from scaling.nodes.scale_down.checks import is_empty, utilization


class Wait(str, Enum):
    """Where a method's unneeded time is spent, relative to the node's selection."""

    BEFORE_SELECTION = "UntaintedBeforeSelection"  # unneeded untainted for the time, then goes at once
    AFTER_SELECTION = "TaintedAfterSelection"  # selected at once, then tainted on a durable timer
    NONE = "None"  # the operator decided: it goes at once


@dataclass
class Candidate:
    """A node with its pods (all pods, or only the node's own: both checks pick the node's). Emptiness
    and utilization are worked out once, when a method first asks: most nodes of a busy cluster are
    utilized and never reach a second method."""

    node: NodeInfo
    pods: list[PodInfo]
    group: NodeGroup | None = None  # its group's spec (drift and expiry read it)
    now: float = 0.0  # the evaluation's (workflow) time

    @cached_property
    def empty(self) -> bool:
        return is_empty(self.node, self.pods)

    @cached_property
    def utilization(self) -> float:
        return utilization(self.node, self.pods)


class RemovalMethod(Protocol):
    kind: str  # NodeScaleDownInput.kind; a NodeState value for the methods the plan walks
    wait: Wait
    require_empty: bool  # its re-check refuses any pod to evict (NodeRemovalCheckInput.require_empty)
    # The budget reason it draws from (scaling.nodes.disruption); None: not voluntary, never held.
    reason: DisruptionReason | None
    # A NodeReplacement makes the node's successor Ready before it is drained (drift, expiry): its
    # pods need no room on the other nodes, and minNodes holds (the pool keeps its size).
    replaces: bool
    # What its replacement must save, as a share of the node's price per hour (None: no price rule).
    min_saving: float | None

    def is_candidate(self, candidate: Candidate, settings: ScaleDownSettings) -> bool:
        """Whether the node qualifies for this kind of removal (blockers are checked apart)."""
        ...

    def why_not(self, candidate: Candidate, settings: ScaleDownSettings) -> Blocker:
        """The blocker a re-check reports for a node that no longer qualifies."""
        ...

    def cancels(self, blockers: list[Blocker]) -> list[Blocker]:
        """Of a re-check's blockers, those that cancel a removal of this kind."""
        ...
