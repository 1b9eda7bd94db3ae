"""The node loop's models: node groups and pools, server types, requests and plans."""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime
from enum import Enum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from scaling.kube.models import (
    Resources,
    Taint,
)
from scaling.kube.nodes import STARTUP_MARK_PREFIX, startup_mark, template_taints
from scaling.nodes.disruption.models import ConsolidationPolicy, Disruption

# Labels growth puts on the nodes it creates; the scale-down loop uses them to find its nodes.
LABEL_GROUP = "growth.autoscaling.dev/node-group"


LABEL_POOL = "growth.autoscaling.dev/pool"


LABEL_REQUEST = "growth.autoscaling.dev/node-request"


LABEL_CLUSTER = "growth.autoscaling.dev/cluster"


CRD_GROUP = "growth.autoscaling.dev"


CRD_VERSION = "v1alpha1"


class ServerType(BaseModel):
    """One machine shape a provider can create, with what a node of it can hold."""

    provider: str
    name: str
    allocatable: Resources
    price_hourly: float
    arch: Literal["amd64", "arm64"] = "amd64"
    deprecated: bool = False


class ScaleDownSettings(BaseModel):
    enabled: bool = True  # spec.disruption.consolidateAfter: Never turns it off too
    unneeded_time_s: float = 600.0  # or spec.disruption.consolidateAfter
    utilization_threshold: float = 0.5
    delay_after_add_s: float = 600.0
    # spec.disruption.consolidationPolicy. None (not written): Cluster Autoscaler's rules, underused
    # nodes go when their pods fit elsewhere. WhenEmpty: underused nodes stay. WhenEmptyOrUnderutilized:
    # as None, and an underused node whose pods fit nowhere else is replaced by a cheaper one.
    policy: ConsolidationPolicy | None = None


class GroupLimits(BaseModel):
    """spec.limits: caps on what the planner adds to a group (scaling.nodes.scale_up.money)."""

    model_config = ConfigDict(populate_by_name=True)

    price_per_hour: float | None = Field(default=None, alias="pricePerHour")  # catalogue currency


class ApprovalPolicy(BaseModel):
    """spec.approval: scale-ups that wait for an operator (scaling.nodes.scale_up.approvals)."""

    model_config = ConfigDict(populate_by_name=True)

    nodes_above: int | None = Field(default=None, alias="nodesAbove")
    price_per_hour_above: float | None = Field(default=None, alias="pricePerHourAbove")
    timeout_s: float = 1800.0  # 30 min
    default: Literal["approve", "deny"] = "deny"


class Billing(BaseModel):
    """A pool's billing: servers are paid per started `period_s` (Hetzner: per started hour).

    An unneeded node is kept until `margin_s` before its paid period ends (scaling.nodes.billing)."""

    period_s: float
    margin_s: float


class PoolSpec(BaseModel):
    """A pool entry as the user writes it: a list of server types means equal-priority pools."""

    model_config = ConfigDict(populate_by_name=True)

    provider: str
    server_types: list[str] = Field(alias="serverType")
    priority: int
    min_nodes: int = Field(default=0, alias="minNodes")
    max_nodes: int | None = Field(default=None, alias="maxNodes")
    config: dict[str, Any] = Field(default_factory=dict)  # provider specifics (locations, image...)
    billing: Billing | None = None  # None: paid by the second (or unknown), never held for it


class NodeGroup(BaseModel):
    """A validated NodeGroupWithPriority."""

    model_config = ConfigDict(populate_by_name=True)

    name: str
    labels: dict[str, str] = Field(default_factory=dict)
    taints: list[Taint] = Field(default_factory=list)
    pools: list[PoolSpec]
    max_nodes: int | None = Field(default=None, alias="maxNodes")
    scale_down: ScaleDownSettings = Field(default_factory=ScaleDownSettings, alias="scaleDown")
    # Free room kept on one of the group's Ready nodes at all times (scaling.nodes.headroom).
    headroom: Resources | None = None
    limits: GroupLimits | None = None
    approval: ApprovalPolicy | None = None
    disruption: Disruption = Field(default_factory=Disruption)  # budgets, expiry (scaling.nodes.disruption)

    # Karpenter's startupTaints: registered with the node for an agent (a CNI, a driver) to lift once
    # the node runs pods; never read on a planned node, and a node carrying one is not Ready.
    startup_taints: list[Taint] = Field(default_factory=list, alias="startupTaints")

    @property
    def template_taints(self) -> list[Taint]:
        """``taints`` as a planned node is read: without the startup and status ones it registers with
        and sheds (scaling.kube.nodes.template_taints)."""
        return template_taints(self.taints)

    @property
    def registered_taints(self) -> list[Taint]:
        """What the group's nodes register with: its taints and its startup taints."""
        return [*self.taints, *self.startup_taints]

    @property
    def registered_labels(self) -> dict[str, str]:
        """What the group's nodes register with: its labels, and a mark for each startup taint (how
        node_is_ready, reading the node alone, knows it for one)."""
        marks = {STARTUP_MARK_PREFIX + startup_mark(t.key): "true" for t in self.startup_taints}
        return {**self.labels, **marks}


