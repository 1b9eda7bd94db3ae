"""What-if replay of a NodeAutoscaler: the observations it recorded, planned again by the current
planner under other node groups and/or settings (`growth nodes what-if`).

Each recorded loop is replanned on its own. A loop that recorded its decision (the local
activity plan_scale_up, whose result holds what the planner was given: demand, groups,
catalogue, the requests it counted in flight, limits) is planned again by today's planner on
exactly that input, with the changed groups and settings. Loops without one (runs started by
0.1.0, and loops that had nothing to decide) are rebuilt from the history: the requests that
were really in flight at the time (the run's input state, the requests the loop started, and
their `request_changed` reports). Either way a loop's figures answer "with what was actually
running, what would this loop have started?". Loops are not chained through the counterfactual: a node the
what-if would have added does not exist in the next recorded observation. Headroom pods and the
catalogue are the recorded ones (the latest catalogue the loop fetched; the first one for loops
before it). Operator bans, quota backoffs and capacity memory are
replayed as the loop folded them (at the reports' recorded times).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from datetime import datetime

from pydantic import BaseModel, Field

from scaling.history import RecordedEvent, RecordedHistory, first_input
from scaling.nodes import contracts
from scaling.nodes.catalogue import catalogue_index
from scaling.nodes.contracts import ClusterObservation
from scaling.nodes.headroom import is_headroom
from scaling.nodes.loop import apply_attempt_backoff, newly_reported_attempt, unavailable_pools
from scaling.nodes.models import AttemptResult, InFlightRequest, NodeGroup, PlannedNode, RequestPhase, ServerType
from scaling.nodes.scale_up.capacity import remember_insufficient_capacity
from scaling.nodes.scale_up.decision import ScaleUpDecision, decide_scale_up, plan_new_nodes
from scaling.nodes.scale_up.demand import PendingDemand
from scaling.nodes.scale_up.planning import Catalogue
from scaling.nodes.scale_up.requests import NodeRequestInput, NodeRequestStatus, StartRequestsInput
from scaling.nodes.settings import AutoscalerSettings
from scaling.nodes.state import (
    AutoscalerInput,
    NodeAutoscalerState,
    counted_once,
    in_flight_for_planner,
    record_request_update,
    with_landing_requests,
)

AUTOSCALER_TYPE = "NodeAutoscaler"
REQUEST_TYPE = "NodeRequest"


class RecordedLoop(BaseModel):
    """One loop as the history holds it."""

    run_id: str
    at: datetime
    observation: ClusterObservation
    catalogue: list[ServerType] = Field(default_factory=list)
    in_flight: list[InFlightRequest] = Field(default_factory=list)  # as the planner counted them
    # (group, pool) and (provider, server type) pairs skipped: bans, quota backoffs, capacity memory
    unavailable: list[tuple[str, str]] = Field(default_factory=list)
    started: list[NodeRequestInput] = Field(default_factory=list)  # what the loop really started
    settings: AutoscalerSettings
    decision: ScaleUpDecision | None = None  # what the loop recorded of its decision, if it did


class NodeChoice(BaseModel):
    group: str
    pool: str
    provider: str
    server_type: str
    count: int
    price_hourly: float  # per node; 0 when the catalogue does not know the type


class LoopOutcome(BaseModel):
    nodes: int = 0
    choices: list[NodeChoice] = Field(default_factory=list)
    cost_per_hour: float = 0.0
    pods_pending: int | None = None  # real pods the plan left without a node (None: not known)


class LoopDifference(BaseModel):
    nodes: int = 0
    cost_per_hour: float = 0.0
    server_types: dict[str, int] = Field(default_factory=dict)  # what-if minus recorded, per type


class WhatIfLoop(BaseModel):
    loop: int  # 1-based over the history read
    run_id: str
    at: datetime
    unschedulable: int
    recorded: LoopOutcome  # what the loop started (pods pending: unknown, not in the history)
    what_if: LoopOutcome
    difference: LoopDifference


class WhatIfReport(BaseModel):
    workflow_id: str
    runs: int
    loops: list[WhatIfLoop] = Field(default_factory=list)
    total_recorded: LoopOutcome = Field(default_factory=LoopOutcome)
    total_what_if: LoopOutcome = Field(default_factory=LoopOutcome)
    difference: LoopDifference = Field(default_factory=LoopDifference)
    loops_shown: int = 0  # the first `loops_shown` loops are listed; totals cover all
    truncated: str = ""
    notes: list[str] = Field(default_factory=list)


def recorded_providers(history: RecordedHistory) -> set[str]:
    """Providers the recorded loop knew (its groups' pools and its catalogue): a changed group
    may name only these, since the replay has no other catalogue."""
    out: set[str] = set()
    for e in history.events:
        if e.kind != "activity" or not e.result:
            continue
        if e.name == contracts.GET_CATALOGUE:
            out |= {ServerType.model_validate(t).provider for t in e.result}
        elif e.name == contracts.OBSERVE_CLUSTER:
            obs = ClusterObservation.model_validate(e.result)
            out |= {p.provider for g in obs.groups for p in g.pools}
    return out


def _status_of(inp: NodeRequestInput, at: datetime) -> NodeRequestStatus:
    first = inp.candidates[0]
    return NodeRequestStatus(
        id=inp.id,
        group=inp.group,
        current_pool=first.name,
        server_type=first.server_type,
        provider=first.provider,
        requirements=inp.requirements,
        pod_uids=inp.pod_uids,
        pods=inp.pods,
        started_at=at,
    )


def started_requests(event: RecordedEvent) -> list[NodeRequestInput]:
    """The node requests an event started: a batch's members each as a NodeRequest of its own."""
    if event.kind == "activity" and event.name == contracts.START_NODE_REQUESTS:
        started = StartRequestsInput.model_validate(first_input(event))
        members = [b.member_input(i) for b in started.batches for i in range(len(b.members))]
        return [*started.requests, *members]
    if event.kind == "child" and event.name == REQUEST_TYPE:  # runs that started children
        return [NodeRequestInput.model_validate(first_input(event))]
    return []


def reported_requests(event: RecordedEvent) -> list[NodeRequestStatus]:
    """The reports a signal brought the loop: a NodeRequest's one, or a batch's members'."""
    if event.kind != "signal":
        return []
    if event.name == contracts.REQUEST_CHANGED:
        return [NodeRequestStatus.model_validate(first_input(event))]
    if event.name == contracts.REQUESTS_CHANGED:
        return [NodeRequestStatus.model_validate(r) for r in first_input(event) or []]
    return []


def _fold_request_changed(
    state: NodeAutoscalerState, settings: AutoscalerSettings, update: NodeRequestStatus, at: datetime
) -> None:
    """The NodeAutoscaler's `request_changed` handler, minus what only the live loop needs."""
    attempt = newly_reported_attempt(state.in_flight.get(update.id), update)
    record_request_update(state, update)
    if attempt is None:
        return
    now = at.timestamp()
    apply_attempt_backoff(state.backoff_failures, state.backoff_until, update.group, attempt, now)
    if attempt.result == AttemptResult.INSUFFICIENT_CAPACITY:
        state.capacity_unavailable_until = remember_insufficient_capacity(
            state.capacity_unavailable_until, update.provider, update.server_type, now, settings.capacity_memory_s
        )


_AWAITED = (contracts.OBSERVE_CLUSTER, contracts.GET_CATALOGUE)
OBSERVING = "observing"  # an observation's scheduling: requests Ready from here on may be landing


def _planning_order(history: RecordedHistory) -> list[tuple[str, RecordedEvent]]:
    """The steps in the order the loop saw them: an observation or catalogue where its result
    arrived (the loop plans after both; an observation also where it began), everything else
    where it was recorded."""
    steps: list[tuple[tuple[int, int], str, RecordedEvent]] = []
    for e in history.events:
        run = history.runs.index(e.run_id) if e.run_id in history.runs else 0
        if e.kind == "activity" and e.name in _AWAITED:
            if e.result is None:
                continue  # never completed: nothing was planned from it
            if e.name == contracts.OBSERVE_CLUSTER:
                steps.append(((run, e.event_id), OBSERVING, e))
            steps.append(((run, e.completed_event_id), "", e))
        else:
            steps.append(((run, e.event_id), "", e))
    return [(tag, e) for _, tag, e in sorted(steps, key=lambda s: s[0])]


def recorded_loops(history: RecordedHistory) -> list[RecordedLoop]:
    """Every completed observation of a NodeAutoscaler history, with what the loop knew when it
    planned: the reports (signals) that arrived until its next command count, as they do live."""
    loops: list[RecordedLoop] = []
    state: NodeAutoscalerState | None = None
    settings: AutoscalerSettings | None = None
    catalogue: list[ServerType] = []
    current: RecordedLoop | None = None
    deciding = False  # `current` still waits for its planning moment
    before: list[InFlightRequest] = []  # in flight when the observation began
    ready_since: set[str] = set()  # requests Ready since then (landing: counted, as the loop does)

    def decide(at: datetime) -> None:
        nonlocal deciding
        if current is None or not deciding or state is None:
            return
        deciding = False
        obs = current.observation
        in_flight = with_landing_requests(in_flight_for_planner(state.in_flight), before, ready_since)
        current.in_flight = counted_once(in_flight, obs.requests_with_ready_node)
        current.unavailable = sorted(
            unavailable_pools(state.banned_pools, state.backoff_until, at.timestamp(), state.capacity_unavailable_until)
        )

    for tag, event in _planning_order(history):
        if tag == OBSERVING and state is not None:
            before, ready_since = in_flight_for_planner(state.in_flight), set()
            continue
        if event.kind == "started":
            decide(event.at)
            inp = AutoscalerInput.model_validate(first_input(event))
            settings, state, current = inp.settings, inp.state or NodeAutoscalerState(), None
            continue
        if state is None or settings is None:
            continue  # a history cut before its run's start
        if reports := reported_requests(event):
            for update in reports:
                _fold_request_changed(state, settings, update, event.at)
                if update.phase == RequestPhase.READY:
                    ready_since.add(update.id)
            continue
        if event.kind == "update" and event.name in ("ban_pool", "unban_pool"):
            pool = str(first_input(event))
            if event.name == "ban_pool" and pool not in state.banned_pools:
                state.banned_pools.append(pool)
            elif event.name == "unban_pool" and pool in state.banned_pools:
                state.banned_pools.remove(pool)
            continue
        if event.kind == "activity" and event.name == contracts.GET_CATALOGUE:
            catalogue = [ServerType.model_validate(t) for t in event.result]
            if current is not None:
                current.catalogue = catalogue
                deciding = True  # the loop plans after the catalogue arrives, with the reports by then
            for loop in loops:  # loops before the first fetch: its catalogue
                loop.catalogue = loop.catalogue or catalogue
            continue
        if event.kind == "local_activity" and event.name == contracts.PLAN_SCALE_UP:
            if current is not None and event.result is not None:
                current.decision = ScaleUpDecision.model_validate(event.result)
            continue
        decide(event.at)  # any other command: the loop has planned
        if event.kind == "activity" and event.name == contracts.OBSERVE_CLUSTER:
            current = RecordedLoop(
                run_id=event.run_id,
                at=event.at,
                observation=ClusterObservation.model_validate(event.result),
                catalogue=catalogue,
                settings=settings,
            )
            loops.append(current)
            deciding = True
        elif started := started_requests(event):
            if current is not None:
                current.started.extend(started)
            for inp in started:
                state.in_flight[inp.id] = _status_of(inp, event.at)
    decide(loops[-1].at if loops else datetime.min)
    return loops


def plan_loop(
    loop: RecordedLoop, groups: Sequence[NodeGroup] | None, settings: AutoscalerSettings
) -> tuple[list[PlannedNode], int]:
    """The nodes the loop would start under `groups` (None: the recorded ones) and `settings`,
    with the pods left pending: the NodeAutoscaler's planning step, without its I/O."""
    recorded = loop.decision.input if loop.decision is not None else None
    if recorded is not None:  # today's planner on what the loop's planner was given
        inp = recorded.model_copy(
            update={
                "groups": list(groups) if groups is not None else recorded.groups,
                "max_nodes_total": settings.max_nodes_total,
                "max_price_per_hour_total": settings.max_price_per_hour_total,
                "enforce_min_nodes": settings.enforce_min_nodes,
                "max_requests_in_flight": settings.max_requests_in_flight,
            }
        )
        decision = decide_scale_up(inp)
        new_nodes, _ = decision.planned()
        return new_nodes, pods_left_pending(recorded.demand, decision.plan.pods_covered, new_nodes)
    obs = loop.observation
    split, new_nodes = plan_new_nodes(
        obs.demand,
        list(groups) if groups is not None else obs.groups,
        catalogue_index(loop.catalogue),
        loop.in_flight,
        set(loop.unavailable),
        max_nodes_total=settings.max_nodes_total,
        max_price_per_hour_total=settings.max_price_per_hour_total,
        enforce_min_nodes=settings.enforce_min_nodes,
        requests_in_flight=len(loop.in_flight),
        max_requests_in_flight=settings.max_requests_in_flight,
    )
    return new_nodes, pods_left_pending(obs.demand, split.plan.pods_covered, new_nodes)


def pods_left_pending(demand: PendingDemand, covered: int, new_nodes: Sequence[PlannedNode]) -> int:
    """Real pods of the loop's demand that neither in-flight requests nor new nodes hold (and
    those deferred to a later loop). Counted from what was placed, not from the plan's
    problems: a pod the planner leaves out without a problem still counts as pending."""
    wanted = sum(s.count for s in demand.shapes if not is_headroom(s.key)) + demand.pods_deferred
    placed = sum(n for node in new_nodes for key, n in node.pods.items() if not is_headroom(key))
    return max(wanted - covered - placed, 0)


def _outcome(firsts: Sequence[tuple[str, str, str, str]], catalogue: Catalogue, pending: int | None) -> LoopOutcome:
    counts = Counter(firsts)
    choices = []
    for (group, pool, provider, server_type), count in sorted(counts.items()):
        t = catalogue.get((provider, server_type.lower()))
        price = t.price_hourly if t is not None else 0.0
        choices.append(
            NodeChoice(
                group=group, pool=pool, provider=provider, server_type=server_type, count=count, price_hourly=price
            )
        )
    cost = sum(c.count * c.price_hourly for c in choices)
    return LoopOutcome(nodes=sum(counts.values()), choices=choices, cost_per_hour=round(cost, 6), pods_pending=pending)


def _by_type(o: LoopOutcome) -> Counter[str]:
    out: Counter[str] = Counter()
    for c in o.choices:
        out[f"{c.provider}/{c.server_type}"] += c.count
    return out


def difference(recorded: LoopOutcome, what_if: LoopOutcome) -> LoopDifference:
    types = _by_type(what_if)
    types.subtract(_by_type(recorded))
    return LoopDifference(
        nodes=what_if.nodes - recorded.nodes,
        cost_per_hour=round(what_if.cost_per_hour - recorded.cost_per_hour, 6),
        server_types={k: v for k, v in sorted(types.items()) if v},
    )


def _total(outcomes: Sequence[LoopOutcome]) -> LoopOutcome:
    merged: Counter[tuple[str, str, str, str]] = Counter()
    prices: dict[tuple[str, str, str, str], float] = {}
    for o in outcomes:
        for c in o.choices:
            key = (c.group, c.pool, c.provider, c.server_type)
            merged[key] += c.count
            prices[key] = c.price_hourly
    choices = [
        NodeChoice(group=k[0], pool=k[1], provider=k[2], server_type=k[3], count=n, price_hourly=prices[k])
        for k, n in sorted(merged.items())
    ]
    pending = [o.pods_pending for o in outcomes]
    return LoopOutcome(
        nodes=sum(merged.values()),
        choices=choices,
        cost_per_hour=round(sum(o.cost_per_hour for o in outcomes), 6),
        # Summed over loops: a pod pending for three loops counts three times (pod-loops).
        pods_pending=None if any(p is None for p in pending) else sum(p for p in pending if p is not None),
    )


def what_if(
    history: RecordedHistory,
    groups: Sequence[NodeGroup] | None = None,
    settings_changes: dict | None = None,
    max_loops_shown: int = 200,
) -> WhatIfReport:
    """Replay every recorded loop under the changed groups and settings (module doc)."""
    loops = recorded_loops(history)
    report = WhatIfReport(workflow_id=history.workflow_id, runs=len(history.runs), truncated=history.truncated)
    if not loops:
        report.notes.append("no completed observe_cluster in the history: nothing to replay")
        return report
    recorded_outcomes: list[LoopOutcome] = []
    what_if_outcomes: list[LoopOutcome] = []
    for n, loop in enumerate(loops, start=1):
        settings = loop.settings.model_copy(update=settings_changes or {})
        catalogue = catalogue_index(loop.catalogue)
        planned, pending = plan_loop(loop, groups, settings)
        mine = _outcome(
            [(p.group, p.pool, p.candidates[0].provider, p.candidates[0].server_type) for p in planned],
            catalogue,
            pending,
        )
        real = _outcome(
            [
                (r.group, r.candidates[0].name, r.candidates[0].provider, r.candidates[0].server_type)
                for r in loop.started
            ],
            catalogue,
            None,
        )
        recorded_outcomes.append(real)
        what_if_outcomes.append(mine)
        if n <= max_loops_shown:
            report.loops.append(
                WhatIfLoop(
                    loop=n,
                    run_id=loop.run_id,
                    at=loop.at,
                    unschedulable=loop.observation.demand.unschedulable,
                    recorded=real,
                    what_if=mine,
                    difference=difference(real, mine),
                )
            )
    report.loops_shown = len(report.loops)
    if len(loops) > max_loops_shown:
        report.notes.append(f"{len(loops)} loops replayed, the first {max_loops_shown} listed; totals cover all")
    report.total_recorded = _total(recorded_outcomes)
    report.total_what_if = _total(what_if_outcomes)
    report.difference = difference(report.total_recorded, report.total_what_if)
    known = {t.provider for loop in loops for t in loop.catalogue}
    for g in groups or []:
        for pool in g.pools:
            if pool.provider not in known:
                report.notes.append(
                    f"group {g.name}: provider {pool.provider} is not in the recorded catalogue; its pools cannot be planned"
                )
    return report
