"""What each group's budgets still allow while one evaluation picks several disruptions.

Counts as Karpenter's BuildDisruptionBudgetMapping does (kubernetes-sigs/karpenter
pkg/controllers/disruption/helpers.go): a group's nodes are its managed nodes that are Ready or
being disrupted; being disrupted is being removed or replaced by growth (``in_progress``: the
loop's running NodeScaleDown and NodeReplacement workflows, whichever worker runs them) or carrying
the deletion taint. Karpenter also counts an initialized NotReady node as disrupting; growth cannot
tell a node still joining from a broken one, so a NotReady node it does not disrupt counts in
neither.

A window that opens within DECISION_LEAD_S of the evaluation already holds what it would hold: the
loop starts what it chose a workflow task (seconds, under load) after it chose, as Karpenter
re-checks budgets before it executes a command (pkg/controllers/disruption/validation.go). The
consolidation bench once started a replacement 70 ms into a window it was chosen 10 ms before.
"""

from __future__ import annotations

from collections.abc import Collection

from scaling.kube.drain import Blocker, marked_for_deletion
from scaling.kube.models import NodeInfo
from scaling.nodes.disruption.budgets import BUDGET_EXHAUSTED, UNLIMITED, allowed_now
from scaling.nodes.disruption.models import Disruption, DisruptionReason
from scaling.nodes.models import LABEL_GROUP, NodeGroup

DECISION_LEAD_S = 10.0  # under Karpenter's shortest window (a duration is whole minutes)


class BudgetLedger:
    def __init__(
        self, nodes: list[NodeInfo], groups: list[NodeGroup], in_progress: Collection[str], now: float
    ) -> None:
        self.now = now
        self.disruption: dict[str, Disruption] = {g.name: g.disruption for g in groups if g.disruption.budgets}
        self.total: dict[str, int] = {}
        self.disrupting: dict[str, int] = {}
        for n in nodes:
            group = n.labels.get(LABEL_GROUP)
            if group not in self.disruption:
                continue
            leaving = n.name in in_progress or marked_for_deletion(n)
            if n.ready or leaving:
                self.total[group] = self.total.get(group, 0) + 1
            if leaving:
                self.disrupting[group] = self.disrupting.get(group, 0) + 1

    def left(self, group: str, reason: DisruptionReason) -> int:
        d = self.disruption.get(group)
        if d is None:
            return UNLIMITED
        total, disrupting = self.total.get(group, 0), self.disrupting.get(group, 0)
        return min(allowed_now(d, total, disrupting, reason, at) for at in (self.now, self.now + DECISION_LEAD_S))

    def blocker(self, group: str, reason: DisruptionReason | None) -> Blocker | None:
        """Why one more ``reason`` disruption of ``group`` must wait; None when its budgets allow it.
        A disruption without a reason (an operator's remove-now) is never held."""
        if reason is None or self.left(group, reason) > 0:
            return None
        return Blocker(
            code=BUDGET_EXHAUSTED,
            message=f"group {group}'s disruption budget for {reason.value} allows no more nodes now "
            f"({self.disrupting.get(group, 0)} of {self.total.get(group, 0)} being disrupted)",
        )

    def count(self, group: str) -> None:
        """One more of ``group``'s nodes is being disrupted (chosen in this evaluation)."""
        if group in self.disruption:
            self.disrupting[group] = self.disrupting.get(group, 0) + 1
