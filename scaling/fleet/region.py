"""A provider region's FleetAutoscaler: its settings, its state (the registry of clusters, the
instances' counts and the queue of waiting instances, carried across continue-as-new), its status,
and the pure bookkeeping rules. Where each instance is placed lives in the instance index
(scaling.fleet.index), not here: nothing in this state grows with the fleet beyond the clusters
and the bounded queue."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import AliasChoices, BaseModel, Field

from scaling.fleet import contracts
from scaling.fleet.approvals import after_denied_deletion
from scaling.fleet.cluster_table import ClusterTable, from_table, to_table
from scaling.fleet.config import FleetConfig, ManualCluster
from scaling.fleet.evaluation import RegionFigures, TypeEvaluation
from scaling.fleet.index import DEFAULT_SHARDS, IndexOp
from scaling.fleet.lifecycle import ClusterReport, ClusterTimeouts
from scaling.fleet.models import (
    FINISHED,
    ClusterPhase,
    ClusterRecord,
    CompactInstance,
    ManagedInstance,
    TypeUnits,
)

MAX_EVENTS = 30  # recent decisions kept for the status query


class FleetAutoscalerSettings(BaseModel):
    """What an operator sets when starting a region's loop."""

    provider: str
    region: str
    # Between rounds. Inputs from before (recorded histories, running regions) say `interval_s`.
    scan_interval_s: float = Field(default=30.0, validation_alias=AliasChoices("scan_interval_s", "interval_s"))
    recheck_delay_s: float = 30.0  # between marking a cluster deprovisioning and its re-check
    deletion_requires_approval: bool = False  # removals wait for approve_deletion
    # Approval gates (scaling.fleet.approvals): a cluster's creation / deletion waits for approve.
    approve_cluster_create: bool = False
    approve_cluster_delete: bool = False
    approval_timeout_s: float = Field(default=1800.0, gt=0)
    approval_default: Literal["approve", "deny"] = "deny"
    failure_backoff_s: float = 600.0  # no new cluster of a type this long after one failed
    flap_window_s: float = 600.0  # a scale-up this soon after a removal of the type is a flap
    max_clusters: int = Field(default=200, ge=1)  # bounds the registry (and history)
    # Instances live in the index shards, so this bounds each shard's records (max_instances /
    # index_shards of about 250 bytes: 200 KB at 50,000 over 64 shards), not the region's state.
    max_instances: int = Field(default=50000, ge=1)
    max_waiting: int = Field(default=2000, ge=1)  # instances queued for a cluster (carried in the state)
    index_shards: int = Field(default=DEFAULT_SHARDS, ge=1)  # fixed when the region first starts them
    iterations_per_run: int = 500
    use_search_attributes: bool = False
    cluster_timeouts: ClusterTimeouts = Field(default_factory=ClusterTimeouts)
    cluster_reports_per_run: int = 1000
    fleetshard_parameters: dict[str, str] = Field(default_factory=dict)


class ClusterMessage(BaseModel):
    """A signal the autoscaler owes a cluster (sent by the loop, in order)."""

    cluster_id: str
    signal: str
    instance: ManagedInstance | None = None
    instance_id: str = ""


class ClusterMessages(BaseModel):
    """What a cluster is owed, sent as one signal (`contracts.SIGNAL_CLUSTER_MESSAGES`) and
    applied in order. Bounded by what one round can place on one cluster (its capacity)."""

    messages: list[ClusterMessage]


def batch_by_cluster(outbox: list[ClusterMessage]) -> dict[str, ClusterMessages]:
    """The outbox as one batch per cluster, each keeping the order its messages were owed in."""
    out: dict[str, ClusterMessages] = {}
    for msg in outbox:
        out.setdefault(msg.cluster_id, ClusterMessages(messages=[])).messages.append(msg)
    return out


