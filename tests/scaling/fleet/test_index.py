"""The instance index's rules (scaling/fleet/index.py): an id is claimed once until it is removed,
a late placement update never revives a removed instance, and a rejection only moves an instance
that is still on the rejecting cluster."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from scaling.fleet.index import IndexOp, apply_index_ops, group_by_shard, shard_of
from scaling.fleet.models import ManagedInstance


def inst(iid: str, cluster: str = "", units: int = 1) -> ManagedInstance:
    return ManagedInstance(id=iid, instance_type="standard", size="x1", units=units, cluster_id=cluster)


def test_a_repeated_claim_gets_the_first_record_not_a_second_instance() -> None:
    records: dict[str, ManagedInstance] = {}
    first = apply_index_ops(records, [IndexOp(kind="claim", instance=inst("a"))])
    assert first[0].found is None and records["a"].cluster_id == ""
    apply_index_ops(records, [IndexOp(kind="set", instance=inst("a", "c1"))])
    again = apply_index_ops(records, [IndexOp(kind="claim", instance=inst("a", units=3))])
    assert again[0].found is not None and again[0].found.cluster_id == "c1" and again[0].found.units == 1
    assert records["a"].units == 1  # the repeat changed nothing


def test_a_placement_update_after_a_removal_does_not_bring_the_instance_back() -> None:
    records = {"a": inst("a")}
    answers = apply_index_ops(
        records, [IndexOp(kind="remove", instance_id="a"), IndexOp(kind="set", instance=inst("a", "c1"))]
    )
    assert answers[0].found == inst("a") and records == {}
    assert apply_index_ops(records, [IndexOp(kind="remove", instance_id="a")])[0].found is None


def test_a_rejection_moves_only_an_instance_still_on_that_cluster() -> None:
    records = {"a": inst("a", "c1"), "b": inst("b", "c2")}
    answers = apply_index_ops(
        records,
        [
            IndexOp(kind="reject", instance_id="a", cluster_id="c1", reason="full"),
            IndexOp(kind="reject", instance_id="b", cluster_id="c1", reason="stale"),  # b is on c2
            IndexOp(kind="reject", instance_id="gone", cluster_id="c1"),
        ],
    )
    assert [(a.instance_id, a.cluster_id) for a in answers] == [("a", "c1")]
    assert records["a"].cluster_id == "" and records["a"].rejected_by == ["c1"] and records["a"].message == "full"
    assert records["b"].cluster_id == "c2"
    # rejected twice by the same cluster: it was moved already, nothing happens
    assert apply_index_ops(records, [IndexOp(kind="reject", instance_id="a", cluster_id="c1")]) == []


def test_a_cluster_that_left_hands_back_everything_on_it() -> None:
    records = {"a": inst("a", "c1"), "b": inst("b", "c1"), "c": inst("c", "c2")}
    answers = apply_index_ops(records, [IndexOp(kind="reject", cluster_id="c1", reason="c1 is gone")])
    assert sorted(a.instance_id for a in answers) == ["a", "b"]
    assert all(records[i].cluster_id == "" and records[i].rejected_by == [] for i in ("a", "b"))
    assert records["c"].cluster_id == "c2"


def test_ops_go_to_one_shard_per_id_in_order_and_a_cluster_wide_reject_to_all() -> None:
    assert all(0 <= shard_of(f"i-{n}", 7) < 7 for n in range(100))
    assert shard_of("kafka-1", 64) == shard_of("kafka-1", 64)
    assert len({shard_of(f"i-{n}", 8) for n in range(200)}) == 8  # spread over every shard
    ops = [
        IndexOp(kind="claim", instance=inst("a")),
        IndexOp(kind="set", instance=inst("a", "c1")),
        IndexOp(kind="remove", instance_id="a"),
        IndexOp(kind="reject", cluster_id="c1"),
    ]
    batches = group_by_shard(ops, 4)
    assert [o.kind for o in batches[shard_of("a", 4)].ops] == ["claim", "set", "remove", "reject"]
    assert sorted(batches) == [0, 1, 2, 3] and all(b.ops[-1].kind == "reject" for b in batches.values())


OPS = st.lists(
    st.tuples(
        st.sampled_from(["claim", "set", "remove", "reject"]), st.sampled_from("abc"), st.sampled_from(["c1", "c2"])
    ),
    max_size=40,
)


@given(OPS)
def test_between_removals_an_id_is_claimed_new_exactly_once(seq: list[tuple[str, str, str]]) -> None:
    records: dict[str, ManagedInstance] = {}
    alive: set[str] = set()
    for kind, iid, cluster in seq:
        op = IndexOp(
            kind=kind, instance_id=iid, cluster_id=cluster, instance=inst(iid, cluster if kind == "set" else "")
        )
        answers = apply_index_ops(records, [op])
        if kind == "claim":
            assert (answers[0].found is None) == (iid not in alive)  # new only if not alive
            alive.add(iid)
        elif kind == "remove":
            assert (answers[0].found is not None) == (iid in alive)
            alive.discard(iid)
        assert set(records) == alive  # set and reject never create or drop an instance
