"""What-if replay of a FleetAutoscaler (`growth fleet what-if`): the region's registry as the
history recorded it, evaluated round by round under another fleet configuration (capacity
rules, limits, dynamic scaling switches).

The registry is rebuilt from the history: the run's input state, the clusters the loop started,
the clusters' `cluster_changed` reports, and the signals the loop sent them (instances placed and
released, deprovision, restore, delete; one by one or batched in `cluster_messages`). A round
ends where the loop waits (its timer) or continues as new; it is evaluated with the registry as
the loop evaluated it: before its own decisions, and without the reports delivered after the
workflow task that ended its wait (the loop reads those in the next round). As for the nodes
loop, rounds are not chained through the counterfactual: a cluster only the what-if would
start does not appear in later rounds, so a type the what-if wants and the recording never
started is counted in every round until the recorded registry changes (the totals count
decisions, not clusters). The failure backoff and max_clusters are not
replayed. A second cluster of one type started before the loop waits again begins a new round
(a round starts at most one cluster per type).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from datetime import datetime

from pydantic import BaseModel, Field

from scaling.fleet import contracts
from scaling.fleet.capacity import TypeRules, type_rules
from scaling.fleet.config import FleetConfig
from scaling.fleet.evaluation import evaluate_region
from scaling.fleet.lifecycle import ClusterReport, DataPlaneClusterInput
from scaling.fleet.models import ClusterPhase, ClusterRecord, ManagedInstance, TypeUnits
from scaling.fleet.region import ClusterMessages, FleetAutoscalerInput, merge_cluster_report, registry_of
from scaling.history import RecordedEvent, RecordedHistory, first_input


class RecordedRound(BaseModel):
    run_id: str
    at: datetime
    clusters: list[ClusterRecord]  # the registry as the round found it
    started: list[str] = Field(default_factory=list)  # instance types of the clusters it started
    marked: list[str] = Field(default_factory=list)  # clusters it marked deprovisioning
    provider: str
    region: str
    config: FleetConfig


class FleetDecisions(BaseModel):
    scale_up: dict[str, int] = Field(default_factory=dict)  # instance type -> clusters started
    removals: list[str] = Field(default_factory=list)  # clusters marked deprovisioning

    @property
    def count(self) -> int:
        return sum(self.scale_up.values()) + len(self.removals)


class FleetWhatIfRound(BaseModel):
    round: int
    run_id: str
    at: datetime
    clusters: int
    units: dict[str, str] = Field(default_factory=dict)  # type -> "consumed/capacity" as recorded
    happened: FleetDecisions
    what_if: FleetDecisions


class FleetWhatIfReport(BaseModel):
    workflow_id: str
    runs: int
    rounds: list[FleetWhatIfRound] = Field(default_factory=list)  # those where either side acted
    rounds_replayed: int = 0
    total_happened: FleetDecisions = Field(default_factory=FleetDecisions)
    total_what_if: FleetDecisions = Field(default_factory=FleetDecisions)
    difference: dict[str, int] = Field(default_factory=dict)  # type -> what-if minus happened scale-ups
    truncated: str = ""
    notes: list[str] = Field(default_factory=list)


def _fold(clusters: dict[str, ClusterRecord], instances: dict[str, ManagedInstance], e: RecordedEvent) -> None:
    """A sent signal's or a report's effect on the registry, as the loop applied it."""
    if e.kind == "signal" and e.name == contracts.SIGNAL_CLUSTER_CHANGED:
        report = ClusterReport.model_validate(first_input(e))
        after = merge_cluster_report(clusters.get(report.cluster_id), report)
        if after is None:
            clusters.pop(report.cluster_id, None)
        else:
            clusters[report.cluster_id] = after
        return
    if e.kind == "signal_out":
        _owed(clusters, instances, e.workflow_id.rsplit("/", 1)[-1], e.name, first_input(e))


def _owed(
    clusters: dict[str, ClusterRecord], instances: dict[str, ManagedInstance], cid: str, signal: str, arg: object
) -> None:
    """One message the region sent cluster `cid`, as the loop applied it to its registry."""
    rec = clusters.get(cid)
    if signal == contracts.SIGNAL_INSTANCE_PLACED:
        inst = ManagedInstance.model_validate(arg)
        instances[inst.id] = inst
        if rec is not None:
            rec.types.setdefault(inst.instance_type, TypeUnits()).consumed_units += inst.units
            rec.instances += 1
    elif signal == contracts.SIGNAL_INSTANCE_RELEASED:
        # the id, or (patch instance-index) the released instance itself: placed in an earlier
        # run, it is in no run's input
        released = ManagedInstance.model_validate(arg) if isinstance(arg, dict) else None
        inst = instances.pop(released.id if released else str(arg), None) or released
        if rec is not None and inst is not None:
            units = rec.types.setdefault(inst.instance_type, TypeUnits())
            units.consumed_units = max(0, units.consumed_units - inst.units)
            rec.instances = max(0, rec.instances - 1)
    elif rec is not None and signal == contracts.SIGNAL_DEPROVISION:
        rec.phase = ClusterPhase.DEPROVISIONING
    elif rec is not None and signal == contracts.SIGNAL_RESTORE:
        rec.phase = ClusterPhase.READY
    elif rec is not None and signal == contracts.SIGNAL_DELETE:
        rec.delete_sent = True


def _unbatched(events: list[RecordedEvent]) -> list[RecordedEvent]:
    """The batched outbox (patch batched-outbox) read as the messages it carries, each as the
    signal it replaced: its placements and releases are then ordered, and its deprovision marks
    counted as decisions, as the unbatched ones are."""
    out: list[RecordedEvent] = []
    for e in events:
        if e.kind != "signal_out" or e.name != contracts.SIGNAL_CLUSTER_MESSAGES:
            out.append(e)
            continue
        for msg in ClusterMessages.model_validate(first_input(e)).messages:
            arg = msg.instance.model_dump(mode="json") if msg.instance is not None else msg.instance_id
            out.append(e.model_copy(update={"name": msg.signal, "input": [arg] if arg else []}))
    return out


def _registered(e: RecordedEvent) -> bool:
    """The start of a registered cluster's workflow: the cluster exists already, no decision."""
    arg = first_input(e)
    return (
        e.kind == "child" and e.name == contracts.CLUSTER_WORKFLOW and isinstance(arg, dict) and bool(arg.get("manual"))
    )


