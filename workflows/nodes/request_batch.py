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
from temporalio.exceptions import ActivityError, FailureError

with workflow.unsafe.imports_passed_through():
    from scaling.nodes import contracts
    from scaling.nodes.contracts import NodeWait, WaitNodesReadyInput, WaitReadyInput
    from scaling.nodes.scale_up.requests import (
        NODE_REQUEST_BATCH_WORKFLOW,
        CancelMembers,
        NodeRequestBatchInput,
        NodeRequestBatchStatus,
        NodeRequestStatus,
        least_advanced,
        queue_report,
    )
    from scaling.nodes.summaries import batch_details
    from workflows.nodes import metrics
    from workflows.nodes.activity_options import NODE_ACTIVITIES
    from workflows.nodes.request_machine import KUBE_RETRY, MachineApprovals, RequestMachine, SharedDecision
    from workflows.search import request_attributes

# A readiness round's longest wait without news: nodes created meanwhile join the next round,
# and a round returns at once when any node settles.
ROUND_S = 10.0


# Outside the sandbox, as NodeRequest (see there): a burst starts many at once.
@workflow.defn(name=NODE_REQUEST_BATCH_WORKFLOW, sandboxed=False)
class NodeRequestBatchWorkflow(MachineApprovals):  # approve/deny: every waiting member (denied: Unmet)
    @workflow.init
    def __init__(self, inp: NodeRequestBatchInput) -> None:
        self.inp = inp
        self.decision = SharedDecision()
        self.machines = [RequestMachine(inp.member_input(i), self, self.decision) for i in range(len(inp.members))]
        self.outbox: list[NodeRequestStatus] = []  # reports not yet sent to the loop
        self.sender: asyncio.Task[None] | None = None
        self.attributes: list | None = None  # the search attributes last set
        self.waiting: dict[str, NodeWait] = {}  # node name -> its member's wait for Ready
        self.settled: dict[str, bool] = {}  # node name -> Ready (labelled) or timed out
        self.rounds: asyncio.Task[None] | None = None

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
        await machine.run()
        metrics.request_finished(self.inp.cluster, machine.status)
        self._changed(machine)

    # -- RequestOwner ----------------------------------------------------------------------
    async def publish(self, machine: RequestMachine) -> None:
        self._changed(machine)

    async def provisioning(self, machine: RequestMachine) -> None:
        self._changed(machine)

    async def wait_ready(self, machine: RequestMachine, wait: WaitReadyInput) -> bool:
        """The member's node joins the batch's readiness rounds (the sender reports Provisioning)."""
        node = wait.node_name
        deadline = workflow.now() + timedelta(seconds=wait.timeout_s)
        self.waiting[node] = NodeWait(node_name=node, labels=wait.labels, deadline=deadline.timestamp())
        if self.rounds is None or self.rounds.done():
            self.rounds = asyncio.create_task(self._readiness_rounds())
        await workflow.wait_condition(lambda: node in self.settled or machine.cancel_requested)
        self.waiting.pop(node, None)  # cancelled: a round still under way may name it; ignored
        return self.settled.pop(node, False)

    async def _readiness_rounds(self) -> None:
        """One wait_nodes_ready activity at a time for every node still waiting (a NodeRequest
        each had its own: at 30,000 pods ~970 activities heartbeating at once). A round ends as
        soon as a node is settled; nodes created meanwhile join the next."""
        while self.waiting:
            settled = await self._readiness_round(list(self.waiting.values()))
            if settled is None:
                return
            for node, ready in settled.items():
                if self.waiting.pop(node, None) is not None:
                    self.settled[node] = ready

    async def _readiness_round(self, nodes: list[NodeWait]) -> dict[str, bool] | None:
        """What one round settled; None when every waiting member was cancelled meanwhile."""
        inp = self.inp
        round_ = workflow.start_activity(
            contracts.WAIT_NODES_READY,
            WaitNodesReadyInput(cluster=inp.cluster, nodes=nodes, poll_s=inp.readiness_poll_s, round_s=ROUND_S),
            result_type=dict[str, bool],
            **NODE_ACTIVITIES[contracts.WAIT_NODES_READY].timeouts(timedelta(seconds=ROUND_S + 60)),
            retry_policy=KUBE_RETRY,
        )
        await workflow.wait_condition(lambda: round_.done() or not self.waiting)
        if round_.done():
            return round_.result()
        round_.cancel()
        try:
            await round_
        except (ActivityError, asyncio.CancelledError):
            pass
        return None

    # -- reports ---------------------------------------------------------------------------
    def _changed(self, machine: RequestMachine) -> None:
        """Queue the member's report for the loop, and the Web UI's view of the batch."""
        self._show()
        if not self.inp.parent_workflow_id:
            return
        queue_report(self.outbox, machine.report())
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
