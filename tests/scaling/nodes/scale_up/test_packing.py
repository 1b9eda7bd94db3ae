from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench.baselines import karpenter
from scaling.nodes.scale_up.money import PriceBudget
from scaling.nodes.scale_up.packing import (
    Bin,
    Budget,
    Item,
    PackResult,
    Pattern,
    _first_type,
    _launch,
    backfill,
    downsize,
    merge,
    pack,
    pack_apart,
    plan_price,
    shrink,
)
from tests.scaling.nodes.scale_up.test_never_dearer import TYPES, pods_of

BIG = Bin(key="big", cap=(4000, 8000, 110), price=0.02, slots=None)
SMALL = Bin(key="small", cap=(2000, 4000, 110), price=0.01, slots=None)


def plan(*patterns: Pattern) -> PackResult:
    return PackResult(patterns=list(patterns))


def test_a_lightly_used_node_is_emptied_into_the_others_free_room() -> None:
    items = [Item(req=(1000, 1000, 1), count=6, bins=frozenset({"big"})), Item(req=(500, 500, 1), count=1, bins=frozenset({"big", "small"}))]  # fmt: skip
    full = Pattern(bin="big", counts={0: 3}, repeat=2, used=(3000, 3000, 3))
    light = Pattern(bin="small", counts={1: 1}, repeat=1, used=(500, 500, 1))
    result = plan(full, light)
    assert backfill(result, items, [BIG, SMALL]) == 1
    nodes = sorted((p.bin, sorted(p.counts.items()), p.repeat) for p in result.patterns)
    assert nodes == [("big", [(0, 3)], 1), ("big", [(0, 3), (1, 1)], 1)]
    # Every pod still has a node, and the plan costs one small node less.
    placed = {i: sum(p.counts.get(i, 0) * p.repeat for p in result.patterns) for i in range(2)}
    assert placed == {0: 6, 1: 1}


def test_pods_move_only_to_nodes_that_admit_them_and_only_whole_nodes_go() -> None:
    pinned = Item(req=(500, 500, 1), count=1, bins=frozenset({"small"}))  # its pool admits only "small"
    items = [Item(req=(1000, 1000, 1), count=3, bins=frozenset({"big"})), pinned]
    result = plan(Pattern(bin="big", counts={0: 3}, repeat=1, used=(3000, 3000, 3)),
                  Pattern(bin="small", counts={1: 1}, repeat=1, used=(500, 500, 1)))  # fmt: skip
    assert backfill(result, items, [BIG, SMALL]) == 0 and len(result.patterns) == 2
    # Two pods on the light node, room for one elsewhere: it stays whole.
    items = [Item(req=(1000, 1000, 1), count=3, bins=frozenset({"big"})), Item(req=(600, 600, 1), count=2, bins=frozenset({"big", "small"}))]  # fmt: skip
    result = plan(Pattern(bin="big", counts={0: 3}, repeat=1, used=(3000, 3000, 3)),
                  Pattern(bin="small", counts={1: 2}, repeat=1, used=(1200, 1200, 2)))  # fmt: skip
    assert backfill(result, items, [BIG, SMALL]) == 0
    assert sorted(sorted(p.counts.items()) for p in result.patterns) == [[(0, 3)], [(1, 2)]]


def test_the_emptiest_node_goes_first_and_a_node_that_took_pods_stays() -> None:
    items = [Item(req=(1000, 1000, 1), count=2, bins=frozenset({"big", "small"}))]
    result = plan(Pattern(bin="big", counts={0: 1}, repeat=1, used=(1000, 1000, 1)),
                  Pattern(bin="small", counts={0: 1}, repeat=1, used=(1000, 1000, 1)))  # fmt: skip
    # The big node is a quarter full, the small one half: the emptiest goes first, into the
    # small node's room; the small node took pods, so it is never emptied afterwards.
    assert backfill(result, items, [BIG, SMALL]) == 1
    assert [(p.bin, p.counts, p.repeat) for p in result.patterns] == [("small", {0: 2}, 1)]