class Pool(BaseModel):
    """One (group, provider, server type) after flattening: the unit a NodeRequest tries."""

    model_config = ConfigDict(frozen=True)

    group: str
    name: str  # e.g. "hetzner-cx31"; unique within its group
    provider: str
    server_type: str
    priority: int
    min_nodes: int = 0
    max_nodes: int | None = None
    config: dict[str, Any] = Field(default_factory=dict)
    billing: Billing | None = None


def pool_key(group: str, pool: str) -> str:
    """A (group, pool) as one key: string keys keep state JSON-serialisable through Temporal's
    pydantic converter."""
    return f"{group}/{pool}"


def is_unavailable(pool: Pool, unavailable: Collection[tuple[str, str]]) -> bool:
    """Whether `unavailable` names the pool, in either form the planner accepts: (group, pool)
    and (provider, server type)."""
    return (pool.group, pool.name) in unavailable or (pool.provider, pool.server_type.lower()) in unavailable


class SpecProblem(BaseModel):
    """An invalid spec, reported on the object's status; names the offending field."""

    kind: str
    name: str
    field: str
    message: str


class PodProblem(BaseModel):
    namespace: str
    name: str
    uid: str
    reason: str  # e.g. NeverSatisfiable, MultipleNodeGroups, NoMatchingNodeGroup, MaxNodesReached
    message: str
    key: str = ""  # the pod's shape (scaling.nodes.scale_up.demand): pods of one shape share the problem
    count: int = 1  # this pod and the unnamed pods of its shape it stands for


class RequestPhase(str, Enum):
    PENDING = "Pending"
    # Gated (scaling.nodes.scale_up.approvals): waits for an operator's approve/deny or its timeout.
    AWAITING_APPROVAL = "AwaitingApproval"  # scaling.approvals.AWAITING_APPROVAL
    PROVISIONING = "Provisioning"
    READY = "Ready"
    UNMET = "Unmet"
    # Its pool had no capacity: it ended and its pods went back to the planner (capacity memory).
    REPLANNED = "Replanned"


class AttemptResult(str, Enum):
    PENDING = "Pending"
    PROVISIONING = "Provisioning"
    READY = "Ready"
    INSUFFICIENT_CAPACITY = "InsufficientCapacity"
    QUOTA_EXCEEDED = "QuotaExceeded"
    READINESS_TIMEOUT = "ReadinessTimeout"
    PROVIDER_ERROR = "ProviderError"
    CANCELLED = "Cancelled"
    DENIED = "Denied"  # its approval gate was denied (by an operator or by the timeout's default)


class Attempt(BaseModel):
    pool: str
    result: AttemptResult
    timestamp: datetime
    node_name: str = ""
    message: str = ""


class PlannedNode(BaseModel):
    """One node the planner wants: which group, which pools to try in order, which pods."""

    group: str
    pool: str  # the planner's first choice
    candidates: list[Pool]  # ordered: first choice, rest of its tier, then lower tiers
    requirements: Resources  # summed requests of the pods it is for
    pod_uids: list[str]  # those of its pods that are named (a sample when observed)
    pods: dict[str, int] = Field(default_factory=dict)  # shape key -> pods it is for


class InFlightRequest(BaseModel):
    """A NodeRequest still Pending/Provisioning, as the planner sees it."""

    id: str
    group: str
    pool: str
    server_type: str
    provider: str
    requirements: Resources
    pod_uids: list[str] = Field(default_factory=list)  # requests recorded before shapes
    pods: dict[str, int] = Field(default_factory=dict)  # shape key -> pods it was made for
    phase: RequestPhase = RequestPhase.PENDING
    # A replacement's successor (ScaleDownStatus.successors): the pods it was made for run on the nodes
    # it replaces, so no pending pod is one of them; pending pods take its spare room only, as Karpenter
    # nominates pending pods to an in-flight NodeClaim (its room less the pods its command moves there).
    successor: bool = False


class ScaleUpPlan(BaseModel):
    new_nodes: list[PlannedNode] = Field(default_factory=list)
    fits_existing: list[str] = Field(default_factory=list)  # named pods that fit ready nodes
    covered_in_flight: list[str] = Field(default_factory=list)  # named pods in-flight requests hold
    pods_fit_existing: int = 0  # all of them, named or not
    pods_covered: int = 0
    problems: list[PodProblem] = Field(default_factory=list)
