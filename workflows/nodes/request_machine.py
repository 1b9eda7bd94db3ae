"""One node's request, as a state machine inside a workflow: Pending → Provisioning → Ready |
Unmet | Replanned (seed 004, steps 5-7), shared by NodeRequest (one node) and NodeRequestBatch
(one machine per member).

It tries its candidate pools in order. A provider with no capacity or quota moves it to the next
pool, or, when the loop started it, ends it Replanned (the loop plans its pods again); a node that
is not Ready within the readiness wait is removed and the next pool tried; after max attempts it
is Unmet. A gated pool waits for the owner's one approval decision.

What it reports and how is the owning workflow's (RequestOwner): a NodeRequest signals its loop
per change, a batch collects its members' changes into one signal.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import timedelta
from typing import Any, Protocol

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
        WaitReadyInput,
    )
    from scaling.nodes.disruption.drift import LABEL_POOL_HASH, pool_hash
    from scaling.nodes.models import Attempt, AttemptResult, Pool, RequestPhase
    from scaling.nodes.scale_up.approvals import ApprovalGate, waits_for
    from scaling.nodes.scale_up.capacity import hands_back_pods
    from scaling.nodes.scale_up.requests import (
        NodeRequestInput,
        NodeRequestStatus,
        attempt_result_of,
        attempts_exhausted,
        failure_message,
        request_labels,
    )
    from workflows.approvals import ApprovalUpdates
    from workflows.nodes.activity_options import NODE_ACTIVITIES

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


class Decision:
    """One approval decision: a NodeRequest's, or a batch's for all its members."""

    def __init__(self) -> None:
        self.decided = False
        self.approved = False
        self.state: ApprovalState | None = None  # shared by every status that shows the wait

    def open(self, reason: str, pool: Pool, gate: ApprovalGate) -> ApprovalState:
        """The wait for `pool`, opened once: members that reach it later join the same one."""
        if self.state is None:
            self.state = ApprovalState(
                reason=reason,
                step=pool.name,
                deadline=workflow.now() + timedelta(seconds=gate.timeout_s),
                default=gate.default,
            )
        return self.state

    def decide(self, approve: bool, by: str, note: str) -> str:
        approval = self.state
        assert approval is not None
        self.decided, self.approved = True, approve
        approval.decision, approval.by, approval.note = ("approved" if approve else "denied"), by, note
        return f"{workflow.info().workflow_id}: {approval.decision}"

    def decide_by_default(self, gate: ApprovalGate) -> None:
        self.decide(applies_default(gate.default), "timeout", f"no decision within {gate.timeout_s:g} s")

    async def wait(self, gate: ApprovalGate, cancelled: Callable[[], bool]) -> None:
        """Until decided (or `cancelled`); the gate's default applies after its timeout."""
        try:
            # A durable timer: the default applies after the timeout even across worker restarts.
            await workflow.wait_condition(
                lambda: self.decided or cancelled(), timeout=timedelta(seconds=gate.timeout_s)
            )
        except TimeoutError:
            self.decide_by_default(gate)


class SharedDecision(Decision):
    """A batch's decision: one timer for every member that waits, however many."""

    def __init__(self) -> None:
        super().__init__()
        self.timer: asyncio.Task[None] | None = None

    async def wait(self, gate: ApprovalGate, cancelled: Callable[[], bool]) -> None:
        if self.timer is None and not self.decided:
            self.timer = asyncio.create_task(super().wait(gate, lambda: False))
        await workflow.wait_condition(lambda: self.decided or cancelled())


