"""NodeAutoscaler: its settings, its durable state (carried across continue-as-new) and status."""

from __future__ import annotations

import hashlib
import json
from collections import Counter, defaultdict
from datetime import datetime
from enum import Enum

from pydantic import BaseModel, Field

from scaling.drain import PdbInfo
from scaling.models import InFlightRequest, NodeGroup, NodeInfo, PodInfo, PodProblem, RequestPhase, SpecProblem
from scaling.requests import NodeRequestStatus
from scaling.scale_down import ScaleDownLoopSettings
from scaling.storage import LonghornState

RECENT_REQUESTS_KEPT = 200
REPORTED_PODS_KEPT = 5000


class AutoscalerSettings(BaseModel):
    cluster: str
    scan_interval_s: float = 10.0
    max_nodes_total: int | None = None
    readiness_timeout_s: float = 300.0
    readiness_poll_s: float = 2.0
    max_attempts: int = 5
    request_ttl_s: float = 3600.0
    use_search_attributes: bool = False
    # Bound the history of one run even when the server does not suggest continue-as-new yet.
    iterations_per_run: int = 500
    # Scale-down (seed 004 steps 8-9, Cluster Autoscaler's rules); per-group timers and
    # thresholds come from each NodeGroupWithPriority's scaleDown.
    scale_down_enabled: bool = True
    max_scale_down_per_loop: int = 10
    pdb_retry_s: float = 120.0  # how long a drain retries evictions refused by a PDB (429)
    eviction_retry_s: float = 2.0
    drain_timeout_s: float = 300.0  # evicted pods must be gone within this
    orphan_grace_s: float = 600.0


class LoopSummary(BaseModel):
    at: datetime | None = None
    unschedulable: int = 0
    fits_existing: int = 0
    covered_in_flight: int = 0
    planned_nodes: int = 0
    problems: int = 0
    nodes: int = 0
    pods_total: int = 0
    pods_running: int = 0


# --- scale-down: what crosses the NodeAutoscaler / NodeScaleDown / activity boundaries ------


class ScaleDownPhase(str, Enum):
    MARKED = "Marked"  # tainted + ScaleDownAt annotation, waiting on the timer
    CHECKING = "Checking"
    DRAINING = "Draining"
    DELETING = "Deleting"
    REMOVED = "Removed"
    CANCELLED = "Cancelled"  # pods landed, operator protected it, or the re-check found a blocker
    FAILED = "Failed"  # drain refused past the bounded retry time: node kept and untainted


FINAL_SCALE_DOWN_PHASES = frozenset({ScaleDownPhase.REMOVED, ScaleDownPhase.CANCELLED, ScaleDownPhase.FAILED})


class CandidateState(BaseModel):
    """One managed node as the last scale-down evaluation saw it (the status query lists these)."""

    node: str
    state: str  # scaling.scale_down.NodeState value
    reason: str | None = None
    message: str = ""
    group: str | None = None
    pool: str | None = None
    utilization: float = 0.0
    unneeded_since: float | None = None


class ScaleDownObservation(BaseModel):
    """What observe_scale_down returns: the ScaleDownInput fields that come from the cluster."""

    nodes: list[NodeInfo] = Field(default_factory=list)
    pods: list[PodInfo] = Field(default_factory=list)
    pdbs: list[PdbInfo] = Field(default_factory=list)
    groups: list[NodeGroup] = Field(default_factory=list)
    storage: LonghornState | None = None


class NodeScaleDownInput(BaseModel):
    cluster: str
    node: str
    group: str = ""
    pool: str | None = None
    provider: str = "kwok"
    provider_id: str = ""
    kind: str = "Empty"  # NodeState EMPTY / UNDERUSED, or "Manual" (operator's remove-now)
    scale_down_at: float  # epoch seconds: seed 004's ScaleDownAt
    parent_workflow_id: str | None = None
    use_search_attributes: bool = False
    pdb_retry_s: float = 120.0
    eviction_retry_s: float = 2.0
    drain_timeout_s: float = 300.0
    protected: list[str] = Field(default_factory=list)
    settings: ScaleDownLoopSettings = Field(default_factory=ScaleDownLoopSettings)


class ScaleDownStatus(BaseModel):
    node: str
    workflow_id: str = ""
    kind: str = "Empty"
    phase: ScaleDownPhase = ScaleDownPhase.MARKED
    scale_down_at: float = 0.0
    reason: str | None = None  # a blocker code when cancelled/failed
    message: str = ""
    evicted: list[str] = Field(default_factory=list)
    evictions_refused: int = 0
    provider_delete_failures: int = 0
    last_error: str = ""

    @property
    def final(self) -> bool:
        return self.phase in FINAL_SCALE_DOWN_PHASES


class MarkNodeInput(BaseModel):
    node: str
    scale_down_at: str  # RFC3339


class UnmarkNodeInput(BaseModel):
    node: str
    uncordon: bool = False


class EvictPodInput(BaseModel):
    namespace: str
    name: str