def test_pack_places_every_pod_within_each_nodes_capacity() -> None:
    items = [Item(req=(1500, 3000, 1), count=5, bins=frozenset({"big", "small"})), Item(req=(300, 300, 1), count=7, bins=frozenset({"big", "small"}))]  # fmt: skip
    result = pack(items, [Bin(key=b.key, cap=b.cap, price=b.price, slots=None) for b in (BIG, SMALL)])
    assert result.leftover == {}
    placed = {i: sum(p.counts.get(i, 0) * p.repeat for p in result.patterns) for i in range(2)}
    assert placed == {0: 5, 1: 7}
    for p in result.patterns:
        cap = BIG.cap if p.bin == "big" else SMALL.cap
        used = [sum(items[i].req[d] * n for i, n in p.counts.items()) for d in range(3)]
        assert all(u <= c for u, c in zip(used, cap))


def test_a_node_fuller_than_the_bound_is_not_emptied() -> None:
    items = [Item(req=(1300, 1300, 1), count=3, bins=frozenset({"big", "small"}))]
    # Two-thirds full small node (above BACKFILL_MAX_FILL) and room for it on the big one.
    result = plan(Pattern(bin="big", counts={0: 2}, repeat=1, used=(2600, 2600, 2)),
                  Pattern(bin="small", counts={0: 1}, repeat=1, used=(1300, 1300, 1)))  # fmt: skip
    assert backfill(result, items, [BIG, SMALL]) == 0


def test_backfill_keeps_a_per_node_limit() -> None:
    # One replica per node (hostname anti-affinity): the light node's replica cannot join
    # the node that already runs one, though it has room.
    replica = Item(req=(500, 500, 1), count=2, bins=frozenset({"big", "small"}), per_node=1)
    result = plan(Pattern(bin="big", counts={0: 1}, repeat=1, used=(500, 500, 1)),
                  Pattern(bin="small", counts={0: 1}, repeat=1, used=(500, 500, 1)))  # fmt: skip
    assert backfill(result, [replica], [BIG, SMALL]) == 0
    unlimited = Item(req=(500, 500, 1), count=2, bins=frozenset({"big", "small"}))
    result = plan(Pattern(bin="big", counts={0: 1}, repeat=1, used=(500, 500, 1)),
                  Pattern(bin="small", counts={0: 1}, repeat=1, used=(500, 500, 1)))  # fmt: skip
    assert backfill(result, [unlimited], [BIG, SMALL]) == 1


def test_shrink_moves_a_node_to_the_cheapest_type_that_holds_it_while_slots_last() -> None:
    items = [Item(req=(1000, 1000, 1), count=3, bins=frozenset({"big", "small"}))]
    result = plan(Pattern(bin="big", counts={0: 1}, repeat=3, used=(1000, 1000, 1)))
    assert shrink(result, items, [BIG, SMALL]) == 3 and result.patterns[0].bin == "small"
    # The small pool has two slots left: three nodes cannot all move, so none do.
    result = plan(Pattern(bin="big", counts={0: 1}, repeat=3, used=(1000, 1000, 1)))
    assert shrink(result, items, [BIG, Bin(key="small", cap=SMALL.cap, price=SMALL.price, slots=2)]) == 0
    # A pod its pool admits only on "big" keeps its node there.
    pinned = [Item(req=(1000, 1000, 1), count=1, bins=frozenset({"big"}))]
    result = plan(Pattern(bin="big", counts={0: 1}, repeat=1, used=(1000, 1000, 1)))
    assert shrink(result, pinned, [BIG, SMALL]) == 0


def test_merge_replaces_two_nodes_by_one_cheaper_node_that_holds_both() -> None:
    # Two small nodes (0.01 each), each with a 1.5-core pod: one big node (0.02) is not cheaper.
    items = [Item(req=(1500, 1000, 1), count=2, bins=frozenset({"big", "small"}))]
    result = plan(Pattern(bin="small", counts={0: 1}, repeat=2, used=(1500, 1000, 1)))
    assert merge(result, items, [BIG, SMALL]) == 0
    # The same on two big nodes: one big node holds both, for half the price.
    result = plan(Pattern(bin="big", counts={0: 1}, repeat=2, used=(1500, 1000, 1)))
    assert merge(result, items, [BIG, SMALL]) == 1
    assert [(p.bin, p.counts, p.repeat) for p in result.patterns] == [("big", {0: 2}, 1)]
    # One replica per node: never merged.
    one = [Item(req=(1500, 1000, 1), count=2, bins=frozenset({"big", "small"}), per_node=1)]
    result = plan(Pattern(bin="big", counts={0: 1}, repeat=2, used=(1500, 1000, 1)))
    assert merge(result, one, [BIG, SMALL]) == 0


