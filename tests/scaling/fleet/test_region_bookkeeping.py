"""The region's bookkeeping rules (scaling.fleet.region): a cluster's report folded into the
registry and counters, and an instance released or rejected, in both state forms (a run with the
instance index, and one from before it)."""

from __future__ import annotations

from datetime import UTC, datetime

from scaling.fleet import contracts
from scaling.fleet.config import ManualCluster
from scaling.fleet.index import IndexOp
from scaling.fleet.lifecycle import ClusterReport
from scaling.fleet.models import ClusterPhase, ClusterRecord, ManagedInstance, TypeUnits
from scaling.fleet.region import (
    ClusterMessage,
    FleetAutoscalerState,
    commit,
    fold_cluster_report,
    release_removed,
)

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def record(
    cid: str = "c1", phase: ClusterPhase = ClusterPhase.READY, consumed: int = 0, instances: int = 0
) -> ClusterRecord:
    return ClusterRecord(
        id=cid,
        instance_type="standard",
        phase=phase,
        types={"standard": TypeUnits(max_units=10, consumed_units=consumed)},
        instances=instances,
    )


def report(phase: ClusterPhase, cid: str = "c1", **kw) -> ClusterReport:
    return ClusterReport(cluster_id=cid, instance_type="standard", phase=phase, max_units=10, **kw)


def instance(iid: str, cluster_id: str = "", units: int = 2) -> ManagedInstance:
    return ManagedInstance(id=iid, instance_type="standard", size="x1", units=units, cluster_id=cluster_id)


def region(**clusters: ClusterRecord) -> FleetAutoscalerState:
    return FleetAutoscalerState(clusters=clusters, index_shards=4)


# -- fold_cluster_report ---------------------------------------------------------------------


def test_a_failed_cluster_leaves_the_registry_counts_as_failed_and_backs_off_its_type() -> None:
    st = region(c1=record())
    st.marked_at["c1"] = NOW
    fold_cluster_report(st, report(ClusterPhase.FAILED, message="quota"), None, NOW)
    assert "c1" not in st.clusters and "c1" not in st.marked_at
    assert (st.clusters_failed, st.clusters_deleted) == (1, 0)
    assert st.last_failure_at == {"standard": NOW}
    assert st.events == ["c1 failed: quota"]


def test_a_deleted_cluster_counts_as_deleted_without_a_failure_time() -> None:
    st = region(c1=record(phase=ClusterPhase.CLEANUP))
    st.marked_at["c1"] = NOW
    fold_cluster_report(st, report(ClusterPhase.DELETED), None, NOW)
    assert "c1" not in st.clusters and "c1" not in st.marked_at
    assert (st.clusters_failed, st.clusters_deleted) == (0, 1)
    assert st.last_failure_at == {}


def test_a_finished_report_of_an_unknown_cluster_counts_nothing() -> None:
    st = region()
    fold_cluster_report(st, report(ClusterPhase.DELETED), None, NOW)
    assert (st.clusters_failed, st.clusters_deleted, st.events) == (0, 0, [])


def test_with_the_index_a_finished_cluster_asks_its_shards_to_reject_what_it_held() -> None:
    st = FleetAutoscalerState(clusters={"c1": record()}, index_shards=4)
    fold_cluster_report(st, report(ClusterPhase.DELETED), None, NOW)
    assert st.index_outbox == [IndexOp(kind="reject", cluster_id="c1", reason="c1 is gone")]


def test_a_cluster_rebuilt_from_its_report_takes_its_listed_fields() -> None:
    listed = ManualCluster(cluster_id="c1", schedulable=True, kafka_instance_limit=7)
    st = region()
    fold_cluster_report(st, report(ClusterPhase.READY, schedulable=False), listed, NOW)
    assert (st.clusters["c1"].schedulable, st.clusters["c1"].instance_limit) == (True, 7)
    # a known cluster keeps its own record's fields: the listing only rebuilds a lost one
    st.clusters["c1"].instance_limit = 3
    fold_cluster_report(st, report(ClusterPhase.READY), listed, NOW)
    assert st.clusters["c1"].instance_limit == 3


def test_a_denied_deletion_drops_the_mark_and_says_so() -> None:
    st = region(c1=record(phase=ClusterPhase.DEPROVISIONING))
    st.marked_at["c1"] = NOW
    fold_cluster_report(st, report(ClusterPhase.READY, deletion_denied=True, message="denied"), None, NOW)
    assert "c1" in st.clusters and "c1" not in st.marked_at
    assert st.events == ["c1: denied; deletion blocked until approve-deletion"]


def test_a_live_report_keeps_the_deprovisioning_mark() -> None:
    st = region(c1=record(phase=ClusterPhase.DEPROVISIONING))
    st.marked_at["c1"] = NOW
    fold_cluster_report(st, report(ClusterPhase.READY), None, NOW)
    assert st.marked_at == {"c1": NOW} and st.clusters["c1"].phase == ClusterPhase.DEPROVISIONING


# -- release_removed (the index answered a removal) ---------------------------------------


def indexed(*queued: ManagedInstance, **clusters: ClusterRecord) -> FleetAutoscalerState:
    return FleetAutoscalerState(clusters=clusters, index_shards=4, queue=list(queued))


def test_a_removed_placed_instance_is_uncommitted_freed_and_released_with_its_record() -> None:
    found = instance("i1", "c1", units=3)
    st = indexed(c1=record(consumed=3, instances=1))
    commit(st, found, 1)
    release_removed(st, found)
    assert (st.committed, st.instance_count) == ({"standard": 0}, 0)
    assert (st.clusters["c1"].types["standard"].consumed_units, st.clusters["c1"].instances) == (0, 0)
    assert st.outbox == [
        ClusterMessage(cluster_id="c1", signal=contracts.SIGNAL_INSTANCE_RELEASED, instance_id="i1", instance=found)
    ]


def test_a_removed_instance_that_a_rejection_queued_leaves_the_queue_and_its_cluster_untouched() -> None:
    # the shard answered the rejection first: the cluster was freed then, and is not told again
    queued = instance("i1")
    st = indexed(queued, c1=record(consumed=0, instances=0))
    commit(st, queued, 1)
    release_removed(st, instance("i1", "c1"))
    assert st.queue == [] and st.outbox == []
    assert (st.committed, st.instance_count) == ({"standard": 0}, 0)


def test_removed_units_never_go_negative() -> None:
    st = indexed(c1=record(consumed=1, instances=0))
    release_removed(st, instance("i1", "c1", units=4))  # never committed in this run's counts
    assert (st.committed, st.instance_count) == ({"standard": 0}, 0)
    assert (st.clusters["c1"].types["standard"].consumed_units, st.clusters["c1"].instances) == (0, 0)
