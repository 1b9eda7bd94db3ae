"""spec.disruption of a NodeGroupWithPriority, after validation (scaling.nodes.nodegroups parses it).

Field names and values follow Karpenter's NodePool `spec.disruption` (kubernetes-sigs/karpenter
pkg/apis/v1/nodepool.go); where growth differs (defaults, the Expired reason) docs/nodes.md says so.
"""

from __future__ import annotations

from enum import Enum

from pydantic import BaseModel, ConfigDict, Field


class DisruptionReason(str, Enum):
    """Why a node is disrupted; a budget may name the reasons it limits (none: all of them)."""

    EMPTY = "Empty"
    UNDERUTILIZED = "Underutilized"
    DRIFTED = "Drifted"
    # Karpenter v1 expires nodes forcefully, outside budgets; growth replaces them like drift.
    EXPIRED = "Expired"


class ConsolidationPolicy(str, Enum):
    WHEN_EMPTY = "WhenEmpty"
    WHEN_EMPTY_OR_UNDERUTILIZED = "WhenEmptyOrUnderutilized"


class Budget(BaseModel):
    """At most ``nodes`` ("10%" of the group's nodes, rounded up, or a count) disrupted at once,
    while active: always without a schedule, else for ``duration_s`` after each cron hit (UTC)."""

    model_config = ConfigDict(populate_by_name=True, frozen=True)

    nodes: str = "10%"
    schedule: str | None = None
    duration_s: float | None = Field(default=None, alias="duration")
    reasons: tuple[DisruptionReason, ...] = ()  # empty: every reason


class Disruption(BaseModel):
    """A group's disruption settings. No budget means no limit but the loop's per-loop maximum
    (Karpenter defaults to one budget of 10%; growth keeps its earlier behaviour unless asked)."""

    model_config = ConfigDict(populate_by_name=True)

    # consolidationPolicy and consolidateAfter are the group's ScaleDownSettings (policy,
    # unneeded_time_s, enabled): the scale-down methods read them there.
    expire_after_s: float | None = Field(default=None, alias="expireAfter")  # None: Never
    budgets: list[Budget] = Field(default_factory=list)
