"""Pools below minNodes get requests (scaling.nodes.scale_up.min_size)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from scaling.kube.models import LABEL_INSTANCE_TYPE, NodeInfo, Resources
from scaling.nodes.models import LABEL_GROUP, LABEL_POOL, InFlightRequest, NodeGroup, PlannedNode, PoolSpec
from scaling.nodes.nodegroups import flatten_pools
from scaling.nodes.scale_up.min_size import requests_to_reach_min_nodes


def group(name: str = "g", small_min: int = 2, large_min: int = 0, max_nodes: int | None = None) -> NodeGroup:
    return NodeGroup(
        name=name,
        pools=[
            PoolSpec(provider="kwok", serverType=["cx22"], priority=100, minNodes=small_min),
            PoolSpec(provider="kwok", serverType=["cx32"], priority=50, minNodes=large_min),
        ],
        maxNodes=max_nodes,
    )


def node(name: str, group: str = "g", pool: str | None = "kwok-cx22", **labels: str) -> NodeInfo:
    lab = {LABEL_GROUP: group, **labels}
    if pool:
        lab[LABEL_POOL] = pool
    return NodeInfo(name=name, labels=lab, ready=True)


def in_flight(pool: str, group: str = "g") -> InFlightRequest:
    return InFlightRequest(
        id=f"r-{pool}",
        group=group,
        pool=pool,
        server_type=pool.split("-")[1],
        provider="kwok",
        requirements=Resources(),
        pod_uids=[],
    )


def pools_of(planned: list[PlannedNode]) -> list[tuple[str, str]]:
    return [(p.group, p.pool) for p in planned]


def test_an_empty_pool_gets_its_minimum_pinned_to_that_pool() -> None:
    g = group(small_min=2, large_min=1)
    out = requests_to_reach_min_nodes([g], [], [])
    assert pools_of(out) == [("g", "kwok-cx22"), ("g", "kwok-cx22"), ("g", "kwok-cx32")]
    cx22 = next(p for p in flatten_pools(g) if p.name == "kwok-cx22")
    assert out[0].candidates == [cx22]  # no fallback to another pool
    assert out[0].pod_uids == [] and out[0].requirements == Resources()


def test_nodes_in_flight_requests_and_planned_nodes_count() -> None:
    g = group(small_min=3)
    assert requests_to_reach_min_nodes([g], [node("a"), node("b"), node("c")], []) == []
    assert len(requests_to_reach_min_nodes([g], [node("a")], [in_flight("kwok-cx22")])) == 1
    planned = PlannedNode(group="g", pool="kwok-cx22", candidates=[], requirements=Resources(), pod_uids=["p"])
    assert len(requests_to_reach_min_nodes([g], [node("a")], [in_flight("kwok-cx22")], [planned])) == 0
    # Another pool's or group's nodes do not count.
    others = [node("x", pool="kwok-cx32"), node("y", group="other"), NodeInfo(name="z")]
    assert len(requests_to_reach_min_nodes([g], others, [])) == 3


def test_a_node_without_the_pool_label_counts_by_its_instance_type() -> None:
    g = group(small_min=1)
    typed = node("a", pool=None, **{LABEL_INSTANCE_TYPE: "CX22"})
    assert requests_to_reach_min_nodes([g], [typed], []) == []


def test_group_and_cluster_limits_cap_the_requests() -> None:
    g = group(small_min=2, large_min=2, max_nodes=5)
    out = requests_to_reach_min_nodes([g], [node("a", pool="kwok-cx99"), node("b", pool="kwok-cx99")], [])
    assert pools_of(out) == [("g", "kwok-cx22"), ("g", "kwok-cx22"), ("g", "kwok-cx32")]  # 5 in the group
    capped = requests_to_reach_min_nodes(
        [group(small_min=2, large_min=2)], [node("u", group="x")], [], max_nodes_total=3
    )
    assert len(capped) == 2


def test_banned_or_backing_off_pools_are_skipped() -> None:
    g = group(small_min=1, large_min=1)
    assert pools_of(requests_to_reach_min_nodes([g], [], [], unavailable={("g", "kwok-cx22")})) == [("g", "kwok-cx32")]
    assert pools_of(requests_to_reach_min_nodes([g], [], [], unavailable={("kwok", "cx32")})) == [("g", "kwok-cx22")]


@given(
    mins=st.lists(st.integers(min_value=0, max_value=4), min_size=1, max_size=3),
    have=st.lists(st.integers(min_value=0, max_value=5), min_size=3, max_size=3),
)
def test_every_pool_reaches_its_minimum_and_no_pool_gets_more(mins: list[int], have: list[int]) -> None:
    g = NodeGroup(
        name="g",
        pools=[PoolSpec(provider="kwok", serverType=[f"t{i}"], priority=10, minNodes=m) for i, m in enumerate(mins)],
    )
    nodes = [node(f"n{i}-{j}", pool=f"kwok-t{i}") for i in range(len(mins)) for j in range(have[i])]
    out = requests_to_reach_min_nodes([g], nodes, [])
    for i, m in enumerate(mins):
        added = sum(1 for p in out if p.pool == f"kwok-t{i}")
        assert added == max(m - have[i], 0)