class FleetAutoscalerState(BaseModel):
    """The region's registry and counters: one model, carried across continue-as-new. Bounded
    by max_clusters and max_waiting; finished clusters leave the registry.

    The instances are in the index shards (`index_shards` of them, fixed by the first run); the
    region holds `committed` units per type, `instance_count` and the `queue` of waiting instances.

    The registry crosses continue-as-new as `cluster_table` (columns, about 40 bytes a cluster)
    and the region unpacks it into `clusters` when it starts. `evaluated` is what the last
    recorded evaluation read (bounded by the instance types): an unchanged registry is not
    evaluated again, its `last_evaluation` stands."""

    clusters: dict[str, ClusterRecord] = Field(default_factory=dict)  # in creation order
    cluster_table: ClusterTable | None = None  # the registry in a continue-as-new input
    index_shards: int = 0
    index_started: bool = False  # the shard workflows were started
    committed: dict[str, int] = Field(default_factory=dict)  # instance type -> units placed or queued
    instance_count: int = 0  # instances placed or queued
    queue: list[CompactInstance] = Field(default_factory=list)  # waiting for a cluster, oldest first
    index_outbox: list[IndexOp] = Field(default_factory=list)  # owed to the index shards, in order
    outbox: list[ClusterMessage] = Field(default_factory=list)
    paused: bool = False
    seq: int = 0
    marked_at: dict[str, datetime] = Field(default_factory=dict)  # cluster id -> marked deprovisioning
    last_failure_at: dict[str, datetime] = Field(default_factory=dict)  # instance type -> when
    last_removal_at: dict[str, datetime] = Field(default_factory=dict)  # instance type -> when
    awaiting_approval: list[str] = Field(default_factory=list)
    last_evaluation: list[TypeEvaluation] = Field(default_factory=list)
    evaluated: RegionFigures | None = None
    events: list[str] = Field(default_factory=list)
    rounds: int = 0  # loop rounds, paused or not
    evaluations: int = 0
    clusters_created: int = 0
    clusters_deleted: int = 0
    clusters_failed: int = 0
    flaps: int = 0
    runs: int = 0


class FleetAutoscalerInput(BaseModel):
    """The region's input. `config.clusters` (dataplane-cluster-configuration) is registered in
    the first run and left out of the input the region continues as new with; starters send
    the listed clusters through the `register_clusters` update instead, in bounded batches, so
    that nothing in the input grows with the fleet."""

    settings: FleetAutoscalerSettings
    config: FleetConfig
    state: FleetAutoscalerState | None = None


def registry_of(state: FleetAutoscalerState) -> dict[str, ClusterRecord]:
    """The registry a state holds, in either form (columns, or the records of an input from before)."""
    return from_table(state.cluster_table) if state.cluster_table is not None else state.clusters


def carried_over(inp: FleetAutoscalerInput) -> FleetAutoscalerInput:
    """The input to continue as new with: the registry as columns, and the configuration
    without its cluster list (registered by now; each cluster's workflow holds its fields)."""
    state = inp.state or FleetAutoscalerState()
    return inp.model_copy(
        update={
            "config": inp.config.without_clusters(),
            "state": state.model_copy(update={"clusters": {}, "cluster_table": to_table(state.clusters.values())}),
        }
    )


class RegionStatus(BaseModel):
    """The `status` query: the registry and counters, without the instance list."""

    provider: str
    region: str
    paused: bool
    clusters: list[ClusterRecord]
    instances_placed: int
    instances_waiting: int
    awaiting_approval: list[str]
    last_evaluation: list[TypeEvaluation]
    events: list[str]
    rounds: int
    evaluations: int
    clusters_created: int
    clusters_deleted: int
    clusters_failed: int
    flaps: int
    runs: int
    index_shards: int = 0  # the shards that hold the instances (0: the region holds them)


def merge_cluster_report(record: ClusterRecord | None, report: ClusterReport) -> ClusterRecord | None:
    """The registry entry after a cluster's report; None = it leaves the registry (finished).

    The autoscaler alone decides deprovisioning (it marks and restores): a report sent before
    its mark (or its restore) arrived must not undo it; the cluster's own removal phases
    (cleanup, deleted, failed) always apply. An unknown cluster that is alive is (re)registered, so a
    registry lost with a restarted loop rebuilds itself from the clusters' reports."""
    if report.phase in FINISHED:
        return None
    max_units = report.max_units_by_type or {report.instance_type: report.max_units}
    if record is None:
        return ClusterRecord(
            id=report.cluster_id,
            instance_type=report.instance_type,
            phase=report.phase,
            types={t: TypeUnits(max_units=m) for t, m in max_units.items()},
            manual=report.manual,
            cluster_type=report.cluster_type,
            schedulable=report.schedulable,
            instance_limit=report.instance_limit,
        )
    types = {
        t: u.model_copy(update={"max_units": max_units[t]}) if t in max_units else u for t, u in record.types.items()
    }
    if report.deletion_denied:
        return after_denied_deletion(record, report.phase).model_copy(update={"types": types})
    phase = report.phase
    serving = (ClusterPhase.READY, ClusterPhase.WAITING)
    if record.phase == ClusterPhase.DEPROVISIONING and phase in serving:
        phase = ClusterPhase.DEPROVISIONING  # sent before the mark arrived
    elif phase == ClusterPhase.DEPROVISIONING and record.phase in serving:
        phase = record.phase  # sent before the restore arrived
    return record.model_copy(update={"phase": phase, "types": types})