def test_pack_finds_the_optimum_of_a_small_mix() -> None:
    # 2 pods of 3 cores, 6 of 0.5 core. A 3-core pod needs a big node of its own (4 cores),
    # whose last core takes two small pods; the 2 small pods left fill a small node:
    # 2 x 0.02 + 0.01 is the least any plan costs.
    items = [Item(req=(3000, 2000, 1), count=2, bins=frozenset({"big", "small"})), Item(req=(500, 500, 1), count=6, bins=frozenset({"big", "small"}))]  # fmt: skip
    bins = [Bin(key=b.key, cap=b.cap, price=b.price, slots=None) for b in (BIG, SMALL)]
    result = pack(items, bins)
    assert result.leftover == {}
    assert plan_price(result, bins) == pytest.approx(0.05)


def test_pack_spends_the_limits_its_chosen_plan_uses() -> None:
    items = [Item(req=(1000, 1000, 1), count=10, bins=frozenset({"big", "small"}))]
    bins = [Bin(key="big", cap=BIG.cap, price=BIG.price, slots=None), Bin(key="small", cap=SMALL.cap, price=SMALL.price, slots=3)]  # fmt: skip
    nodes, money = Budget(left=5), PriceBudget(left=0.1)
    result = pack(items, bins, [nodes], [money])
    used = {b.key: sum(p.repeat for p in result.patterns if p.bin == b.key) for b in bins}
    placed = sum(p.counts[0] * p.repeat for p in result.patterns)
    assert placed + result.leftover.get(0, 0) == 10
    # Each limit lost exactly what the returned plan buys, and none went below zero.
    assert bins[1].slots == 3 - used["small"] >= 0
    assert nodes.left == 5 - sum(used.values()) >= 0
    assert money.left == pytest.approx(0.1 - plan_price(result, bins)) and money.left >= -1e-9


def test_pods_that_share_no_pool_are_packed_apart_and_keep_their_indices() -> None:
    za, zb = Bin(key="za", cap=SMALL.cap, price=0.01, slots=None), Bin(key="zb", cap=SMALL.cap, price=0.01, slots=None)
    items = [Item(req=(500, 500, 1), count=4, bins=frozenset({"za"})), Item(req=(1000, 1000, 1), count=2, bins=frozenset({"zb"}))]  # fmt: skip
    result = pack(items, [za, zb])
    assert result.leftover == {}
    assert sorted((p.bin, sorted(p.counts.items()), p.repeat) for p in result.patterns) == [
        ("za", [(0, 4)], 1),
        ("zb", [(1, 2)], 1),
    ]


def test_items_packed_apart_share_room_and_give_back_the_limits_of_nodes_they_drop() -> None:
    # Items 0 and 2 never share a node (one GPU each, say); item 1's two pods go one per node.
    # Packed in parts, 0 and 1 take a big node and a small one, 2 a big node of its own; the
    # pod on the small node fits beside 2, so the small node goes and its limits come back.
    gpu = frozenset({"big"})
    items = [
        Item(req=(1000, 1000, 1), count=1, bins=gpu, per_node=1),
        Item(req=(500, 500, 1), count=2, bins=frozenset({"big", "small"}), per_node=1),
        Item(req=(1000, 1000, 1), count=1, bins=gpu, per_node=1),
    ]
    bins = [replace(BIG, slots=5), replace(SMALL, slots=5)]
    nodes, money = Budget(10), PriceBudget(left=1.0)
    result = pack_apart(items, [frozenset({2}), frozenset(), frozenset({0})], bins, [nodes], [money])
    assert result.leftover == {}
    assert sorted((p.bin, sorted(p.counts.items()), p.repeat) for p in result.patterns) == [
        ("big", [(0, 1), (1, 1)], 1),
        ("big", [(1, 1), (2, 1)], 1),
    ]
    assert (bins[0].slots, bins[1].slots, nodes.left) == (3, 5, 8)
    assert money.left == pytest.approx(1.0 - 2 * BIG.price)