class MachineApprovals(ApprovalUpdates):
    """approve/deny (workflows.approvals) of a workflow whose request machines share one Decision
    (NodeRequest, NodeRequestBatch, NodeReplacement): taken while a machine awaits approval and
    nothing is decided yet; an operator's decision covers every machine."""

    machines: list[RequestMachine]
    decision: Decision

    def _decision_refused(self, note: Any) -> str:
        waiting = any(m.status.phase == RequestPhase.AWAITING_APPROVAL for m in self.machines)
        return decision_refused(
            waiting and not self.decision.decided, self.decision.state, workflow.info().workflow_id, note
        )

    def _decided(self, approve: bool, note: Any) -> str:
        return self.decision.decide(approve, "operator", str(note or ""))

    async def creating(self, machine: RequestMachine) -> None:
        """Nothing comes before a create but for a NodeReplacement (RequestOwner.creating)."""


class RequestOwner(Protocol):
    """What a machine asks of the workflow it runs in."""

    async def publish(self, machine: RequestMachine) -> None:
        """A change the loop and the Web UI must see, in order."""

    async def creating(self, machine: RequestMachine) -> None:
        """A create is next (approved, if a gate holds it): what must come first."""

    async def provisioning(self, machine: RequestMachine) -> None:
        """The node was created; the readiness wait follows."""

    async def wait_ready(self, machine: RequestMachine, wait: WaitReadyInput) -> bool:
        """Whether the node became Ready (and labelled) in time; False once
        the machine is cancelled."""