def fold_cluster_report(
    state: FleetAutoscalerState, report: ClusterReport, listed: ManualCluster | None, now: datetime
) -> None:
    """A cluster's report folded into the region: its registry entry (merge_cluster_report), and
    when it finished, the Failed or Deleted counter, the failure time that backs off new
    clusters of its type, and its instances waiting for a cluster again. A cluster rebuilt from
    its report takes `schedulable` and the instance limit from its `listed` entry in
    dataplane-cluster-configuration, if any. A denied deletion drops the deprovisioning mark."""
    cid = report.cluster_id
    before = state.clusters.get(cid)
    after = merge_cluster_report(before, report)
    if after is not None:
        if before is None and listed is not None:  # a registry rebuilt from reports
            after = after.model_copy(
                update={"schedulable": listed.schedulable, "instance_limit": listed.kafka_instance_limit}
            )
        state.clusters[cid] = after
    elif before is not None:
        del state.clusters[cid]
        state.marked_at.pop(cid, None)
        if report.phase == ClusterPhase.FAILED:
            state.clusters_failed += 1
            state.last_failure_at[report.instance_type] = now
        else:
            state.clusters_deleted += 1
        remember(state, f"{cid} {report.phase.value}: {report.message}")
        unplace_from(state, cid)
    if report.deletion_denied:
        state.marked_at.pop(cid, None)
        remember(state, f"{cid}: {report.message}; deletion blocked until approve-deletion")


def unplace_from(state: FleetAutoscalerState, cluster_id: str) -> None:
    """A cluster left the registry: anything placed there waits for a cluster again (its shard is
    told to reject what it holds there and answers with each instance)."""
    state.index_outbox.append(IndexOp(kind="reject", cluster_id=cluster_id, reason=f"{cluster_id} is gone"))


def release_removed(state: FleetAutoscalerState, found: ManagedInstance) -> None:
    """The index shard removed `found` (its record is the truth): its units leave the committed
    counts, and it leaves the queue if a rejection already put it there; otherwise its units
    and place on its cluster are free again and the cluster is told to release it."""
    commit(state, found, -1)
    queued = next((i for i in state.queue if i.id == found.id), None)
    if queued is not None:
        state.queue.remove(queued)
        return
    rec = state.clusters.get(found.cluster_id)
    if rec is not None:
        free_on_cluster(rec, found)
        state.outbox.append(
            ClusterMessage(
                cluster_id=rec.id, signal=contracts.SIGNAL_INSTANCE_RELEASED, instance_id=found.id, instance=found
            )
        )


def instances_placed(state: FleetAutoscalerState) -> int:
    return state.instance_count - len(state.queue)


def commit(state: FleetAutoscalerState, instance: ManagedInstance, sign: int) -> None:
    """Count an instance in (sign 1) or out (-1) of the region's committed units and instances."""
    units = state.committed.get(instance.instance_type, 0) + sign * instance.units
    state.committed[instance.instance_type] = max(0, units)
    state.instance_count = max(0, state.instance_count + sign)


def free_on_cluster(record: ClusterRecord | None, instance: ManagedInstance) -> None:
    """An instance left `record`'s cluster: its units and its place are free again."""
    if record is None:
        return
    units = record.types.get(instance.instance_type)
    if units is not None:
        units.consumed_units = max(0, units.consumed_units - instance.units)
    record.instances = max(0, record.instances - 1)


def remember(state: FleetAutoscalerState, event: str) -> None:
    state.events.append(event)
    del state.events[:-MAX_EVENTS]


def region_status(settings: FleetAutoscalerSettings, state: FleetAutoscalerState) -> RegionStatus:
    return RegionStatus(
        provider=settings.provider,
        region=settings.region,
        paused=state.paused,
        clusters=list(state.clusters.values()),
        instances_placed=instances_placed(state),
        instances_waiting=len(state.queue),
        awaiting_approval=state.awaiting_approval,
        last_evaluation=state.last_evaluation,
        events=state.events,
        rounds=state.rounds,
        evaluations=state.evaluations,
        clusters_created=state.clusters_created,
        clusters_deleted=state.clusters_deleted,
        clusters_failed=state.clusters_failed,
        flaps=state.flaps,
        runs=state.runs,
        index_shards=state.index_shards,
    )
