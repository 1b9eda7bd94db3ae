"""NodeRequest `nodes/<cluster>/request/<id>`: Pending → Provisioning → Ready | Unmet | Replanned (seed 004, steps 5-7).

Tries its candidate pools in order. A provider with no capacity or quota moves it to the next
pool, or, for a request the NodeAutoscaler started, ends it Replanned: the loop plans its pods
again, onto the next pool and packed for it (capacity memory, scaling/nodes/scale_up/capacity.py); a node that is not Ready within the readiness wait is removed and the next pool tried;
after max attempts it is Unmet. Its final state stays queryable for a TTL.

A gated request (scaling.nodes.scale_up.approvals) waits in AwaitingApproval before trying a gated pool,
on a durable timer, until the `approve`/`deny` update or the timeout's default decides.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ChildWorkflowError, FailureError

with workflow.unsafe.imports_passed_through():
    from scaling.approvals import ApprovalState, applies_default, decision_refused
    from scaling.nodes import contracts
    from scaling.nodes.contracts import (
        CreateNodeInput,
        CreateNodeResult,
        DeleteNodeInput,
        LabelNodeInput,
        WaitReadyInput,
    )
    from scaling.nodes.models import Attempt, AttemptResult, Pool, RequestPhase
    from scaling.nodes.scale_up.approvals import waits_for
    from scaling.nodes.scale_up.capacity import hands_back_pods
    from scaling.nodes.scale_up.requests import (
        NODE_REQUEST_WORKFLOW,
        NodeRequestInput,
        NodeRequestStatus,
        attempt_result_of,
        attempts_exhausted,
        failure_message,
        request_labels,
    )
    from scaling.nodes.summaries import request_details
    from workflows.nodes import metrics
    from workflows.nodes.activity_options import NODE_ACTIVITIES
    from workflows.search import request_attributes

PROVIDER_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=30),
    maximum_attempts=5,
    non_retryable_error_types=["InvalidToken", "UnknownProvider"],
)
KUBE_RETRY = RetryPolicy(initial_interval=timedelta(seconds=1), maximum_interval=timedelta(seconds=10))
# Removing a machine must eventually happen: retry without a cap, with backoff.
DELETE_RETRY = RetryPolicy(initial_interval=timedelta(seconds=2), maximum_interval=timedelta(minutes=2))
# workflow.patched id: runs started before approval gates never wait for one (their input has none).
APPROVAL_GATES = "approval-gates"
# Runs that told their loop they were Pending as they began replay so. The loop recorded them
# Pending when it started them; that first report was a third of a burst's signals to the loop,
# arriving while it planned (30,000 pods: ~1,000 at once).
FIRST_REPORT_SKIPPED = "first-report-skipped"
# Runs that took a workflow task for each report's delivery and for a label activity replay so.
# A burst's ~1,000 requests each took 6 workflow tasks up to Ready on the worker's one workflow
# thread, and a request's first task queued behind the others' later ones. Now the readiness
# wait reports Provisioning to the loop and labels the node itself, and the final report goes out
# beside the TTL timer instead of before it: 4 tasks, of which 3 before Ready. A report still
# waits for the last one's delivery, so the loop sees them in order.
FEWER_TASKS = "ready-in-fewer-tasks"


# Outside the sandbox: the sandbox runs a workflow's module again for every new instance, on the
# worker's event loop, and a burst starts hundreds of NodeRequests at once (10,000 pods: 323).
# Replaying a NodeRequest's recorded history costs 17-21 ms of CPU sandboxed and 7-10 ms not,
# and the instances are created one after another, so a burst's last requests waited seconds
# for their first activation. Everything it imports is passed through the sandbox anyway, it
# reads time only through workflow.now(), and the replay tests keep it deterministic.
@workflow.defn(name=NODE_REQUEST_WORKFLOW, sandboxed=False)
class NodeRequestWorkflow:
    @workflow.init
    def __init__(self, inp: NodeRequestInput) -> None:
        # Status from the input here: a cancel or describe in the first activation sees it.
        self.status = NodeRequestStatus(
            id=inp.id,
            group=inp.group,
            requirements=inp.requirements,
            pod_uids=inp.pod_uids,
            pods=inp.pods,
            started_at=workflow.now(),
        )
        if inp.candidates:
            first = inp.candidates[0]
            self.status.current_pool, self.status.server_type, self.status.provider = (
                first.name,
                first.server_type,
                first.provider,
            )
        self.cancel_requested = False
        self.cancel_reason = ""
        self.approved = False  # one approval covers the whole request
        self.decided = False
        self.fewer_tasks = False
        self.sending: asyncio.Task[None] | None = None  # the last report sent beside other work

    # -- steering ------------------------------------------------------------------------
    @workflow.query
    def describe(self) -> NodeRequestStatus:
        return self.status

    @workflow.signal
    def cancel(self, reason: str = "cancelled by operator") -> None:
        self.cancel_requested = True
        self.cancel_reason = reason

    @workflow.update
    def approve(self, note: str = "") -> str:
        """Go ahead with the scale-up this request waits for (`growth nodes approve ID`)."""
        return self._decide(True, "operator", note)

    @approve.validator
    def _validate_approve(self, note: str = "") -> None:
        self._validate_decision()

    @workflow.update
    def deny(self, note: str = "") -> str:
        """Refuse it: the request ends Unmet (Denied) (`growth nodes deny ID`)."""
        return self._decide(False, "operator", note)

    @deny.validator
    def _validate_deny(self, note: str = "") -> None:
        self._validate_decision()

    def _validate_decision(self) -> None:
        refused = decision_refused(
            self.status.phase == RequestPhase.AWAITING_APPROVAL and not self.decided,
            self.status.approval,
            workflow.info().workflow_id,
        )
        if refused:
            raise ValueError(refused)

    def _decide(self, approve: bool, by: str, note: str) -> str:
        approval = self.status.approval
        assert approval is not None
        self.decided, self.approved = True, approve
        approval.decision, approval.by, approval.note = ("approved" if approve else "denied"), by, note
        return f"{workflow.info().workflow_id}: {approval.decision}"

    # -- the state machine ---------------------------------------------------------------
    @workflow.run
    async def run(self, inp: NodeRequestInput) -> NodeRequestStatus:
        gates = workflow.patched(APPROVAL_GATES)
        self.fewer_tasks = workflow.patched(FEWER_TASKS)
        if workflow.patched(FIRST_REPORT_SKIPPED):
            self._show(inp)
        else:
            await self._publish(inp)
        for attempt_no, pool in enumerate(inp.candidates):
            if self.cancel_requested or attempts_exhausted(self.status.attempts, inp.max_attempts):
                break
            if gates and not await self._approved(inp, pool):
                break
            if await self._try_pool(inp, pool, attempt_no):
                break
            last = self.status.attempts[-1]
            if hands_back_pods(last.result, inp.replan_when_unavailable):
                self.status.phase = RequestPhase.REPLANNED
                self.status.message = f"{pool.name}: {last.result.value}; its pods go back to the autoscaler's planner"
                break
        if self.status.phase not in (RequestPhase.READY, RequestPhase.REPLANNED):
            self.status.phase = RequestPhase.UNMET
            self.status.message = self.cancel_reason if self.cancel_requested else self._unmet_reason(inp)
            if self.decided and not self.approved and not self.cancel_requested:
                self.status.message = self._denied_reason()
        self.status.finished_at = workflow.now()
        metrics.request_finished(inp.cluster, self.status)
        if self.fewer_tasks:
            self._send(inp)
        else:
            await self._publish(inp)
        # Keep the final record visible (query, Web UI) for the TTL, then finish (seed 004 step 7).
        await workflow.sleep(timedelta(seconds=inp.ttl_s))
        await self._delivered()
        return self.status

    async def _try_pool(self, inp: NodeRequestInput, pool: Pool, attempt_no: int) -> bool:
        """One attempt on one pool. True when the request is Ready."""
        status = self.status
        assert status is not None
        status.current_pool, status.server_type, status.provider = pool.name, pool.server_type, pool.provider
        self._record(pool, AttemptResult.PENDING)
        labels = {**inp.group_labels, **request_labels(inp.cluster, inp.group, pool, inp.id)}
        try:
            created: CreateNodeResult = await workflow.execute_activity(
                contracts.CREATE_NODE,
                CreateNodeInput(
                    cluster=inp.cluster,
                    request_id=inp.id,
                    attempt=attempt_no,
                    pool=pool,
                    labels=labels,
                    taints=inp.group_taints,
                ),
                result_type=CreateNodeResult,
                **NODE_ACTIVITIES[contracts.CREATE_NODE].timeouts(),
                retry_policy=PROVIDER_RETRY,
            )
        except ActivityError as err:
            self._record(pool, attempt_result_of(None), message=failure_text(err))
            await self._publish(inp)
            return False
        result = attempt_result_of(created.outcome)
        if result != AttemptResult.PROVISIONING:
            self._record(pool, result, message=created.message)
            await self._publish(inp)
            return False

        status.phase = RequestPhase.PROVISIONING
        status.node_name, status.provider_id = created.node_name, created.provider_id
        self._record(pool, AttemptResult.PROVISIONING, node_name=created.node_name)
        if self.fewer_tasks:  # the wait reports it
            await self._delivered()
            self._show(inp)
        else:
            await self._publish(inp)

        ready = await self._wait_ready(inp, created.node_name, labels)
        if ready and self.fewer_tasks:  # the wait labelled the node
            status.phase = RequestPhase.READY
            self._record(pool, AttemptResult.READY, node_name=created.node_name)
            return True
        if ready:
            await workflow.execute_activity(
                contracts.LABEL_NODE,
                LabelNodeInput(cluster=inp.cluster, node_name=created.node_name, labels=labels),
                **NODE_ACTIVITIES[contracts.LABEL_NODE].timeouts(),
                retry_policy=KUBE_RETRY,
            )
            status.phase = RequestPhase.READY
            self._record(pool, AttemptResult.READY, node_name=created.node_name)
            return True

        # Not Ready in time (or cancelled): remove the machine so nothing is left behind.
        await workflow.execute_activity(
            contracts.DELETE_NODE,
            DeleteNodeInput(
                cluster=inp.cluster,
                provider=pool.provider,
                node_name=created.node_name,
                provider_id=created.provider_id,
            ),
            **NODE_ACTIVITIES[contracts.DELETE_NODE].timeouts(),
            retry_policy=DELETE_RETRY,
        )
        result = AttemptResult.CANCELLED if self.cancel_requested else AttemptResult.READINESS_TIMEOUT
        self._record(pool, result, node_name=created.node_name)
        status.phase = RequestPhase.PENDING
        status.node_name = status.provider_id = ""
        await self._publish(inp)
        return False

    async def _approved(self, inp: NodeRequestInput, pool: Pool) -> bool:
        """Whether it may try `pool`: at once when nothing gates it, else once approved. Denied
        (by an operator, or by the timeout's default) records a Denied attempt on the pool."""
        reason = waits_for(inp.approval, pool.name, self.approved)
        if not reason or inp.approval is None:
            return True
        gate, status = inp.approval, self.status
        status.phase = RequestPhase.AWAITING_APPROVAL
        status.current_pool, status.server_type, status.provider = pool.name, pool.server_type, pool.provider
        status.approval = ApprovalState(
            reason=reason,
            step=pool.name,
            deadline=workflow.now() + timedelta(seconds=gate.timeout_s),
            default=gate.default,
        )
        await self._publish(inp)
        try:
            # A durable timer: the default applies after the timeout even across worker restarts.
            await workflow.wait_condition(
                lambda: self.decided or self.cancel_requested, timeout=timedelta(seconds=gate.timeout_s)
            )
        except TimeoutError:
            self._decide(applies_default(gate.default), "timeout", f"no decision within {gate.timeout_s:g} s")
        if self.cancel_requested:
            return False
        status.phase = RequestPhase.PENDING
        if not self.approved:
            self._record(pool, AttemptResult.DENIED, message=self._denied_reason())
            return False
        await self._publish(inp)  # out of AwaitingApproval (search attribute, Web UI) right away
        return True

    def _denied_reason(self) -> str:
        approval = self.status.approval
        if approval is None:
            return "denied"
        note = f": {approval.note}" if approval.note else ""
        return f"Denied by {approval.by}{note} ({approval.reason})"

    async def _wait_ready(self, inp: NodeRequestInput, node_name: str, labels: dict[str, str]) -> bool:
        wait = WaitReadyInput(
            cluster=inp.cluster, node_name=node_name, timeout_s=inp.readiness_timeout_s, poll_s=inp.readiness_poll_s
        )
        if self.fewer_tasks:
            wait.labels, wait.report_to = labels, inp.parent_workflow_id or ""
            wait.report = self._report() if inp.parent_workflow_id else None
        waiting = workflow.start_activity(
            contracts.WAIT_NODE_READY,
            wait,
            result_type=bool,
            **NODE_ACTIVITIES[contracts.WAIT_NODE_READY].timeouts(timedelta(seconds=inp.readiness_timeout_s + 60)),
            retry_policy=KUBE_RETRY,
        )
        await workflow.wait_condition(lambda: self.cancel_requested or waiting.done())
        if not waiting.done():
            waiting.cancel()
            try:
                await waiting
            except (ActivityError, asyncio.CancelledError):
                pass
            return False
        return bool(waiting.result())

    # -- helpers -------------------------------------------------------------------------
    def _record(self, pool: Pool, result: AttemptResult, node_name: str = "", message: str = "") -> None:
        """One entry per pool tried: its result is updated in place as the attempt progresses."""
        entry = Attempt(pool=pool.name, result=result, timestamp=workflow.now(), node_name=node_name, message=message)
        attempts = self.status.attempts
        if (
            attempts
            and attempts[-1].pool == pool.name
            and attempts[-1].result
            in (
                AttemptResult.PENDING,
                AttemptResult.PROVISIONING,
            )
        ):
            attempts[-1] = entry
        else:
            attempts.append(entry)

    def _unmet_reason(self, inp: NodeRequestInput) -> str:
        if not inp.candidates:
            return "no pool can hold the requirements"
        tried = ", ".join(f"{a.pool}: {a.result.value}" for a in self.status.attempts)
        return f"no pool could provide a node ({tried})"

    def _show(self, inp: NodeRequestInput) -> None:
        """The status in the Web UI: its details and search attributes."""
        workflow.set_current_details(request_details(self.status, inp.ttl_s))  # no command: not in history
        if inp.use_search_attributes:
            workflow.upsert_search_attributes(request_attributes(inp.cluster, self.status))

    async def _publish(self, inp: NodeRequestInput) -> None:
        """Tell the autoscaler (by workflow id, so it reaches its latest run) and the Web UI."""
        await self._delivered()
        self._show(inp)
        if inp.parent_workflow_id:
            await self._signal(inp.parent_workflow_id, self._report())

    def _send(self, inp: NodeRequestInput) -> None:
        """`_publish` without waiting for the delivery: the signal goes out in the same workflow
        task as the command that follows (FEWER_TASKS). The status is copied now, and it leaves
        after the report before it was delivered."""
        self._show(inp)
        if not inp.parent_workflow_id:
            return
        report, before, parent = self._report(), self.sending, inp.parent_workflow_id

        async def send() -> None:
            if before is not None:
                await before
            await self._signal(parent, report)

        self.sending = asyncio.create_task(send())

    async def _delivered(self) -> None:
        if self.sending is not None:
            await self.sending
            self.sending = None

    def _report(self) -> NodeRequestStatus:
        # Without its pods: the autoscaler recorded them when it started this request.
        return self.status.model_copy(update={"pod_uids": [], "pods": {}})

    async def _signal(self, parent_workflow_id: str, report: NodeRequestStatus) -> None:
        try:
            await workflow.get_external_workflow_handle(parent_workflow_id).signal(contracts.REQUEST_CHANGED, report)
        except FailureError:
            # The autoscaler is gone (terminated); the request still finishes on its own.
            workflow.logger.warning("autoscaler %s did not take the update", parent_workflow_id)


def failure_text(err: BaseException) -> str:
    """What failed, for an attempt's message: the outermost application error's text and then
    its causes (scaling.nodes.scale_up.requests.failure_message), without Temporal's wrappers ("Activity
    task failed"), which say nothing about the provider."""
    messages: list[str] = []
    seen: set[int] = set()
    e: BaseException | None = err
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if isinstance(e, FailureError):
            if not isinstance(e, (ActivityError, ChildWorkflowError)):
                messages.append(e.message)  # str() would prefix the error type
        else:
            messages.append(str(e) or type(e).__name__)
        e = e.__cause__
    return failure_message(messages) or str(err)
