"""Money limits: spec.limits.pricePerHour and the loop's max_price_per_hour_total."""

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from scaling.kube.models import NodeInfo, PodInfo, Resources
from scaling.nodes.catalogue import catalogue_index
from scaling.nodes.models import LABEL_GROUP, LABEL_POOL, InFlightRequest, NodeGroup
from scaling.nodes.nodegroups import InvalidSpec, parse_node_group
from scaling.nodes.providers.kwok import kwok_catalogue
from scaling.nodes.scale_up.money import PriceBudget
from scaling.nodes.scale_up.packing import Bin, Item, pack
from scaling.nodes.scale_up.planning import plan_scale_up
from scaling.nodes.settings import AutoscalerSettings

CAT = catalogue_index(kwok_catalogue())
GI = 2**30
CX22 = CAT[("kwok", "cx22")].price_hourly  # 0.0060
CX33 = CAT[("kwok", "cx33")].price_hourly  # 0.0088
CX52 = CAT[("kwok", "cx52")].price_hourly  # 0.0540


def group(pools: list[tuple[str, int]], name: str = "g", **spec: Any) -> NodeGroup:
    entries = [{"provider": "kwok", "serverType": [t], "priority": p} for t, p in pools]
    return parse_node_group({"metadata": {"name": name}, "spec": {"pools": entries, **spec}}, {"kwok"})


def pods(n: int, cpu_m: int = 1500, prefix: str = "p") -> list[PodInfo]:
    return [
        PodInfo(
            namespace="ns", name=f"{prefix}{i}", uid=f"{prefix}{i}", requests=Resources(cpu_m=cpu_m, memory=GI, pods=1)
        )
        for i in range(n)
    ]


def node(name: str, pool: str, group_name: str = "g") -> NodeInfo:
    return NodeInfo(
        name=name,
        labels={LABEL_GROUP: group_name, LABEL_POOL: pool},
        ready=True,
        allocatable=Resources(cpu_m=1000, memory=GI, pods=110),
        requested=Resources(cpu_m=1000, memory=GI, pods=5),
    )


def test_group_price_cap_counts_existing_nodes_and_names_the_cap() -> None:
    g = group([("cx22", 50)], limits={"pricePerHour": 0.02})
    # One cx22 runs (0.006/h): 0.014 is left, two more cx22 (0.012) fit, a third would not.
    plan = plan_scale_up(pods(5), [node("n1", "kwok-cx22")], [g], CAT, [])
    assert len(plan.new_nodes) == 2
    assert {p.reason for p in plan.problems} == {"PriceLimitReached"}
    assert sum(p.count for p in plan.problems) == 3
    assert "node group g pricePerHour=0.02 (spending 0.0060/h)" in plan.problems[0].message


def test_in_flight_requests_spend_the_cap_too() -> None:
    g = group([("cx22", 50)], limits={"pricePerHour": "0.013"})
    flight = [
        InFlightRequest(
            id="r",
            group="g",
            pool="kwok-cx22",
            server_type="cx22",
            provider="kwok",
            requirements=Resources(cpu_m=1500, memory=GI, pods=1),
            pods={"elsewhere": 1},
        )
    ]
    plan = plan_scale_up(pods(3), [], [g], CAT, flight)
    assert len(plan.new_nodes) == 1  # 0.013 - 0.006 in flight leaves room for one cx22


def test_cluster_price_cap_is_shared_by_every_group() -> None:
    a = group([("cx22", 50)], name="a", labels={"team": "a"})
    b = group([("cx22", 50)], name="b", labels={"team": "b"})
    a_pods = [p.model_copy(update={"node_selector": {"team": "a"}}) for p in pods(4)]
    b_pods = [p.model_copy(update={"node_selector": {"team": "b"}}) for p in pods(4, prefix="b")]
    plan = plan_scale_up(a_pods + b_pods, [], [a, b], CAT, [], max_price_per_hour_total=5 * CX22 + 0.001)
    assert len(plan.new_nodes) == 5
    assert sum(p.count for p in plan.problems) == 3
    assert all("cluster max_price_per_hour_total=0.031" in p.message for p in plan.problems)


def test_cap_of_zero_plans_nothing_and_no_cap_plans_everything() -> None:
    capped = plan_scale_up(pods(2), [], [group([("cx22", 50)], limits={"pricePerHour": 0})], CAT, [])
    assert capped.new_nodes == [] and [p.reason for p in capped.problems] == ["PriceLimitReached"] * 2
    free = plan_scale_up(pods(2), [], [group([("cx22", 50)], limits={})], CAT, [])
    assert len(free.new_nodes) == 2 and free.problems == []