def _is_decision(e: RecordedEvent) -> bool:
    return (
        (e.kind == "child" and e.name == contracts.CLUSTER_WORKFLOW and not _registered(e))
        or (e.kind == "signal_out" and e.name == contracts.SIGNAL_DEPROVISION)
        or e.kind in ("timer", "continued")
    )


def _loop_order(events: list[RecordedEvent]) -> list[RecordedEvent]:
    """The events in the order the loop read them: each round's placements ahead of its
    decisions, and what came in after its evaluation behind its end.

    The loop places waiting instances (and its handlers place or release them) before it
    evaluates, but their signals to the clusters are sent when the outbox is flushed, after the
    round's cluster starts (often in a later workflow task). So an instance placed or released
    that is recorded after a decision, before the loop waits again, counted for that decision.
    A round evaluates in the workflow task that ends its wait (the one that cancels its timer, or
    the first after the timer fired); a report delivered after that task, while the round still
    starts clusters or sends its signals, is read by the next round, and so is anything else
    that came in after a decision."""
    out: list[RecordedEvent] = []
    held: list[RecordedEvent] = []  # decisions waiting for the placements flushed after them
    after: list[RecordedEvent] = []  # what came in after the evaluation: applied when the round ends
    moved = (contracts.SIGNAL_INSTANCE_PLACED, contracts.SIGNAL_INSTANCE_RELEASED)
    evaluated = fired = False
    for e in events:
        if e.kind in ("timer", "continued", "started"):
            out.extend([*held, e, *after])
            held, after = [], []
            evaluated = fired = False
            continue
        if e.kind == "timer_ended":
            evaluated = evaluated or e.name == "canceled"  # by the task just before: the round ran there
            fired = e.name == "fired"
        elif e.kind == "task" and fired:
            evaluated = True
        if e.kind == "signal_out" and e.name in moved or e.kind in ("task", "timer_ended"):
            out.append(e)
        elif _is_decision(e):
            held.append(e)
        elif held or evaluated:
            after.append(e)
        else:
            out.append(e)
    return out + held + after


