"""NodeRequestBatch `nodes/<cluster>/request/<id>`: a batch of identical node requests in one
workflow (scaling.nodes.scale_up.batches says which nodes share one, and why).

Each member runs NodeRequest's state machine (workflows.nodes.request_machine) with its own id,
member_id(batch, index): its creates are keyed by that id and the attempt, so node names, labels
and idempotency at the provider are per node as with a NodeRequest each. One approval decision
covers the batch. Members' changes go to the loop as one `requests_changed` signal at a time,
carrying whatever changed while the one before was delivered: a batch of 50 sends a handful of
signals where 50 NodeRequests sent ~100. The final records stay queryable for a TTL.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from temporalio import workflow
from temporalio.exceptions import FailureError

with workflow.unsafe.imports_passed_through():
    from scaling.approvals import decision_refused
    from scaling.nodes import contracts
    from scaling.nodes.contracts import WaitReadyInput
    from scaling.nodes.models import RequestPhase
    from scaling.nodes.scale_up.requests import (
        NODE_REQUEST_BATCH_WORKFLOW,
        CancelMembers,
        NodeRequestBatchInput,
        NodeRequestBatchStatus,
        NodeRequestStatus,
        least_advanced,
    )
    from scaling.nodes.summaries import batch_details
    from workflows.nodes import metrics
    from workflows.nodes.request_machine import RequestMachine, SharedDecision
    from workflows.search import request_attributes


# Outside the sandbox, as NodeRequest (see there): a burst starts many at once.
@workflow.defn(name=NODE_REQUEST_BATCH_WORKFLOW, sandboxed=False)
class NodeRequestBatchWorkflow:
    @workflow.init
    def __init__(self, inp: NodeRequestBatchInput) -> None:
        self.inp = inp
        self.decision = SharedDecision()
        self.machines = [RequestMachine(inp.member_input(i), self, self.decision) for i in range(len(inp.members))]
        self.outbox: list[NodeRequestStatus] = []  # reports not yet sent to the loop
        self.sender: asyncio.Task[None] | None = None
        self.attributes: list | None = None  # the search attributes last set

    # -- steering ------------------------------------------------------------------------
    @workflow.query
    def describe(self) -> NodeRequestBatchStatus:
        return NodeRequestBatchStatus(
            id=self.inp.id,
            cluster=self.inp.cluster,
            group=self.inp.group,
            members=[m.status for m in self.machines],
            approval=self.decision.state,
        )

    @workflow.signal
    def cancel(self, inp: CancelMembers) -> None:
        """Cancel one member (`index`) or every member still under way; a final one stays as it is."""
        if inp.index is not None and not 0 <= inp.index < len(self.machines):
            workflow.logger.warning("cancel: no member %s in %s", inp.index, self.inp.id)
            return
        chosen = self.machines if inp.index is None else [self.machines[inp.index]]
        for m in chosen:
            if not m.status.final:
                m.cancel(inp.reason)

    @workflow.update
    def approve(self, note: str = "") -> str:
        """Go ahead with the scale-up the batch waits for (`growth nodes approve ID`)."""
        return self.decision.decide(True, "operator", note)

    @approve.validator
    def _validate_approve(self, note: str = "") -> None:
        self._validate_decision()

    @workflow.update
    def deny(self, note: str = "") -> str:
        """Refuse it: every waiting member ends Unmet (Denied) (`growth nodes deny ID`)."""
        return self.decision.decide(False, "operator", note)

    @deny.validator
    def _validate_deny(self, note: str = "") -> None:
        self._validate_decision()

    def _validate_decision(self) -> None:
        waiting = any(m.status.phase == RequestPhase.AWAITING_APPROVAL for m in self.machines)
        refused = decision_refused(
            waiting and not self.decision.decided, self.decision.state, workflow.info().workflow_id
        )
        if refused:
            raise ValueError(refused)

    # -- the members -----------------------------------------------------------------------
    @workflow.run
    async def run(self, inp: NodeRequestBatchInput) -> NodeRequestBatchStatus:
        self._show()
        await asyncio.gather(*(self._member(m) for m in self.machines))
        # Keep the final records visible (query, Web UI) for the TTL, then finish (seed 004 step 7).
        await workflow.sleep(timedelta(seconds=inp.ttl_s))
        await self._sent()
        return self.describe()

    async def _member(self, machine: RequestMachine) -> None:
        await machine.run(gates=True)
        metrics.request_finished(self.inp.cluster, machine.status)
        self._changed(machine)

    # -- RequestOwner ----------------------------------------------------------------------
    async def publish(self, machine: RequestMachine) -> None:
        self._changed(machine)

    async def provisioning(self, machine: RequestMachine) -> None:
        self._changed(machine)

    def prepare_wait(self, machine: RequestMachine, wait: WaitReadyInput) -> None:
        pass  # the wait only labels the node: the batch's sender reports Provisioning

    # -- reports ---------------------------------------------------------------------------
    def _changed(self, machine: RequestMachine) -> None:
        """Queue the member's report for the loop, and the Web UI's view of the batch."""
        self._show()
        if not self.inp.parent_workflow_id:
            return
        report = machine.report()
        queued = next((i for i in range(len(self.outbox) - 1, -1, -1) if self.outbox[i].id == report.id), None)
        # A queued report of the same attempt is replaced: the loop loses no attempt it counts
        # (scaling.nodes.loop.newly_reported_attempt reads the last one of each report).
        if queued is not None and len(self.outbox[queued].attempts) == len(report.attempts):
            self.outbox[queued] = report
        else:
            self.outbox.append(report)
        if self.sender is None or self.sender.done():
            self.sender = asyncio.create_task(self._send(self.inp.parent_workflow_id))

    async def _send(self, parent: str) -> None:
        """One signal in flight at a time (so the loop folds reports in order), each carrying
        everything queued since the last one left."""
        while self.outbox:
            reports, self.outbox = self.outbox, []
            try:
                await workflow.get_external_workflow_handle(parent).signal(contracts.REQUESTS_CHANGED, reports)
            except FailureError:
                # The autoscaler is gone (terminated); the batch still finishes on its own.
                workflow.logger.warning("autoscaler %s did not take the update", parent)

    async def _sent(self) -> None:
        while self.sender is not None and not self.sender.done():
            await self.sender

    def _show(self) -> None:
        """The batch in the Web UI: its details, and search attributes of its least advanced member."""
        status = self.describe()
        workflow.set_current_details(batch_details(status, self.inp.ttl_s))  # no command: not in history
        lagging = least_advanced(status.members)
        if not self.inp.use_search_attributes or lagging is None:
            return
        attributes = request_attributes(self.inp.cluster, lagging)
        if attributes != self.attributes:  # a command each: only when they change
            self.attributes = attributes
            workflow.upsert_search_attributes(attributes)
