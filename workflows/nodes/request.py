"""NodeRequest `nodes/<cluster>/request/<id>`: one node's request (seed 004, steps 5-7).

Its state machine (Pending → Provisioning → Ready | Unmet | Replanned, pools in order, approval
gates) is workflows.nodes.request_machine, which NodeRequestBatch runs once per member. This
workflow reports each change to its loop with a signal of its own, and keeps its final state
queryable for a TTL. The loop starts batches now; a NodeRequest is what runs recorded before
them started, and what an operator may start by hand.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from temporalio import workflow
from temporalio.exceptions import FailureError

with workflow.unsafe.imports_passed_through():
    from scaling.nodes import contracts
    from scaling.nodes.contracts import WaitReadyInput
    from scaling.nodes.scale_up.requests import NODE_REQUEST_WORKFLOW, NodeRequestInput, NodeRequestStatus
    from scaling.nodes.summaries import request_details
    from workflows.nodes import metrics
    from workflows.nodes.request_machine import Decision, MachineApprovals, RequestMachine, wait_alone
    from workflows.search import request_attributes


# Outside the sandbox: the sandbox runs a workflow's module again for every new instance, on the
# worker's event loop, and a burst starts hundreds of NodeRequests at once (10,000 pods: 323).
# Replaying a NodeRequest's recorded history costs 17-21 ms of CPU sandboxed and 7-10 ms not,
# and the instances are created one after another, so a burst's last requests waited seconds
# for their first activation. Everything it imports is passed through the sandbox anyway, it
# reads time only through workflow.now(), and the replay tests keep it deterministic.
@workflow.defn(name=NODE_REQUEST_WORKFLOW, sandboxed=False)
class NodeRequestWorkflow(MachineApprovals):  # approve/deny: the scale-up it waits for (denied: Unmet)
    @workflow.init
    def __init__(self, inp: NodeRequestInput) -> None:
        self.inp = inp
        self.decision = Decision()  # one approval covers the whole request
        self.machine = RequestMachine(inp, self, self.decision)
        self.machines = [self.machine]  # MachineApprovals' view: the request's status.approval is its decision's state
        self.sending: asyncio.Task[None] | None = None  # the last report sent beside other work

    @property
    def status(self) -> NodeRequestStatus:
        return self.machine.status

    # -- steering ------------------------------------------------------------------------
    @workflow.query
    def describe(self) -> NodeRequestStatus:
        return self.status

    @workflow.signal
    def cancel(self, reason: str = "cancelled by operator") -> None:
        self.machine.cancel(reason)

    # -- the state machine (workflows.nodes.request_machine) ---------------------------
    @workflow.run
    async def run(self, inp: NodeRequestInput) -> NodeRequestStatus:
        # No first report: the loop recorded the request Pending when it started it (in a
        # 30,000-pod burst that report was a third of the loop's signals, arriving as it planned).
        self._show()
        await self.machine.run()
        metrics.request_finished(inp.cluster, self.status)
        # The final report goes out beside the TTL timer, in the same workflow task.
        self._send()
        # Keep the final record visible (query, Web UI) for the TTL, then finish (seed 004 step 7).
        await workflow.sleep(timedelta(seconds=inp.ttl_s))
        await self._delivered()
        return self.status

    # -- RequestOwner ----------------------------------------------------------------------
    async def publish(self, machine: RequestMachine) -> None:
        await self._publish()

    async def provisioning(self, machine: RequestMachine) -> None:
        await self._delivered()  # the wait reports it
        self._show()

    async def wait_ready(self, machine: RequestMachine, wait: WaitReadyInput) -> bool:
        # The wait reports Provisioning to the loop itself.
        wait.report_to = self.inp.parent_workflow_id or ""
        wait.report = machine.report() if self.inp.parent_workflow_id else None
        return await wait_alone(machine, wait)

    # -- reports ---------------------------------------------------------------------------
    def _show(self) -> None:
        """The status in the Web UI: its details and search attributes."""
        inp = self.inp
        workflow.set_current_details(request_details(self.status, inp.ttl_s))  # no command: not in history
        if inp.use_search_attributes:
            workflow.upsert_search_attributes(request_attributes(inp.cluster, self.status))

    async def _publish(self) -> None:
        """Tell the autoscaler (by workflow id, so it reaches its latest run) and the Web UI."""
        await self._delivered()
        self._show()
        if self.inp.parent_workflow_id:
            await self._signal(self.inp.parent_workflow_id, self.machine.report())

    def _send(self) -> None:
        """`_publish` without waiting for the delivery: the signal goes out in the same workflow
        task as the command that follows. The status is copied now, and it leaves
        after the report before it was delivered."""
        self._show()
        if not self.inp.parent_workflow_id:
            return
        report, before, parent = self.machine.report(), self.sending, self.inp.parent_workflow_id

        async def send() -> None:
            if before is not None:
                await before
            await self._signal(parent, report)

        self.sending = asyncio.create_task(send())

    async def _delivered(self) -> None:
        if self.sending is not None:
            await self.sending
            self.sending = None

    async def _signal(self, parent_workflow_id: str, report: NodeRequestStatus) -> None:
        try:
            await workflow.get_external_workflow_handle(parent_workflow_id).signal(contracts.REQUEST_CHANGED, report)
        except FailureError:
            # The autoscaler is gone (terminated); the request still finishes on its own.
            workflow.logger.warning("autoscaler %s did not take the update", parent_workflow_id)
