"""The ComponentAutoscaler's input, state (carried across continue-as-new), overrides, the
status written on the TidbClusterAutoScaler, and the report a query answers.

Size: per component a record per heterogeneous group (bounded by resource types x PD label
sets) and a few counters; recent messages are capped. Nothing grows with instances or time.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from scaling.approvals import ApprovalState
from scaling.components.plan import Change, Headroom
from scaling.components.spec import SpecError
from scaling.components.timing import ComponentTiming

MAX_MESSAGES = 20
MAX_CREATED_NAMES = 50

Planner = Literal["growth", "pd"]


class ComponentAutoscalerSettings(BaseModel):
    kube_cluster: str = ""  # key of the worker's clusters settings; "" = the default connection
    namespace: str
    name: str  # the TidbClusterAutoScaler
    # growth: growth's own rules (seed 002: scale out to bring use under the thresholds' midpoint);
    # pd: PD's /autoscaling
    planner: Planner = "growth"
    scan_interval_s: float = Field(default=30.0, gt=0)
    iterations_per_run: int = Field(default=200, ge=1)
    activity_timeout_s: float = Field(default=60.0, gt=0)
    # Consecutive rounds the object must be missing before the workflow ends (a relist glitch
    # must not end it).
    gone_rounds: int = Field(default=3, ge=1)
    use_search_attributes: bool = False
    # Approval gate (scaling.components.approvals): a new heterogeneous group waits for approve.
    approve_group_create: bool = False
    approval_timeout_s: float = Field(default=1800.0, gt=0)
    approval_default: Literal["approve", "deny"] = "deny"


class GroupRecord(BaseModel):
    """A heterogeneous TidbCluster this autoscaler made (or adopted by its labels)."""

    name: str
    uid: str = ""
    group: str = ""
    resource_type: str = ""
    replicas: int = 0  # what we last set
    phase: Literal["active", "draining"] = "active"
    draining_since: datetime | None = None
    last_change_at: datetime | None = None


class ComponentState(BaseModel):
    timing: ComponentTiming = Field(default_factory=ComponentTiming)
    groups: dict[str, GroupRecord] = Field(default_factory=dict)
    homogeneous_replicas: int = 0  # last seen on the base cluster
    approvals: dict[str, ApprovalState] = Field(default_factory=dict)  # group name -> its create's wait
    errors: list[SpecError] = Field(default_factory=list)
    headroom: list[Headroom] = Field(default_factory=list)
    deferred_until: datetime | None = None
    deferred: list[Change] = Field(default_factory=list)  # what waits for its interval (bounded by groups)
    notes: list[str] = Field(default_factory=list)  # the last plan's notes
    metrics_error: str = ""


class Overrides(BaseModel):
    paused: bool = False
    block_scale_in: list[str] = Field(default_factory=list)  # components; "*" = all
    pins: dict[str, int] = Field(default_factory=dict)  # "<component>/<cluster>" -> replicas

    def scale_in_blocked(self, component: str) -> bool:
        return "*" in self.block_scale_in or component in self.block_scale_in


class Counters(BaseModel):
    homogeneous_scale_outs: int = 0
    storage_scale_outs: int = 0
    heterogeneous_scale_outs: int = 0
    scale_ins: int = 0
    groups_deleted: int = 0
    invalid_specs_reported: int = 0
    metrics_failures: int = 0
    heterogeneous_created: list[str] = Field(default_factory=list)  # capped


class ComponentAutoscalerState(BaseModel):
    components: dict[str, ComponentState] = Field(default_factory=dict)
    overrides: Overrides = Field(default_factory=Overrides)
    counters: Counters = Field(default_factory=Counters)
    object_errors: list[SpecError] = Field(default_factory=list)  # errors not of one component
    reported_errors: str = ""  # the error text last reported (Events only on change)
    uid: str = ""
    generation: int = 0
    base_cluster: str = ""
    status_digest: str = ""  # of the last status written
    missing_rounds: int = 0
    rounds: int = 0
    runs: int = 0
    messages: list[str] = Field(default_factory=list)

    def remember(self, message: str) -> None:
        self.messages = [*self.messages, message][-MAX_MESSAGES:]


class ComponentAutoscalerInput(BaseModel):
    settings: ComponentAutoscalerSettings
    state: ComponentAutoscalerState | None = None


# The operator's requests (updates) decode strictly, as the API server would decode the fields
# they stand for: no "3" or 3.0 for 3, no "yes" for true; replicas is an int32 there.
STRICT = ConfigDict(strict=True)


class PinRequest(BaseModel):
    model_config = STRICT
    component: Literal["tikv", "tidb"]
    cluster: str = ""  # "" = the base cluster (homogeneous); else an auto-<hash> group
    replicas: int | None = Field(default=None, le=2**31 - 1)  # None removes the pin


class DecisionRequest(BaseModel):
    """`growth components approve|deny ID`: ID is the group's name (auto-<hash>)."""

    model_config = STRICT
    id: str
    note: str = ""


class BlockScaleInRequest(BaseModel):
    model_config = STRICT
    component: str = "*"  # "tikv", "tidb" or "*"
    blocked: bool = True


class AutoscalerReport(BaseModel):
    namespace: str
    name: str
    base_cluster: str
    planner: Planner
    paused: bool
    overrides: Overrides
    components: dict[str, ComponentState]
    errors: list[SpecError]
    counters: Counters
    rounds: int
    runs: int
    messages: list[str]


def _ts(t: datetime | None) -> str | None:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ") if t else None


def status_body(state: ComponentAutoscalerState) -> dict:
    """The TidbClusterAutoScaler status: per component and group currentReplicas and
    lastAutoScalingTimestamp (tidb-operator's fields), a SpecValid condition naming the first
    bad field, and growth's own extras under `growth`."""
    errors = [*state.object_errors, *(e for c in state.components.values() for e in c.errors)]
    body: dict = {
        "observedGeneration": state.generation,
        "conditions": [
            {
                "type": "SpecValid",
                "status": "False" if errors else "True",
                "reason": "InvalidSpec" if errors else "Valid",
                "message": "; ".join(str(e) for e in errors)[:1024],
            }
        ],
    }
    extras: dict = {"paused": state.overrides.paused}
    for component, cs in sorted(state.components.items()):
        groups: dict = {}
        if state.base_cluster:
            groups[state.base_cluster] = {
                "currentReplicas": cs.homogeneous_replicas,
                "lastAutoScalingTimestamp": _ts(cs.timing.groups.get(state.base_cluster)),
                "group": "homogeneous",
            }
        for name, rec in sorted(cs.groups.items()):
            groups[name] = {
                "currentReplicas": rec.replicas,
                "lastAutoScalingTimestamp": _ts(rec.last_change_at),
                "group": rec.group,
                "resourceType": rec.resource_type,
                "phase": rec.phase,
            }
        body[component] = {k: {kk: vv for kk, vv in v.items() if vv is not None} for k, v in groups.items()}
        extras[component] = {
            k: v
            for k, v in {
                "lastAutoScalingTimestamp": _ts(cs.timing.last_change_at),
                "deferredUntil": _ts(cs.deferred_until),
                "headroom": [h.model_dump(mode="json") for h in cs.headroom] or None,
                "metricsError": cs.metrics_error or None,
            }.items()
            if v is not None
        }
    body["growth"] = extras
    return body