def test_first_fit_spreads_capped_pods_over_the_nodes_it_opens_before_filling_them() -> None:
    # 6 pods capped at 3 per node and 5 uncapped ones, 7 of either size per node: first-fit
    # across nodes needs two nodes (one node filled and repeated at a time needed three).
    free, capped = (
        Item(req=(50, 1, 1), count=5, bins=frozenset({"a"})),
        Item(req=(50, 1, 1), count=6, bins=frozenset({"a"}), per_node=3),
    )
    node = Bin(key="a", cap=(350, 100, 110), price=1.0, slots=None)
    across = _first_type(replace(node), [free, capped], [5, 6], [], [])
    assert sum(p.repeat for p in across.patterns) == 2
    assert all(p.counts.get(1, 0) <= 3 for p in across.patterns)


def test_first_fit_stops_at_the_pools_slots_and_the_node_budget() -> None:
    item = Item(req=(100, 1, 1), count=10, bins=frozenset({"a"}))
    remaining = [10]
    budget = Budget(left=5)
    result = _first_type(Bin(key="a", cap=(200, 100, 110), price=1.0, slots=3), [item], remaining, [budget], [])
    assert sum(p.repeat for p in result.patterns) == 3 and remaining == [4] and budget.left == 2


# Three of the bundled KWOK types (scaling/nodes/providers/kwok.py): cpu m, memory, pods, EUR/h.
MI = 1024**2
CX22 = Bin(key="cx22", cap=(1930, 2972 * MI, 110), price=0.006, slots=None)
CX33 = Bin(key="cx33", cap=(3920, 6248 * MI, 110), price=0.0088, slots=None)
CAX31 = Bin(key="cax31", cap=(7910, 13621 * MI, 110), price=0.022, slots=None)
KWOK3 = [CX22, CX33, CAX31]


def _counterexample() -> list[Item]:
    """test_never_dearer's shapes [(50, 64, 3, 1), (50, 1455, 2, None), (50, 1455, 2, None),
    (50, 6249, 1, None)]: three pods capped at one per node, four of 1455 MiB, one of 6249 MiB."""
    every = frozenset(b.key for b in KWOK3)
    return [
        Item(req=(50, 64 * MI, 1), count=3, bins=every, per_node=1),
        Item(req=(50, 1455 * MI, 1), count=2, bins=every),
        Item(req=(50, 1455 * MI, 1), count=2, bins=every),
        Item(req=(50, 6249 * MI, 1), count=1, bins=every),
    ]


def _holds(result: PackResult, items: list[Item], bins: list[Bin]) -> None:
    cap = {b.key: b.cap for b in bins}
    for p in result.patterns:
        assert all(sum(items[i].req[d] * n for i, n in p.counts.items()) <= cap[p.bin][d] for d in range(3))
        assert all(items[i].per_node is None or n <= items[i].per_node for i, n in p.counts.items())
    for i, it in enumerate(items):
        assert sum(p.counts.get(i, 0) * p.repeat for p in result.patterns) == it.count


def test_downsize_moves_part_of_a_full_node_so_that_the_rest_fits_a_cheaper_type() -> None:
    # The plan growth bought (0.0368/h): the cx33 is too full to empty (backfill), every node
    # already has a capped pod (no merge), and its pods do not fit a cx22 (no shrink).
    items = _counterexample()
    result = plan(Pattern(bin="cx33", counts={0: 1, 1: 2, 2: 2}, repeat=1, used=(250, 5884 * MI, 5)),
                  Pattern(bin="cax31", counts={0: 1, 3: 1}, repeat=1, used=(100, 6313 * MI, 2)),
                  Pattern(bin="cx22", counts={0: 1}, repeat=1, used=(50, 64 * MI, 1)))  # fmt: skip
    assert backfill(result, items, KWOK3) == 0 and merge(result, items, KWOK3) == 0
    assert shrink(result, items, KWOK3) == 0
    assert downsize(result, items, KWOK3) == 1
    # Three 1455 MiB pods moved to the cax31's room; a cx22 holds the rest (Karpenter's launch).
    assert plan_price(result, KWOK3) == pytest.approx(0.034)
    assert sorted(p.bin for p in result.patterns for _ in range(p.repeat)) == ["cax31", "cx22", "cx22"]
    _holds(result, items, KWOK3)


