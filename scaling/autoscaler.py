"""NodeAutoscaler: its settings, its durable state (carried across continue-as-new) and status."""

from __future__ import annotations

import hashlib
import json
from collections import Counter, defaultdict
from datetime import datetime

from pydantic import BaseModel, Field

from scaling.models import InFlightRequest, NodeGroup, PodProblem, RequestPhase, SpecProblem
from scaling.requests import NodeRequestStatus

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
    )