def recorded_rounds(history: RecordedHistory) -> list[RecordedRound]:
    rounds: list[RecordedRound] = []
    clusters: dict[str, ClusterRecord] = {}
    instances: dict[str, ManagedInstance] = {}
    inp: FleetAutoscalerInput | None = None
    snapshot: list[ClusterRecord] | None = None  # the registry before this round's first decision
    started: list[str] = []
    marked: list[str] = []

    def registry() -> list[ClusterRecord]:
        # deep: the folds below add to a record's TypeUnits in place, and a round is evaluated
        # only after every round is read (a shallow copy showed a round the later placements)
        return [c.model_copy(deep=True) for c in clusters.values()]

    def close(e: RecordedEvent) -> None:
        """The round ends: evaluated on the registry before its first decision."""
        nonlocal snapshot, started, marked
        assert inp is not None
        rounds.append(
            RecordedRound(
                run_id=e.run_id,
                at=e.at,
                clusters=snapshot if snapshot is not None else registry(),
                started=started,
                marked=marked,
                provider=inp.settings.provider,
                region=inp.settings.region,
                config=inp.config,
            )
        )
        snapshot, started, marked = None, [], []

    for e in _loop_order(_unbatched(history.events)):
        if e.kind == "started":
            inp = FleetAutoscalerInput.model_validate(first_input(e))
            state = inp.state
            clusters = {k: v.model_copy(deep=True) for k, v in (registry_of(state) if state else {}).items()}
            instances = dict(state.instances) if state else {}
            snapshot, started, marked = None, [], []
            continue
        if inp is None:
            continue
        if e.kind == "child" and e.name == contracts.CLUSTER_WORKFLOW:
            child = DataPlaneClusterInput.model_validate(first_input(e))
            if child.manual:  # registered: in the registry as the loop added it (if new), not a scale-up
                clusters.setdefault(
                    child.cluster_id,
                    ClusterRecord(
                        id=child.cluster_id,
                        instance_type=child.instance_type,
                        types={t: TypeUnits() for t in child.instance_types or [child.instance_type]},
                        manual=True,
                        cluster_type=child.cluster_type,
                        schedulable=child.schedulable,
                        instance_limit=child.instance_limit,
                    ),
                )
                continue
            if child.instance_type in started:  # a round decides once per type: this is the next round
                close(e)
            snapshot = snapshot if snapshot is not None else registry()
            started.append(child.instance_type)
            clusters[child.cluster_id] = ClusterRecord(id=child.cluster_id, instance_type=child.instance_type)
            continue
        if e.kind == "signal_out" and e.name == contracts.SIGNAL_DEPROVISION:
            snapshot = snapshot if snapshot is not None else registry()
            marked.append(e.workflow_id.rsplit("/", 1)[-1])
        if e.kind in ("timer", "continued"):
            close(e)
            continue
        _fold(clusters, instances, e)
    return rounds


def _decide(clusters: list[ClusterRecord], rules: Mapping[str, TypeRules], config: FleetConfig) -> FleetDecisions:
    scaling = config.dynamic_scaling
    ev = evaluate_region(
        clusters,
        rules,
        scale_up_enabled=scaling.enable_dynamic_data_plane_scale_up,
        scale_down_enabled=scaling.enable_dynamic_data_plane_scale_down,
    )
    return FleetDecisions(scale_up=dict(Counter(ev.scale_up_types())), removals=ev.removals())


def _units(clusters: list[ClusterRecord], rules: Mapping[str, TypeRules]) -> dict[str, str]:
    out: dict[str, str] = {}
    for itype in sorted({t for c in clusters for t in [c.instance_type, *c.types]}):  # a cluster may run several
        consumed = sum(c.units(itype).consumed_units for c in clusters)
        capacity = sum(c.units(itype).max_units or 0 for c in clusters)
        out[itype] = f"{consumed}/{capacity}"
    return out


def _add(total: FleetDecisions, d: FleetDecisions) -> None:
    for k, v in d.scale_up.items():
        total.scale_up[k] = total.scale_up.get(k, 0) + v
    total.removals.extend(d.removals)


def fleet_what_if(
    history: RecordedHistory, config: FleetConfig | None = None, max_rounds_shown: int = 200
) -> FleetWhatIfReport:
    """Every recorded round evaluated under `config` (None: the recorded one), beside what the
    round really did (module doc)."""
    rounds = recorded_rounds(history)
    report = FleetWhatIfReport(workflow_id=history.workflow_id, runs=len(history.runs), truncated=history.truncated)
    if not rounds:
        report.notes.append("no FleetAutoscaler round in the history: nothing to replay")
        return report
    for n, r in enumerate(rounds, start=1):
        use = config or r.config
        rules = type_rules(use, r.provider, r.region)
        mine = _decide(r.clusters, rules, use)
        happened = FleetDecisions(scale_up=dict(Counter(r.started)), removals=r.marked)
        _add(report.total_happened, happened)
        _add(report.total_what_if, mine)
        if (happened.count or mine.count) and len(report.rounds) < max_rounds_shown:
            report.rounds.append(
                FleetWhatIfRound(
                    round=n,
                    run_id=r.run_id,
                    at=r.at,
                    clusters=len(r.clusters),
                    units=_units(r.clusters, rules),
                    happened=happened,
                    what_if=mine,
                )
            )
    report.rounds_replayed = len(rounds)
    types = set(report.total_happened.scale_up) | set(report.total_what_if.scale_up)
    report.difference = {
        t: report.total_what_if.scale_up.get(t, 0) - report.total_happened.scale_up.get(t, 0) for t in sorted(types)
    }
    if config is not None and not type_rules(config, rounds[0].provider, rounds[0].region):
        report.notes.append(f"the new configuration has no region {rounds[0].provider}/{rounds[0].region}")
    return report
