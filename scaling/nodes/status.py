"""NodeAutoscaler's status query: what `growth nodes status` and the demo read."""

from __future__ import annotations

from collections import Counter, defaultdict

from pydantic import BaseModel, Field

from scaling.nodes.gc.orphans import Orphan
from scaling.nodes.models import (
    PodProblem,
    SpecProblem,
)
from scaling.nodes.scale_down.removals import CandidateState, ScaleDownStatus
from scaling.nodes.scale_up.requests import NodeRequestStatus
from scaling.nodes.settings import AutoscalerSettings
from scaling.nodes.state import LoopSummary, NodeAutoscalerState


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
    # The last loop's pods it could not plan, one per shape (MaxNodesReached, NoAvailablePool, ...).
    problems: list[PodProblem] = Field(default_factory=list)
    invalid_groups: list[SpecProblem]
    banned_pools: list[str]
    backoff_until: dict[str, float]
    capacity_unavailable_until: dict[str, float] = Field(default_factory=dict)
    last_loop: LoopSummary
    candidates: list[CandidateState] = Field(default_factory=list)  # the most telling managed nodes
    candidates_by_state: dict[str, int] = Field(default_factory=dict)  # every managed node counted
    scale_downs: list[ScaleDownStatus] = Field(default_factory=list)
    recent_scale_downs: list[ScaleDownStatus] = Field(default_factory=list)
    scale_down_by_phase: dict[str, int] = Field(default_factory=dict)
    blocked_by_reason: dict[str, int] = Field(default_factory=dict)
    protected_nodes: list[str] = Field(default_factory=list)
    orphans: list[Orphan] = Field(default_factory=list)


def status_of(settings: AutoscalerSettings, state: NodeAutoscalerState) -> AutoscalerStatus:
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
        problems=list(state.last_problems.values()),
        invalid_groups=state.invalid_groups,
        banned_pools=state.banned_pools,
        backoff_until=state.backoff_until,
        capacity_unavailable_until=state.capacity_unavailable_until,
        last_loop=state.last_loop,
        candidates=sorted(state.candidates.values(), key=lambda c: c.node),
        candidates_by_state=state.candidates_by_state,
        scale_downs=sorted(state.scale_downs.values(), key=lambda c: c.node),
        recent_scale_downs=state.recent_scale_downs[-50:],
        scale_down_by_phase=state.scale_down_by_phase,
        blocked_by_reason=state.blocked_by_reason,
        protected_nodes=state.protected_nodes,
        orphans=[o for o in state.orphans if o.reported],
    )
