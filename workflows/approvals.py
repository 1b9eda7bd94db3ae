"""The `approve`/`deny` updates of every gated workflow (NodeRequest, NodeRequestBatch,
DataPlaneCluster, ComponentAutoscaler) and their validators, written once.

A gated workflow mixes `ApprovalUpdates` in and says why a decision is refused
(`_decision_refused`, "" when it is taken: scaling.approvals.decision_refused words it) and what a
decision does (`_decided`). The argument is the update's as sent: an operator's note (nodes,
fleet: `growth nodes|fleet approve ID --note`) or a DecisionRequest (components: the group's id
and a note), so the names, arguments and refusals are those the recorded runs used.
"""

from __future__ import annotations

from typing import Any

from temporalio import workflow


class ApprovalUpdates:
    @workflow.update
    def approve(self, arg: Any = "") -> str:
        """Go ahead with the gated step (`growth <loop> approve ID`)."""
        return self._decided(True, arg)

    @approve.validator
    def _validate_approve(self, arg: Any = "") -> None:
        self._refuse(arg)

    @workflow.update
    def deny(self, arg: Any = "") -> str:
        """Refuse the gated step (`growth <loop> deny ID`)."""
        return self._decided(False, arg)

    @deny.validator
    def _validate_deny(self, arg: Any = "") -> None:
        self._refuse(arg)

    def _refuse(self, arg: Any) -> None:
        refused = self._decision_refused(arg)
        if refused:
            raise ValueError(refused)

    def _decision_refused(self, arg: Any) -> str:
        raise NotImplementedError

    def _decided(self, approve: bool, arg: Any) -> str:
        raise NotImplementedError
