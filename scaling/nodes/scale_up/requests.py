"""NodeRequest: its input, its status record (seed 004's `attempts`) and the rules of its lifecycle."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field, SerializerFunctionWrapHandler, model_serializer

from scaling.approvals import ApprovalState
from scaling.kube.labels import label_value, request_key
from scaling.kube.models import Resources, Taint
from scaling.nodes.models import (
    LABEL_CLUSTER,
    LABEL_GROUP,
    LABEL_POOL,
    LABEL_REQUEST,
    Attempt,
    AttemptResult,
    InFlightRequest,
    NodeGroup,
    PlannedNode,
    Pool,
    RequestPhase,
)
from scaling.nodes.scale_up.approvals import ApprovalGate
from scaling.nodes.settings import AutoscalerSettings


class RequestSettings(BaseModel):
    """What a node request needs besides its own id and pods: a NodeRequestBatch's members share it."""

    cluster: str
    group: str
    group_labels: dict[str, str] = Field(default_factory=dict)
    group_taints: list[Taint] = Field(default_factory=list)
    candidates: list[Pool]  # tried in this order
    readiness_timeout_s: float = 300.0
    readiness_poll_s: float = 2.0
    max_attempts: int = 5
    ttl_s: float = 3600.0
    parent_workflow_id: str | None = None
    use_search_attributes: bool = False
    # Set by the NodeAutoscaler: on no capacity/quota, end Replanned instead of falling back
    # with the same pods (the loop re-plans them for the next pool). Off for requests started
    # by hand, which fall back through their candidates.
    replan_when_unavailable: bool = False
    # What must be approved before trying its pools (None: nothing; scaling.nodes.scale_up.approvals).
    # A batch's one decision covers every member.
    approval: ApprovalGate | None = None
    # Labels its node carries besides the group's and the request's (a replacement names the node it
    # replaces: scaling.nodes.disruption.drift.LABEL_REPLACES).
    extra_labels: dict[str, str] = Field(default_factory=dict)


class BatchMember(BaseModel):
    """What one node of a NodeRequestBatch needs: the rest is common to the batch."""

    requirements: Resources
    pod_uids: list[str] = Field(default_factory=list)  # its named pods (a sample per shape)
    pods: dict[str, int] = Field(default_factory=dict)  # shape key -> pods it is for


class NodeRequestInput(BatchMember, RequestSettings):
    id: str  # the workflow id (or a batch member's id); also the idempotency key at the provider


# The NodeRequest workflow's type name: the loop's start activity starts it by name. Loops
# recorded before request batches started one per node, as an operator still may by hand.
NODE_REQUEST_WORKFLOW = "NodeRequest"
# One workflow for a batch of identical nodes (scaling.nodes.scale_up.batches).
NODE_REQUEST_BATCH_WORKFLOW = "NodeRequestBatch"
# Requests per start activity: an input is ~1-2 KB, so a batch stays below the history payload
# aim (256 KB) however many nodes a burst plans. 25 before (runs recorded then replay so): at
# 30,000 pods a loop's 15 start activities were picked up a few at a time over 14 s.
START_BATCH = 100
START_BATCH_BEFORE = 25


class NodeRequestBatchInput(RequestSettings):
    """A NodeRequestBatch's input: the settings its members share, once, then the members."""

    id: str  # the batch's workflow id; member_id(id, index) is each node's request id
    members: list[BatchMember]

    def member_input(self, index: int) -> NodeRequestInput:
        """Member `index` as a NodeRequest of its own: its id is member_id(batch, index)."""
        m = self.members[index]
        shared = {k: getattr(self, k) for k in RequestSettings.model_fields}
        return NodeRequestInput(
            **shared, id=member_id(self.id, index), requirements=m.requirements, pod_uids=m.pod_uids, pods=m.pods
        )


def member_id(batch_id: str, index: int) -> str:
    """A node's request id inside a batch: in the in-flight table, explain, Events, node labels
    (through request_key) and create keys."""
    return f"{batch_id}#{index}"


def split_request_id(request_id: str) -> tuple[str, int | None]:
    """(workflow id, index) of a member id; (request_id, None) for a NodeRequest's or a batch's id."""
    head, sep, tail = request_id.rpartition("#")
    if sep and head and tail.isdigit():
        return head, int(tail)
    return request_id, None


class StartRequestsInput(BaseModel):
    """NodeRequests (or batches of them) the loop recorded as in flight, for the start activity."""

    cluster: str
    requests: list[NodeRequestInput] = Field(default_factory=list)
    use_search_attributes: bool = False
    batches: list[NodeRequestBatchInput] = Field(default_factory=list)