def test_pack_buys_no_more_than_karpenters_launch_on_the_counterexample() -> None:
    items = _counterexample()
    result = pack(items, [replace(b) for b in KWOK3])
    assert result.leftover == {}
    assert plan_price(result, KWOK3) == pytest.approx(0.034)
    _holds(result, items, KWOK3)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.tuples(st.integers(50, 8000), st.integers(64, 16000), st.integers(1, 30), st.sampled_from([None, 1, 3])),
        min_size=1,
        max_size=4,
    )
)
def test_the_launch_strategy_on_counts_buys_what_karpenters_launch_buys_pod_by_pod(shapes) -> None:
    # bench/baselines.py places pod by pod; _launch places runs of identical claims at once.
    bins = [Bin(key=t.name, cap=(t.allocatable.cpu_m, t.allocatable.memory, t.allocatable.pods), price=t.price_hourly, slots=None) for t in TYPES]  # fmt: skip
    every = frozenset(b.key for b in bins)
    items = [Item(req=(cpu, mem * MI, 1), count=n, bins=every, per_node=cap) for cpu, mem, n, cap in shapes]
    remaining = [it.count for it in items]
    result = _launch(items, [replace(b) for b in bins], [], [], remaining)
    assert remaining == [0] * len(items)
    _holds(result, items, bins)
    assert plan_price(result, bins) == pytest.approx(karpenter(pods_of(shapes), TYPES))


def _first_fit_node_by_node(cap: tuple[int, int, int], items: list[Item], most: int | None) -> list[dict[int, int]]:
    """First-fit decreasing across nodes, one node at a time: what _first_type's runs of
    identical nodes must equal."""

    def needed(it: Item) -> int:
        return 0 if it.per_node is None else -(-it.count // max(it.per_node, 1))

    order = sorted(
        range(len(items)), key=lambda i: (-(items[i].req[0] / cap[0] + items[i].req[1] / cap[1]), -needed(items[i]), i)
    )
    nodes: list[tuple[dict[int, int], list[int]]] = []

    def put(i: int, n: int, counts: dict[int, int], room: list[int]) -> int:
        it = items[i]
        k = min(
            n, *(room[d] // it.req[d] for d in range(3)), n if it.per_node is None else it.per_node - counts.get(i, 0)
        )
        if k > 0:
            counts[i] = counts.get(i, 0) + k
            for d in range(3):
                room[d] -= it.req[d] * k
        return max(k, 0)

    for i in order:
        n = items[i].count
        for counts, room in nodes:
            n -= put(i, n, counts, room)
        while n > 0 and (most is None or len(nodes) < most):
            node: tuple[dict[int, int], list[int]] = ({}, list(cap))
            k = put(i, n, *node)
            if k == 0:
                break
            nodes.append(node)
            n -= k
    return [counts for counts, _ in nodes]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(1, 3000), st.integers(1, 6000), st.integers(1, 40), st.sampled_from([None, 1, 2, 3])),
        min_size=1,
        max_size=5,
    ),
    st.sampled_from([(2000, 4000, 110), (4000, 8000, 110), (8000, 16000, 10)]),
    st.sampled_from([None, 0, 3, 12]),
)
def test_first_fit_in_runs_of_identical_nodes_places_pods_as_node_by_node(shapes, cap, slots) -> None:
    items = [Item(req=(cpu, mem, 1), count=n, bins=frozenset({"a"}), per_node=pn) for cpu, mem, n, pn in shapes]
    result = _first_type(Bin(key="a", cap=cap, price=1.0, slots=slots), items, [it.count for it in items], [], [])
    runs = sorted(tuple(sorted(p.counts.items())) for p in result.patterns for _ in range(p.repeat))
    expected = sorted(tuple(sorted(c.items())) for c in _first_fit_node_by_node(cap, items, slots))
    assert runs == expected