def test_a_pricier_fallback_the_cap_cannot_pay_for_is_dropped() -> None:
    pools = [("cx33", 90), ("cx52", 10)]
    uncapped = plan_scale_up(pods(1), [], [group(pools)], CAT, [])
    assert [c.name for c in uncapped.new_nodes[0].candidates] == ["kwok-cx33", "kwok-cx52"]
    capped = plan_scale_up(pods(1), [], [group(pools, limits={"pricePerHour": 0.02})], CAT, [])
    # cx33 leaves 0.0112/h: falling back to cx52 (0.054/h) would break the cap.
    assert [c.name for c in capped.new_nodes[0].candidates] == ["kwok-cx33"]
    roomy = plan_scale_up(pods(1), [], [group(pools, limits={"pricePerHour": 0.1})], CAT, [])
    assert [c.name for c in roomy.new_nodes[0].candidates] == ["kwok-cx33", "kwok-cx52"]


def test_a_cap_that_rules_out_the_big_type_leaves_the_small_one() -> None:
    # One tier: a 3-core pod needs cx52 (16 cores), 1.5-core pods fit cx22. With 0.03/h the
    # cx52 is unaffordable, so only the small pods get nodes.
    g = group([("cx22", 50), ("cx52", 50)], limits={"pricePerHour": 0.03})
    plan = plan_scale_up(pods(1, cpu_m=3000, prefix="big") + pods(2), [], [g], CAT, [])
    assert {n.pool for n in plan.new_nodes} == {"kwok-cx22"}
    assert [(p.name, p.reason) for p in plan.problems] == [("big0", "PriceLimitReached")]


def test_pack_repeats_a_pattern_only_as_often_as_the_money_allows() -> None:
    money = PriceBudget(left=0.25)
    result = pack(
        [Item(req=(1000, 0, 1), count=10, bins=frozenset({"b"}))], [Bin("b", (1000, 10, 10), 0.1, None)], (), [money]
    )
    assert sum(p.repeat for p in result.patterns) == 2 and result.leftover == {0: 8}
    assert money.left == pytest.approx(0.05)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    n_small=st.integers(0, 30),
    n_big=st.integers(0, 6),
    existing=st.integers(0, 3),
    cap=st.floats(0, 0.3),
    total=st.one_of(st.none(), st.floats(0, 0.3)),
)
def test_no_plan_and_no_fallback_can_pass_a_cap(
    n_small: int, n_big: int, existing: int, cap: float, total: float | None
) -> None:
    g = group([("cx22", 90), ("cx33", 50), ("cx52", 50)], limits={"pricePerHour": cap})
    nodes = [node(f"n{i}", "kwok-cx22") for i in range(existing)]
    plan = plan_scale_up(
        pods(n_small) + pods(n_big, cpu_m=6000, prefix="big"), nodes, [g], CAT, [], max_price_per_hour_total=total
    )
    spent = existing * CX22
    prices = {c.name: CAT[("kwok", c.server_type)].price_hourly for n in plan.new_nodes for c in n.candidates}
    first_choice = spent + sum(prices[n.candidates[0].name] for n in plan.new_nodes)
    worst_fallback = spent + sum(max(prices[c.name] for c in n.candidates) for n in plan.new_nodes)
    for limit in (cap, total):
        if limit is not None and plan.new_nodes:
            assert first_choice <= limit + 1e-9
            assert worst_fallback <= limit + 1e-9


@pytest.mark.parametrize(
    ("limits", "field"),
    [
        ({"pricePerHour": -1}, "spec.limits.pricePerHour"),
        ({"pricePerHour": "cheap"}, "spec.limits.pricePerHour"),
        ({"pricePerHour": True}, "spec.limits.pricePerHour"),
        ({"pricePerHour": "nan"}, "spec.limits.pricePerHour"),
        ({"pricePerHour": 1, "maxCost": 2}, "spec.limits.maxCost"),
        ("0.5", "spec.limits"),
    ],
)
def test_bad_price_limits_are_refused_naming_the_field(limits: Any, field: str) -> None:
    with pytest.raises(InvalidSpec) as e:
        group([("cx22", 50)], limits=limits)
    assert e.value.field == field


def test_bad_cluster_cap_is_refused_naming_the_setting() -> None:
    for bad in (-0.5, float("inf"), "lots"):
        with pytest.raises(ValidationError, match="max_price_per_hour_total"):
            AutoscalerSettings(cluster="c", max_price_per_hour_total=bad)
    assert AutoscalerSettings(cluster="c", max_price_per_hour_total="1.5").max_price_per_hour_total == 1.5