class EvictResult(BaseModel):
    outcome: str  # "evicted" | "refused" (429, a PDB) | "gone"
    message: str = ""


class WaitPodsGoneInput(BaseModel):
    node: str
    pods: list[str]  # "namespace/name"
    timeout_s: float = 300.0
    poll_s: float = 0.5


class NodeEvent(BaseModel):
    """A Kubernetes Event on a Node: ScaleDown / ScaleDownFailed / ScaleDownBlocked."""

    node: str
    reason: str
    message: str
    type: str = "Normal"


class Orphan(BaseModel):
    kind: str  # "NodeWithoutMachine" | "MachineWithoutNode"
    name: str
    provider: str = ""
    provider_id: str = ""
    since: float = 0.0
    reported: bool = False  # seen for longer than the grace period


class OrphanCheckInput(BaseModel):
    cluster: str
    providers: list[str]


class OrphanObservation(BaseModel):
    nodes: dict[str, str] = Field(default_factory=dict)  # growth-managed node -> providerID
    machines: list[dict[str, str]] = Field(default_factory=list)  # provider, provider_id, name
    checked: list[str] = Field(default_factory=list)  # providers that could list machines


def record_scale_down_update(state: AutoscalerState, update: ScaleDownStatus) -> None:
    """Fold a NodeScaleDown child's report into the autoscaler's state (duplicates ignored)."""
    if not update.final:
        state.scale_downs[update.node] = update
        return
    current = state.scale_downs.get(update.node)
    if current is None or current.workflow_id != update.workflow_id:
        if any(r.workflow_id == update.workflow_id and r.final for r in state.recent_scale_downs[-50:]):
            return
    state.scale_downs.pop(update.node, None)
    phase = update.phase.value
    state.scale_down_by_phase[phase] = state.scale_down_by_phase.get(phase, 0) + 1
    if update.reason and update.phase != ScaleDownPhase.REMOVED:
        state.blocked_by_reason[update.reason] = state.blocked_by_reason.get(update.reason, 0) + 1
    state.recent_scale_downs.append(update)
    del state.recent_scale_downs[:-RECENT_REQUESTS_KEPT]
    state.unneeded_since.pop(update.node, None)


# A Node's spec.providerID scheme names its provider, but not always by growth's provider name.
PROVIDER_ID_SCHEMES = {"hcloud": "hetzner", "kwok": "kwok"}


def provider_of(provider_id: str) -> str:
    scheme = provider_id.split("://", 1)[0] if "://" in provider_id else ""
    return PROVIDER_ID_SCHEMES.get(scheme, scheme)


def orphans_from(obs: OrphanObservation, previous: list[Orphan], now: float, grace_s: float) -> list[Orphan]:
    """Nodes pointing at a machine the provider no longer has, machines without a Node.

    Each is reported once it has been seen for longer than the grace period (a machine boots
    before its Node registers; a Node lingers a moment after its machine is deleted)."""
    seen = {(o.kind, o.name): o.since for o in previous}
    by_provider_id = {m["provider_id"]: m for m in obs.machines if m.get("provider_id")}
    node_ids = set(obs.nodes.values())
    out: list[Orphan] = []
    for node, pid in sorted(obs.nodes.items()):
        provider = provider_of(pid)
        if provider in obs.checked and pid not in by_provider_id:
            out.append(Orphan(kind="NodeWithoutMachine", name=node, provider=provider, provider_id=pid,
                              since=seen.get(("NodeWithoutMachine", node), now)))
    for m in obs.machines:
        if m.get("provider_id") not in node_ids:
            out.append(Orphan(kind="MachineWithoutNode", name=m.get("name", ""), provider=m.get("provider", ""),
                              provider_id=m.get("provider_id", ""), since=seen.get(("MachineWithoutNode", m.get("name", "")), now)))
    return out


def mark_reported(orphans: list[Orphan], now: float, grace_s: float) -> list[Orphan]:
    return [o.model_copy(update={"reported": now - o.since >= grace_s}) for o in orphans]


class AutoscalerState(BaseModel):
    paused: bool = False
    seq: int = 0
    iterations: int = 0
    runs: int = 1
    in_flight: dict[str, NodeRequestStatus] = Field(default_factory=dict)
    recent: list[NodeRequestStatus] = Field(default_factory=list)
    finished_by_phase: dict[str, int] = Field(default_factory=dict)
    attempts_by_pool: dict[str, dict[str, int]] = Field(default_factory=dict)
    nodes_created: int = 0
    never_satisfiable: dict[str, PodProblem] = Field(default_factory=dict)
    groups_fingerprint: str = ""
    reported_pods: list[str] = Field(default_factory=list)  # pod uid + reason already evented
    invalid_groups: list[SpecProblem] = Field(default_factory=list)
    banned_pools: list[str] = Field(default_factory=list)  # "group/pool"
    backoff_until: dict[str, float] = Field(default_factory=dict)  # "group/pool" -> epoch seconds
    backoff_failures: dict[str, int] = Field(default_factory=dict)
    last_loop: LoopSummary = Field(default_factory=LoopSummary)
    # scale-down
    last_scale_up_at: float | None = None
    unneeded_since: dict[str, float] = Field(default_factory=dict)
    candidates: dict[str, CandidateState] = Field(default_factory=dict)
    scale_downs: dict[str, ScaleDownStatus] = Field(default_factory=dict)  # node -> running child
    recent_scale_downs: list[ScaleDownStatus] = Field(default_factory=list)
    scale_down_by_phase: dict[str, int] = Field(default_factory=dict)
    blocked_by_reason: dict[str, int] = Field(default_factory=dict)  # finished children
    protected_nodes: list[str] = Field(default_factory=list)
    orphans: list[Orphan] = Field(default_factory=list)


