"""The region's bookkeeping rules (scaling.fleet.region): a cluster's report folded into the
registry and counters, and an instance released or rejected, in both state forms (a run with the
instance index, and one from before it)."""

from __future__ import annotations

from datetime import UTC, datetime

from scaling.fleet import contracts
from scaling.fleet.config import ManualCluster
from scaling.fleet.index import IndexOp
from scaling.fleet.lifecycle import ClusterReport
from scaling.fleet.models import MAX_REJECTED_BY, ClusterPhase, ClusterRecord, ManagedInstance, TypeUnits
from scaling.fleet.region import (
    ClusterMessage,
    FleetAutoscalerState,
    commit,
    fold_cluster_report,
    reject_instances,
    release_instance,
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


def before_index(*instances: ManagedInstance, **clusters: ClusterRecord) -> FleetAutoscalerState:
    """A state from before the index: the instances are in it, waiting ones listed by id."""
    return FleetAutoscalerState(
        clusters=clusters,
        instances={i.id: i for i in instances},
        waiting=[i.id for i in instances if not i.cluster_id],
    )


# -- fold_cluster_report ---------------------------------------------------------------------


def test_a_failed_cluster_leaves_the_registry_counts_as_failed_and_backs_off_its_type() -> None:
    st = before_index(c1=record())
    st.marked_at["c1"] = NOW
    fold_cluster_report(st, report(ClusterPhase.FAILED, message="quota"), None, NOW)
    assert "c1" not in st.clusters and "c1" not in st.marked_at
    assert (st.clusters_failed, st.clusters_deleted) == (1, 0)
    assert st.last_failure_at == {"standard": NOW}
    assert st.events == ["c1 failed: quota"]


def test_a_deleted_cluster_counts_as_deleted_without_a_failure_time() -> None:
    st = before_index(c1=record(phase=ClusterPhase.CLEANUP))
    st.marked_at["c1"] = NOW
    fold_cluster_report(st, report(ClusterPhase.DELETED), None, NOW)
    assert "c1" not in st.clusters and "c1" not in st.marked_at
    assert (st.clusters_failed, st.clusters_deleted) == (0, 1)
    assert st.last_failure_at == {}


def test_a_finished_report_of_an_unknown_cluster_counts_nothing() -> None:
    st = before_index()
    fold_cluster_report(st, report(ClusterPhase.DELETED), None, NOW)
    assert (st.clusters_failed, st.clusters_deleted, st.events) == (0, 0, [])


def test_a_finished_cluster_sends_its_instances_back_to_wait() -> None:
    placed, elsewhere = instance("i1", "c1"), instance("i2", "c2")
    st = before_index(placed, elsewhere, c1=record(instances=1), c2=record("c2", instances=1))
    fold_cluster_report(st, report(ClusterPhase.FAILED), None, NOW)
    assert st.waiting == ["i1"] and placed.cluster_id == ""
    assert elsewhere.cluster_id == "c2"


def test_with_the_index_a_finished_cluster_asks_its_shards_to_reject_what_it_held() -> None:
    st = FleetAutoscalerState(clusters={"c1": record()}, index_shards=4)
    fold_cluster_report(st, report(ClusterPhase.DELETED), None, NOW)
    assert st.index_outbox == [IndexOp(kind="reject", cluster_id="c1", reason="c1 is gone")]


def test_a_cluster_rebuilt_from_its_report_takes_its_listed_fields() -> None:
    listed = ManualCluster(cluster_id="c1", schedulable=True, kafka_instance_limit=7)
    st = before_index()
    fold_cluster_report(st, report(ClusterPhase.READY, schedulable=False), listed, NOW)
    assert (st.clusters["c1"].schedulable, st.clusters["c1"].instance_limit) == (True, 7)
    # a known cluster keeps its own record's fields: the listing only rebuilds a lost one
    st.clusters["c1"].instance_limit = 3
    fold_cluster_report(st, report(ClusterPhase.READY), listed, NOW)
    assert st.clusters["c1"].instance_limit == 3


def test_a_denied_deletion_drops_the_mark_and_says_so() -> None:
    st = before_index(c1=record(phase=ClusterPhase.DEPROVISIONING))
    st.marked_at["c1"] = NOW
    fold_cluster_report(st, report(ClusterPhase.READY, deletion_denied=True, message="denied"), None, NOW)
    assert "c1" in st.clusters and "c1" not in st.marked_at
    assert st.events == ["c1: denied; deletion blocked until approve-deletion"]


def test_a_live_report_keeps_the_deprovisioning_mark() -> None:
    st = before_index(c1=record(phase=ClusterPhase.DEPROVISIONING))
    st.marked_at["c1"] = NOW
    fold_cluster_report(st, report(ClusterPhase.READY), None, NOW)
    assert st.marked_at == {"c1": NOW} and st.clusters["c1"].phase == ClusterPhase.DEPROVISIONING


# -- release_instance (runs before the index) ----------------------------------------------


def test_releasing_a_placed_instance_frees_its_units_and_tells_its_cluster() -> None:
    st = before_index(instance("i1", "c1", units=3), c1=record(consumed=3, instances=1))
    assert release_instance(st, "i1") is True
    assert st.instances == {}
    assert (st.clusters["c1"].types["standard"].consumed_units, st.clusters["c1"].instances) == (0, 0)
    assert st.outbox == [ClusterMessage(cluster_id="c1", signal=contracts.SIGNAL_INSTANCE_RELEASED, instance_id="i1")]


def test_releasing_a_waiting_instance_only_leaves_the_queue() -> None:
    st = before_index(instance("i1"), c1=record())
    assert release_instance(st, "i1") is True
    assert (st.instances, st.waiting, st.outbox) == ({}, [], [])


def test_releasing_an_unknown_instance_changes_nothing() -> None:
    st = before_index(instance("i1", "c1"), c1=record(consumed=2, instances=1))
    assert release_instance(st, "nope") is False
    assert list(st.instances) == ["i1"] and st.outbox == [] and st.clusters["c1"].instances == 1


def test_released_units_never_go_negative() -> None:
    # the cluster's own report reset what it holds: freeing more than it counts stops at 0
    st = before_index(instance("i1", "c1", units=5), c1=record(consumed=2, instances=0))
    release_instance(st, "i1")
    assert (st.clusters["c1"].types["standard"].consumed_units, st.clusters["c1"].instances) == (0, 0)


def test_an_instance_on_a_cluster_that_is_gone_is_released_without_a_message() -> None:
    st = before_index(instance("i1", "gone"))
    assert release_instance(st, "i1") is True and st.outbox == []


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


# -- reject_instances (runs before the index) ----------------------------------------------


def test_a_rejected_instance_is_freed_remembers_the_cluster_and_waits() -> None:
    inst = instance("i1", "c1", units=2)
    st = before_index(inst, c1=record(consumed=2, instances=1))
    reject_instances(st, "c1", {"i1": "no room"})
    assert (inst.cluster_id, inst.message, inst.rejected_by) == ("", "no room", ["c1"])
    assert st.waiting == ["i1"]
    assert (st.clusters["c1"].types["standard"].consumed_units, st.clusters["c1"].instances) == (0, 0)
    assert st.events == ["i1: rejected by c1 (no room), placing it elsewhere"]


def test_a_rejection_for_an_instance_gone_or_moved_changes_nothing() -> None:
    moved = instance("i1", "c2")
    st = before_index(moved, c1=record(consumed=2, instances=1), c2=record("c2", consumed=2, instances=1))
    reject_instances(st, "c1", {"i1": "late", "deleted": "late"})
    assert moved.cluster_id == "c2" and st.waiting == [] and st.events == []
    assert st.clusters["c1"].instances == 1


def test_an_instance_remembers_only_the_last_rejecting_clusters() -> None:
    inst = instance("i1", "c1")
    inst.rejected_by = [f"old{k}" for k in range(MAX_REJECTED_BY)]
    st = before_index(inst)
    reject_instances(st, "c1", {"i1": ""})
    assert len(inst.rejected_by) == MAX_REJECTED_BY and inst.rejected_by[-1] == "c1"
    assert st.events == ["i1: rejected by c1 (no reason), placing it elsewhere"]
