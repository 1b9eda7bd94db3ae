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
    NodeGroup,
    PlannedNode,
    Pool,
    RequestPhase,
)
from scaling.nodes.scale_up.approvals import ApprovalGate
from scaling.nodes.settings import AutoscalerSettings


class NodeRequestInput(BaseModel):
    id: str  # the workflow id; also the idempotency key at the provider
    cluster: str
    group: str
    group_labels: dict[str, str] = Field(default_factory=dict)
    group_taints: list[Taint] = Field(default_factory=list)
    requirements: Resources
    pod_uids: list[str] = Field(default_factory=list)  # its named pods (a sample per shape)
    pods: dict[str, int] = Field(default_factory=dict)  # shape key -> pods it is for
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
    approval: ApprovalGate | None = None


# The NodeRequest workflow's type name: the loop's start activity starts it by name.
NODE_REQUEST_WORKFLOW = "NodeRequest"
# Requests per start activity: an input is ~1-2 KB, so a batch stays below the history payload
# aim (256 KB) however many nodes a burst plans. 25 before (runs recorded then replay so): at
# 30,000 pods a loop's 15 start activities were picked up a few at a time over 14 s.
START_BATCH = 100
START_BATCH_BEFORE = 25


class StartRequestsInput(BaseModel):
    """NodeRequests the loop recorded as in flight, for the start activity to start."""

    cluster: str
    requests: list[NodeRequestInput]
    use_search_attributes: bool = False


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
        group_labels=group.labels,
        group_taints=group.taints,
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