class NodeRequestStatus(BaseModel):
    id: str
    group: str
    phase: RequestPhase = RequestPhase.PENDING
    current_pool: str = ""
    server_type: str = ""
    provider: str = ""
    node_name: str = ""
    provider_id: str = ""
    attempts: list[Attempt] = Field(default_factory=list)
    message: str = ""
    requirements: Resources = Resources()
    pod_uids: list[str] = Field(default_factory=list)
    pods: dict[str, int] = Field(default_factory=dict)  # shape key -> pods it is for
    started_at: datetime | None = None
    finished_at: datetime | None = None
    approval: ApprovalState | None = None  # its wait for approval, once it had one

    @model_serializer(mode="wrap")
    def _without_defaults(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # Up to max_requests_in_flight of these are the state carried across continue-as-new:
        # fields still at their defaults (a third of a Pending record) are left out.
        data = handler(self)
        return {k: v for k, v in data.items() if k not in _STATUS_DEFAULTS or getattr(self, k) != _STATUS_DEFAULTS[k]}

    @property
    def final(self) -> bool:
        return self.phase in (RequestPhase.READY, RequestPhase.UNMET, RequestPhase.REPLANNED)

    def for_planner(self, *, successor: bool = False) -> InFlightRequest:
        """The request as the scale-up planner counts it in flight (``successor``: a replacement's,
        InFlightRequest.successor; the pods it is for run on the nodes it replaces)."""
        return InFlightRequest(
            id=self.id,
            group=self.group,
            pool=self.current_pool,
            server_type=self.server_type,
            provider=self.provider,
            requirements=self.requirements,
            pod_uids=[] if successor else self.pod_uids,
            pods=self.pods,
            phase=self.phase,
            successor=successor,
        )


class NodeRequestBatchStatus(BaseModel):
    """A NodeRequestBatch's `describe`: each member as a NodeRequest would show itself."""

    id: str  # the batch's workflow id
    cluster: str
    group: str
    members: list[NodeRequestStatus] = Field(default_factory=list)  # member i has id member_id(id, i)
    approval: ApprovalState | None = None  # the batch's one wait for approval, once it had one


# How far a request got, for a batch's phase (its least advanced member's): the Web UI's
# GrowthPhase shows a batch Pending while any member is.
_PHASE_RANK = {
    RequestPhase.PENDING: 0,
    RequestPhase.AWAITING_APPROVAL: 1,
    RequestPhase.PROVISIONING: 2,
}


def least_advanced(members: list[NodeRequestStatus]) -> NodeRequestStatus | None:
    """The first member furthest from a final phase (None for no members)."""
    return min(members, key=lambda m: _PHASE_RANK.get(m.phase, 3), default=None)


def queue_report(outbox: list[NodeRequestStatus], report: NodeRequestStatus) -> None:
    """Add a batch member's report to what the batch has yet to send its loop. A queued report of
    the same member with as many attempts is replaced (the loop would read the same latest
    attempt in both: scaling.nodes.loop.newly_reported_attempt); one with fewer is kept, so every
    attempt the loop counts (a quota backoff, capacity memory) reaches it, in order."""
    queued = next((i for i in range(len(outbox) - 1, -1, -1) if outbox[i].id == report.id), None)
    if queued is not None and len(outbox[queued].attempts) == len(report.attempts):
        outbox[queued] = report
    else:
        outbox.append(report)


class CancelMembers(BaseModel):
    """A NodeRequestBatch's `cancel` signal: one member (`index`) or every one still under way."""

    reason: str = "cancelled by operator"
    index: int | None = None


_STATUS_DEFAULTS = {
    name: field.get_default(call_default_factory=True)
    for name, field in NodeRequestStatus.model_fields.items()
    if not field.is_required()
}

# Results after which a request moves on to its next candidate pool.
MOVE_ON_RESULTS = frozenset(
    {
        AttemptResult.INSUFFICIENT_CAPACITY,
        AttemptResult.QUOTA_EXCEEDED,
        AttemptResult.READINESS_TIMEOUT,
        AttemptResult.PROVIDER_ERROR,
    }
)


def attempts_exhausted(attempts: list[Attempt], max_attempts: int) -> bool:
    """Seed 004 step 6.3: a request that used up maxAttempts is Unmet.

    Only finished tries count (a Pending/Provisioning marker is not a try yet)."""
    tried = sum(1 for a in attempts if a.result in MOVE_ON_RESULTS)
    return tried >= max_attempts


def request_labels(cluster: str, group: str, pool: Pool, request_id: str) -> dict[str, str]:
    """Labels a node created for a request carries: its group, pool and request (seed 004 step 6.1)."""
    return {
        LABEL_CLUSTER: label_value(cluster),
        LABEL_GROUP: label_value(group),
        LABEL_POOL: label_value(pool.name),
        LABEL_REQUEST: request_key(request_id),
    }


# What a create at the provider means for the attempt: a created machine is provisioning, an
# answer of no capacity or no quota moves the request to its next pool.
_OUTCOME_RESULT = {
    "created": AttemptResult.PROVISIONING,
    "no_capacity": AttemptResult.INSUFFICIENT_CAPACITY,
    "quota_exceeded": AttemptResult.QUOTA_EXCEEDED,
}


def attempt_result_of(outcome: str | None) -> AttemptResult:
    """The attempt's result for a CreateNodeResult outcome; None (the create failed after its
    retries) and an outcome this version does not know are provider errors."""
    if outcome is None:
        return AttemptResult.PROVIDER_ERROR
    return _OUTCOME_RESULT.get(outcome, AttemptResult.PROVIDER_ERROR)


# An attempt's message goes into the request's status, its history and the autoscaler's state:
# bounded, whatever a provider answers.
ATTEMPT_MESSAGE_MAX = 500


def failure_message(messages: list[str], limit: int = ATTEMPT_MESSAGE_MAX) -> str:
    """One line from a failure's messages, outermost first: the outer message is the one written
    for an operator (growth's provider code names the token file, the pool, the fix), the causes
    add the provider's own words. A cause the text already contains is left out; the result is
    cut to ``limit`` characters (ending in an ellipsis)."""
    text = ""
    for raw in messages:
        m = " ".join(raw.split())
        if not m or m in text:
            continue
        text = f"{text}: {m}" if text else m
    if len(text) > limit:
        text = text[: max(limit - 1, 0)].rstrip() + "\u2026"
    return text


# Pods an in-flight record names (for `explain` and progress); its counts cover the rest.
NAMED_IN_STATE = 2


def request_input(
    request_id: str,
    planned: PlannedNode,
    group: NodeGroup,
    settings: AutoscalerSettings,
    parent_workflow_id: str,
    approval: ApprovalGate | None = None,
) -> NodeRequestInput:
    """The NodeRequest child's input for a planned node."""
    return NodeRequestInput(
        id=request_id,
        cluster=settings.cluster,
        group=planned.group,
        group_labels=group.registered_labels,
        group_taints=group.registered_taints,
        requirements=planned.requirements,
        pod_uids=planned.pod_uids,
        pods=planned.pods,
        candidates=planned.candidates,
        readiness_timeout_s=settings.readiness_timeout_s,
        readiness_poll_s=settings.readiness_poll_s,
        max_attempts=settings.max_attempts,
        ttl_s=settings.request_ttl_s,
        parent_workflow_id=parent_workflow_id,
        use_search_attributes=settings.use_search_attributes,
        replan_when_unavailable=True,
        approval=approval,
    )


def in_flight_record(request_id: str, planned: PlannedNode, started_at: datetime) -> NodeRequestStatus:
    """What the autoscaler keeps of a request it started, until the request reports."""
    first = planned.candidates[0]
    return NodeRequestStatus(
        id=request_id,
        group=planned.group,
        current_pool=first.name,
        server_type=first.server_type,
        provider=first.provider,
        requirements=planned.requirements,
        pod_uids=planned.pod_uids[:NAMED_IN_STATE],
        pods=planned.pods,
        started_at=started_at,
    )


def batch_input(
    batch_id: str,
    planned: list[PlannedNode],
    group: NodeGroup,
    settings: AutoscalerSettings,
    parent_workflow_id: str,
    approval: ApprovalGate | None = None,
) -> NodeRequestBatchInput:
    """The NodeRequestBatch's input for planned nodes of one batch (same group, candidates, gate)."""
    first = request_input(batch_id, planned[0], group, settings, parent_workflow_id, approval)
    return NodeRequestBatchInput(
        **{k: getattr(first, k) for k in RequestSettings.model_fields},
        id=batch_id,
        members=[BatchMember(requirements=p.requirements, pod_uids=p.pod_uids, pods=p.pods) for p in planned],
    )