class RequestMachine:
    """One node's attempts over its candidate pools; `status` is what it reports."""

    def __init__(self, inp: NodeRequestInput, owner: RequestOwner, decision: Decision) -> None:
        self.inp, self.owner, self.decision = inp, owner, decision
        # Status from the input at once: a cancel or describe in the first activation sees it.
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

    def cancel(self, reason: str) -> None:
        self.cancel_requested = True
        self.cancel_reason = reason

    async def run(self) -> NodeRequestStatus:
        """Every attempt up to a final phase."""
        inp, status = self.inp, self.status
        for attempt_no, pool in enumerate(inp.candidates):
            if self.cancel_requested or attempts_exhausted(status.attempts, inp.max_attempts):
                break
            if not await self._approved(pool):
                break
            await self.owner.creating(self)
            if self.cancel_requested:  # while the owner prepared (a NodeReplacement's taint)
                break
            if await self._try_pool(pool, attempt_no):
                break
            last = status.attempts[-1]
            if hands_back_pods(last.result, inp.replan_when_unavailable):
                status.phase = RequestPhase.REPLANNED
                status.message = f"{pool.name}: {last.result.value}; its pods go back to the autoscaler's planner"
                break
        if status.phase not in (RequestPhase.READY, RequestPhase.REPLANNED):
            status.phase = RequestPhase.UNMET
            status.message = self.cancel_reason if self.cancel_requested else self._unmet_reason()
            if self.decision.decided and not self.decision.approved and not self.cancel_requested:
                status.message = self.denied_reason()
        status.finished_at = workflow.now()
        return status

    async def _try_pool(self, pool: Pool, attempt_no: int) -> bool:
        """One attempt on one pool. True when the request is Ready."""
        inp, status = self.inp, self.status
        status.current_pool, status.server_type, status.provider = pool.name, pool.server_type, pool.provider
        self._record(pool, AttemptResult.PENDING)
        labels = {
            **inp.group_labels,
            **request_labels(inp.cluster, inp.group, pool, inp.id),
            # What the node is made from, for drift (scaling.nodes.disruption.drift); a label in the
            # create's input, not a command: histories replay unchanged.
            LABEL_POOL_HASH: pool_hash(inp.group_labels, inp.group_taints, pool),
            **inp.extra_labels,
        }
        try:
            created: CreateNodeResult = await workflow.execute_activity(
                contracts.CREATE_NODE,
                # The request id (a batch member's own) and the attempt are the create's key at
                # the provider: a retried create finds the machine it made.
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
            await self.owner.publish(self)
            return False
        result = attempt_result_of(created.outcome)
        if result != AttemptResult.PROVISIONING:
            self._record(pool, result, message=created.message)
            await self.owner.publish(self)
            return False

        status.phase = RequestPhase.PROVISIONING
        status.node_name, status.provider_id = created.node_name, created.provider_id
        self._record(pool, AttemptResult.PROVISIONING, node_name=created.node_name)
        await self.owner.provisioning(self)

        # The readiness wait labels the node and reports Provisioning to the loop: a burst's
        # ~1,000 requests each took 6 workflow tasks up to Ready with a label activity after it.
        if await self._wait_ready(created.node_name, labels):
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
        await self.owner.publish(self)
        return False

    async def _approved(self, pool: Pool) -> bool:
        """Whether it may try `pool`: at once when nothing gates it, else once approved. Denied
        (by an operator, or by the timeout's default) records a Denied attempt on the pool."""
        gate, decision, status = self.inp.approval, self.decision, self.status
        reason = waits_for(gate, pool.name, decision.approved)
        if not reason or gate is None:
            return True
        if not decision.decided:
            status.phase = RequestPhase.AWAITING_APPROVAL
            status.current_pool, status.server_type, status.provider = pool.name, pool.server_type, pool.provider
            status.approval = decision.open(reason, pool, gate)
            await self.owner.publish(self)
            await decision.wait(gate, lambda: self.cancel_requested)
        if self.cancel_requested:
            return False
        status.phase = RequestPhase.PENDING
        if not decision.approved:
            self._record(pool, AttemptResult.DENIED, message=self.denied_reason())
            return False
        await self.owner.publish(self)  # out of AwaitingApproval (search attribute, Web UI) right away
        return True

    def denied_reason(self) -> str:
        approval = self.decision.state
        if approval is None:
            return "denied"
        note = f": {approval.note}" if approval.note else ""
        return f"Denied by {approval.by}{note} ({approval.reason})"

    async def _wait_ready(self, node_name: str, labels: dict[str, str]) -> bool:
        inp = self.inp
        wait = WaitReadyInput(
            cluster=inp.cluster,
            node_name=node_name,
            timeout_s=inp.readiness_timeout_s,
            poll_s=inp.readiness_poll_s,
            labels=labels,
        )
        return await self.owner.wait_ready(self, wait)

    def _record(self, pool: Pool, result: AttemptResult, node_name: str = "", message: str = "") -> None:
        """One entry per pool tried: its result is updated in place as the attempt progresses."""
        entry = Attempt(pool=pool.name, result=result, timestamp=workflow.now(), node_name=node_name, message=message)
        attempts = self.status.attempts
        if attempts and attempts[-1].pool == pool.name and attempts[-1].result in _UNDER_WAY:
            attempts[-1] = entry
        else:
            attempts.append(entry)

    def _unmet_reason(self) -> str:
        if not self.inp.candidates:
            return "no pool can hold the requirements"
        tried = ", ".join(f"{a.pool}: {a.result.value}" for a in self.status.attempts)
        return f"no pool could provide a node ({tried})"

    def report(self) -> NodeRequestStatus:
        # Without its pods: the autoscaler recorded them when it started this request.
        return self.status.model_copy(update={"pod_uids": [], "pods": {}})


_UNDER_WAY = (AttemptResult.PENDING, AttemptResult.PROVISIONING)


async def wait_alone(machine: RequestMachine, wait: WaitReadyInput) -> bool:
    """A readiness wait in an activity of its own (NodeRequest's), cancelled with the machine."""
    waiting = workflow.start_activity(
        contracts.WAIT_NODE_READY,
        wait,
        result_type=bool,
        **NODE_ACTIVITIES[contracts.WAIT_NODE_READY].timeouts(timedelta(seconds=wait.timeout_s + 60)),
        retry_policy=KUBE_RETRY,
    )
    await workflow.wait_condition(lambda: machine.cancel_requested or waiting.done())
    if not waiting.done():
        waiting.cancel()
        try:
            await waiting
        except (ActivityError, asyncio.CancelledError):
            pass
        return False
    return bool(waiting.result())


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