class AutoscalerInput(BaseModel):
    settings: AutoscalerSettings
    state: AutoscalerState | None = None


class AutoscalerStatus(BaseModel):
    cluster: str
    paused: bool
    iterations: int
    runs: int
    in_flight: list[NodeRequestStatus]
    recent: list[NodeRequestStatus]
    requests_by_phase: dict[str, int]
    attempts_by_pool: dict[str, dict[str, int]]
    nodes_created: int
    never_satisfiable: list[PodProblem]
    invalid_groups: list[SpecProblem]
    banned_pools: list[str]
    backoff_until: dict[str, float]
    last_loop: LoopSummary
    candidates: list[CandidateState] = Field(default_factory=list)
    scale_downs: list[ScaleDownStatus] = Field(default_factory=list)
    recent_scale_downs: list[ScaleDownStatus] = Field(default_factory=list)
    scale_down_by_phase: dict[str, int] = Field(default_factory=dict)
    blocked_by_reason: dict[str, int] = Field(default_factory=dict)
    protected_nodes: list[str] = Field(default_factory=list)
    orphans: list[Orphan] = Field(default_factory=list)


def groups_fingerprint(groups: list[NodeGroup]) -> str:
    """Changes whenever any group's spec changes: never-satisfiable pods are re-evaluated then."""
    blob = json.dumps([g.model_dump(mode="json") for g in groups], sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def in_flight_for_planner(requests: dict[str, NodeRequestStatus]) -> list[InFlightRequest]:
    return [
        InFlightRequest(
            id=r.id,
            group=r.group,
            pool=r.current_pool,
            server_type=r.server_type,
            provider=r.provider,
            requirements=r.requirements,
            pod_uids=r.pod_uids,
            phase=r.phase,
        )
        for r in requests.values()
        if r.phase in (RequestPhase.PENDING, RequestPhase.PROVISIONING)
    ]


def record_request_update(state: AutoscalerState, update: NodeRequestStatus) -> None:
    """Fold a NodeRequest's reported status into the autoscaler's state."""
    if not update.final:
        state.in_flight[update.id] = update
        return
    if state.in_flight.pop(update.id, None) is None and any(r.id == update.id for r in state.recent):
        return  # a duplicate final report
    phase = update.phase.value
    state.finished_by_phase[phase] = state.finished_by_phase.get(phase, 0) + 1
    for a in update.attempts:
        per_pool = state.attempts_by_pool.setdefault(a.pool, {})
        per_pool[a.result.value] = per_pool.get(a.result.value, 0) + 1
    if update.phase == RequestPhase.READY:
        state.nodes_created += 1
    state.recent.append(update)
    del state.recent[:-RECENT_REQUESTS_KEPT]


def status_of(settings: AutoscalerSettings, state: AutoscalerState) -> AutoscalerStatus:
    by_phase = Counter(state.finished_by_phase)
    attempts: dict[str, dict[str, int]] = defaultdict(dict)
    for pool, results in state.attempts_by_pool.items():
        attempts[pool].update(results)
    for r in state.in_flight.values():
        by_phase[r.phase.value] += 1
        for a in r.attempts:
            attempts[a.pool][a.result.value] = attempts[a.pool].get(a.result.value, 0) + 1
    return AutoscalerStatus(
        cluster=settings.cluster,
        paused=state.paused,
        iterations=state.iterations,
        runs=state.runs,
        in_flight=list(state.in_flight.values()),
        recent=state.recent[-50:],
        requests_by_phase=dict(by_phase),
        attempts_by_pool=dict(attempts),
        nodes_created=state.nodes_created,
        never_satisfiable=list(state.never_satisfiable.values()),
        invalid_groups=state.invalid_groups,
        banned_pools=state.banned_pools,
        backoff_until=state.backoff_until,
        last_loop=state.last_loop,
        candidates=sorted(state.candidates.values(), key=lambda c: c.node),
        scale_downs=sorted(state.scale_downs.values(), key=lambda c: c.node),
        recent_scale_downs=state.recent_scale_downs[-50:],
        scale_down_by_phase=state.scale_down_by_phase,
        blocked_by_reason=state.blocked_by_reason,
        protected_nodes=state.protected_nodes,
        orphans=[o for o in state.orphans if o.reported],
    )
