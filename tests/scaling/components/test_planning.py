"""Seed 002's rules (scale out until use is under the thresholds' midpoint, scale one
heterogeneous instance in when every instance is under min) as the planner applies them: unit
cases and properties."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scaling.components.contracts import ComponentMetrics, ComponentView, GroupMetrics, PdPlan, Shape
from scaling.components.plan import HOMOGENEOUS, Group, PlanInput, group_labels, group_name
from scaling.components.planners import plan_from_external, plan_from_pd, plan_growth
from scaling.components.spec import ComponentSpec, parse_spec

BASE = {"tikv": ComponentView(replicas=3, cpu="2", memory="4Gi", storage="100Gi")}
HOM_SHAPE = Shape(cpu_milli=2000, memory_bytes=4 << 30)


def tikv_spec(count_big: int | None = 1, count_small: int | None = 2, storage: bool = True) -> ComponentSpec:
    rules = {"cpu": {"max_threshold": 0.8, "min_threshold": 0.2}}
    if storage:
        rules["storage"] = {"max_threshold": 0.8, "min_threshold": 0.6}
    big: dict = {"cpu": "8", "memory": "16Gi"}
    small: dict = {"cpu": "4", "memory": "8Gi"}
    if count_big is not None:
        big["count"] = count_big
    if count_small is not None:
        small["count"] = count_small
    raw = {"cluster": {"name": "db"}, "tikv": {"resources": {"big": big, "small": small}, "rules": rules}}
    parsed, errors = parse_spec(raw, "ns", BASE)
    assert errors == {}
    return parsed.components["tikv"]


def hom(n: int, ratio: float, hot: int = 0, hot_ratio: float = 0.0, storage: float = 0.0) -> GroupMetrics:
    """n homogeneous 2-core instances; `hot` of them at hot_ratio, the rest at ratio."""
    cool = n - hot
    used = cool * 2 * ratio + hot * 2 * hot_ratio
    return GroupMetrics(
        group=HOMOGENEOUS,
        instances=n,
        cpu_used=used,
        cpu_quota=2 * n,
        max_ratio=max(ratio if cool else 0, hot_ratio if hot else 0),
        hot_instances=hot,
        hot_cpu_used=hot * 2 * hot_ratio,
        hot_cpu_quota=hot * 2,
        storage_instances=n if storage else 0,
        storage_used=storage * 100 * n,
        storage_capacity=100 * n if storage else 0,
    )


def inp(
    spec: ComponentSpec,
    groups_metrics: list[GroupMetrics],
    replicas: int = 3,
    groups: list[Group] | None = None,
    fits: dict[str, int] | None = None,
    managed: bool = False,
) -> PlanInput:
    return PlanInput(
        namespace="ns",
        autoscaler="tas",
        base_cluster="db",
        spec=spec,
        homogeneous_replicas=replicas,
        homogeneous_shape=HOM_SHAPE,
        base_cpu="2",
        base_memory="4Gi",
        base_storage="100Gi",
        groups=groups or [],
        metrics=ComponentMetrics(component="tikv", groups=groups_metrics),
        fits=fits,
        growth_manages_nodes=managed,
    )


def existing(spec: ComponentSpec, resource_type: str, replicas: int) -> Group:
    labels = group_labels("tikv", resource_type)
    probe = inp(spec, [])
    return Group(
        name=group_name(probe, spec.resources[resource_type], labels),
        group=labels["group"],
        resource_type=resource_type,
        replicas=replicas,
        labels=labels,
    )


def test_cpu_average_over_max_scales_homogeneous_out_to_the_midpoint() -> None:
    spec = tikv_spec()
    plan = plan_growth(inp(spec, [hom(3, 0.9)]))  # 5.4 of 6 cores; target 0.5 -> 10.8 cores -> +3 (2.4 instances)
    assert [(c.cluster, c.direction, c.from_replicas, c.to_replicas) for c in plan.changes] == [("db", "out", 3, 6)]
    used, quota = 5.4, 2 * 6
    assert used / quota <= spec.rules["cpu"].target


def test_hot_subset_scales_heterogeneous_out_by_cpu_descending_up_to_counts() -> None:
    spec = tikv_spec(count_big=1, count_small=2)
    # One instance at 100%: 2 cores used; target 0.5 needs 4 cores of quota -> +2 cores... size by need
    m = hom(3, 0.3, hot=2, hot_ratio=1.0)  # average (0.6+4)/6 = 0.77 < 0.8; hot: 4 used of 4 -> need 4 more cores
    plan = plan_growth(inp(spec, [m]))
    outs = {c.resource_type: c for c in plan.changes}
    assert set(outs) == {"big"} and outs["big"].create and outs["big"].to_replicas == 1
    assert outs["big"].labels["specialUse"] == "hotRegion"
    # Big exhausted (count 1): the next need goes to small.
    m = hom(3, 0.3, hot=3, hot_ratio=0.95)  # not over max on average? (5.7/6 = 0.95) -> homogeneous instead
    assert plan_growth(inp(spec, [m])).changes[0].cluster == "db"
    m2 = GroupMetrics(
        group=HOMOGENEOUS,
        instances=10,
        cpu_used=15.0,
        cpu_quota=20,
        max_ratio=1.0,
        hot_instances=4,
        hot_cpu_used=8,
        hot_cpu_quota=8,
    )  # need 16-8 = 8 cores more... big gives 8
    big = existing(spec, "big", 1)
    plan = plan_growth(inp(spec, [m2], replicas=10, groups=[big]))
    outs = {c.resource_type: c.to_replicas for c in plan.changes}
    assert outs == {"small": 2}  # big at its count already; small: 8 cores -> 2 of 4 cores


def test_all_under_min_scales_in_one_heterogeneous_instance_least_preferred_first() -> None:
    spec = tikv_spec(count_big=3, count_small=3)
    big, small = existing(spec, "big", 2), existing(spec, "small", 2)
    metrics = [
        hom(3, 0.1),
        GroupMetrics(group=big.group, instances=2, cpu_used=1, cpu_quota=16, max_ratio=0.1),
        GroupMetrics(group=small.group, instances=2, cpu_used=0.5, cpu_quota=8, max_ratio=0.1),
    ]
    plan = plan_growth(inp(spec, metrics, groups=[big, small]))
    assert [(c.cluster, c.direction, c.to_replicas) for c in plan.changes] == [(small.name, "in", 1)]


def test_homogeneous_is_never_scaled_in() -> None:
    plan = plan_growth(inp(tikv_spec(), [hom(3, 0.01)]))
    assert plan.changes == []


def test_scale_in_waits_for_complete_metrics() -> None:
    spec = tikv_spec(count_small=3)
    small = existing(spec, "small", 2)
    metrics = [hom(3, 0.1)]  # the group's two instances report nothing
    assert plan_growth(inp(spec, metrics, groups=[small])).changes == []


def test_storage_rule_scales_homogeneous_tikv_out() -> None:
    spec = tikv_spec()
    plan = plan_growth(inp(spec, [hom(3, 0.3, storage=0.9)]))  # 270 of 300; target 0.7 -> 385.7 -> +1 (86 / 100)
    assert [(c.cluster, c.to_replicas, c.reason) for c in plan.changes] == [("db", 4, "storage average over max")]
    assert 270 / 400 <= 0.7 < 270 / 300


def test_no_room_scales_heterogeneous_in_first_and_asks_for_headroom() -> None:
    spec = tikv_spec(count_big=2, count_small=2)
    small = existing(spec, "small", 1)
    metrics = [hom(3, 0.95), GroupMetrics(group=small.group, instances=1, cpu_used=3.8, cpu_quota=4, max_ratio=0.95)]
    plan = plan_growth(inp(spec, metrics, groups=[small], fits={HOMOGENEOUS: 1}))
    by = {c.cluster: c for c in plan.changes}
    assert by[small.name].direction == "in" and by[small.name].to_replicas == 0
    # need: 9.5 cores used / 0.5 = 19 cores; without the small instance's 4 that is 13 more = 7
    # instances; room: 1 free + the small instance's 4 cores (2 slots) = 3; 4 more are headroom.
    assert by["db"].to_replicas == 3 + 3
    assert [(h.resource_type, h.count) for h in plan.headroom] == [(HOMOGENEOUS, 4)]


def test_making_room_drops_the_heterogeneous_scale_out_of_the_same_round() -> None:
    # Found by test_property_bounds: storage full and no node for a homogeneous instance, so the
    # idle small group is scaled in to make room; the hot instance alone would create a big
    # group (a node fits one). Both in one plan would shrink and grow temporary instances at once.
    spec = tikv_spec(count_big=None, count_small=None)
    small = existing(spec, "small", 1)
    metrics = [
        GroupMetrics(
            group=HOMOGENEOUS,
            instances=1,
            cpu_used=2.0,
            cpu_quota=2.0,
            max_ratio=1.0,
            hot_instances=1,
            hot_cpu_used=2.0,
            hot_cpu_quota=2.0,
            storage_instances=1,
            storage_used=100,
            storage_capacity=100,
        ),
        GroupMetrics(group=small.group, instances=1, cpu_used=0.0, cpu_quota=4.0, max_ratio=0.0),
    ]
    p = inp(spec, metrics, replicas=1, groups=[small], fits={HOMOGENEOUS: 0, "big": 1, "small": 0})
    plan = plan_growth(p)
    # cpu 2 of 6 cores on average (not over max) but one instance hot; storage 100% -> +1
    # homogeneous (100 / 0.7 = 143 of capacity), which only the small instance's room can hold.
    assert [(c.cluster, c.direction, c.from_replicas, c.to_replicas) for c in plan.changes] == [
        (small.name, "in", 1, 0),
        ("db", "out", 1, 2),
    ]
    assert plan.headroom == []
    assert any("dropped" in n for n in plan.notes)
    # Without the storage pressure the hot instance does get its big group.
    calm = [metrics[0].model_copy(update={"storage_used": 10}), metrics[1]]
    plan = plan_growth(p.model_copy(update={"metrics": ComponentMetrics(component="tikv", groups=calm)}))
    assert [(c.resource_type, c.direction, c.create) for c in plan.changes] == [("big", "out", True)]


def test_managed_nodes_keep_heterogeneous_and_plan_the_full_need() -> None:
    spec = tikv_spec(count_big=2, count_small=2)
    small = existing(spec, "small", 1)
    metrics = [hom(3, 0.95), GroupMetrics(group=small.group, instances=1, cpu_used=3.8, cpu_quota=4, max_ratio=0.95)]
    plan = plan_growth(inp(spec, metrics, groups=[small], fits={HOMOGENEOUS: 1}, managed=True))
    assert [c.cluster for c in plan.changes] == ["db"]
    assert plan.headroom[0].count == plan.changes[0].to_replicas - 3 - 1


def test_lowered_count_brings_groups_down() -> None:
    spec = tikv_spec(count_big=1)
    big = existing(spec, "big", 3)
    plan = plan_growth(inp(spec, [hom(3, 0.5)], groups=[big]))
    assert [(c.cluster, c.direction, c.to_replicas) for c in plan.changes] == [(big.name, "in", 1)]


def test_no_metrics_decides_nothing() -> None:
    spec = tikv_spec()
    small = existing(spec, "small", 2)
    p = inp(spec, [], groups=[small])
    assert plan_growth(p.model_copy(update={"metrics": None})).changes == []


def test_pd_plan_is_the_full_group_set() -> None:
    spec = tikv_spec(count_big=2, count_small=5)
    small = existing(spec, "small", 2)
    plans = [
        PdPlan(component="tikv", count=3, resource_type="big", labels={"group": "g-big"}),
        PdPlan(component="tidb", count=1, resource_type="big"),
    ]
    plan = plan_from_pd(inp(spec, [], groups=[small]), plans)
    by = {c.resource_type: c for c in plan.changes}
    assert by["small"].to_replicas == 0 and by["small"].direction == "in"
    assert by["big"].create and by["big"].to_replicas == 2  # capped at the type's count
    assert by["big"].group == "g-big"


def test_external_recommendation_is_the_external_groups_own_replicas_capped() -> None:
    # tidb-operator's syncExternal: min(recommendedReplicas, maxReplicas) becomes the external
    # TidbCluster's replicas; the homogeneous instances are not subtracted.
    raw = {"cluster": {"name": "db"}, "tikv": {"external": {"endpoint": {"host": "r", "port": 1}, "maxReplicas": 6}}}
    spec = parse_spec(raw, "ns", BASE)[0].components["tikv"]
    plan = plan_from_external(inp(spec, []), 9)
    assert len(plan.changes) == 1 and plan.changes[0].to_replicas == 6 and plan.changes[0].create
    assert plan.changes[0].labels == {"specialUse": "hotRegion"} and plan.changes[0].cpu == "2"
    assert [c.to_replicas for c in plan_from_external(inp(spec, []), 2).changes] == [2]  # 3 homogeneous stand
    assert plan_from_external(inp(spec, []), 0).changes == []
    standing = Group(name=plan.changes[0].cluster, group="external", resource_type="external", replicas=4)
    down = plan_from_external(inp(spec, [], groups=[standing]), 0).changes
    assert [(c.direction, c.to_replicas) for c in down] == [("in", 0)]


def test_pd_no_plan_for_a_component_changes_nothing_for_it() -> None:
    spec = tikv_spec(count_big=2, count_small=5)
    small = existing(spec, "small", 2)
    only_tidb = [PdPlan(component="tidb", count=1, resource_type="big")]
    for plans in ([], only_tidb):
        plan = plan_from_pd(inp(spec, [], groups=[small]), plans)
        assert plan.changes == [] and "no plan for tikv" in plan.notes[0]


@pytest.mark.parametrize(
    ("n", "ratio", "rule"),
    [
        (3, 0.9, {"max_threshold": 0.8, "min_threshold": 0.2}),  # 5.4 cores at target 0.5: 10.8 = 5.4 instances
        (4, 0.75, {"max_threshold": 0.7, "min_threshold": 0.3}),  # 6 cores at 0.5: exactly 12 = 6 instances
        (5, 0.9, {"max_threshold": 0.85, "min_threshold": 0.35}),  # 9 cores at 0.6: exactly 15
        (2, 1.0, {"max_threshold": 0.5}),  # default min 0.1: target 0.3
    ],
)
def test_cpu_scale_out_lands_strictly_below_the_midpoint(n: int, ratio: float, rule: dict) -> None:
    raw = {"cluster": {"name": "db"}, "tikv": {"rules": {"cpu": rule}}}
    spec = parse_spec(raw, "ns", BASE)[0].components["tikv"]
    target = spec.rules["cpu"].target
    plan = plan_growth(inp(spec, [hom(n, ratio)], replicas=n))
    after = plan.target("db")
    used = n * 2 * ratio
    assert after is not None and used / (after * 2) < target  # strictly below (max+min)/2
    assert used / ((after - 1) * 2) >= target  # and the fewest that do


def test_storage_scale_out_lands_strictly_below_the_midpoint() -> None:
    # 3 stores of 100, 240 used (0.8 > max 0.7): target (0.7+0.5)/2 = 0.6 -> 400 exactly would
    # sit on it, so 5 stores.
    raw = {
        "cluster": {"name": "db"},
        "tikv": {"rules": {"storage": {"max_threshold": 0.7, "min_threshold": 0.5}}},
    }
    spec = parse_spec(raw, "ns", BASE)[0].components["tikv"]
    plan = plan_growth(inp(spec, [hom(3, 0.1, storage=0.8)]))
    assert plan.target("db") == 5 and 240 / 500 < 0.6 <= 240 / 400


def test_hot_subset_scale_out_lands_strictly_below_the_midpoint() -> None:
    spec = tikv_spec(count_big=None, count_small=None)
    # one hot 2-core instance at 1.0 (2 cores used) and target 0.5: 4 cores, 2 more needed exactly
    plan = plan_growth(inp(spec, [hom(3, 0.3, hot=1, hot_ratio=1.0)]))
    added = sum(
        (c.to_replicas - c.from_replicas) * spec.resources[c.resource_type].cpu_milli / 1000
        for c in plan.changes
        if c.cluster != "db"
    )
    assert 2 / (2 + added) < 0.5


def test_homogeneous_scale_out_stops_at_max_homogeneous_replicas() -> None:
    raw = {
        "cluster": {"name": "db"},
        "tikv": {"rules": {"cpu": {"max_threshold": 0.8, "min_threshold": 0.2}}, "maxHomogeneousReplicas": 4},
    }
    spec = parse_spec(raw, "ns", BASE)[0].components["tikv"]
    plan = plan_growth(inp(spec, [hom(3, 0.9)]))
    assert plan.target("db") == 4 and "maxHomogeneousReplicas 4" in " ".join(plan.notes)
    at_cap = plan_growth(inp(spec, [hom(4, 0.95)], replicas=4))
    assert at_cap.target("db") is None and at_cap.headroom == []
    over = plan_growth(inp(spec, [hom(6, 0.95)], replicas=6))  # set by hand above the cap: never reduced
    assert over.target("db") is None


# ---- properties ------------------------------------------------------------------------------
ratios = st.floats(min_value=0.0, max_value=1.5, allow_nan=False)


@st.composite
def situations(draw: st.DrawFn) -> PlanInput:
    spec = tikv_spec(
        count_big=draw(st.none() | st.integers(0, 4)),
        count_small=draw(st.none() | st.integers(0, 4)),
        storage=draw(st.booleans()),
    )
    n = draw(st.integers(1, 12))
    hot = draw(st.integers(0, n))
    metrics = [hom(n, draw(ratios), hot=hot, hot_ratio=draw(ratios), storage=draw(st.floats(0, 1)))]
    groups = []
    for t in ("big", "small"):
        r = draw(st.integers(0, 5))
        if r:
            g = existing(spec, t, r)
            groups.append(g)
            q = spec.resources[t].cpu_milli / 1000 * r
            ratio = draw(ratios)
            metrics.append(GroupMetrics(group=g.group, instances=r, cpu_used=ratio * q, cpu_quota=q, max_ratio=ratio))
    fits = draw(
        st.none()
        | st.fixed_dictionaries({HOMOGENEOUS: st.integers(0, 5), "big": st.integers(0, 3), "small": st.integers(0, 3)})
    )
    return inp(spec, metrics, replicas=n, groups=groups, fits=fits, managed=draw(st.booleans()))


@given(situations())
@settings(max_examples=300, deadline=None)
def test_property_bounds(p: PlanInput) -> None:
    plan = plan_growth(p)
    base = plan.target("db")
    assert base is None or base >= p.homogeneous_replicas  # never below the homogeneous count
    targets = {g.name: g.replicas for g in p.groups}
    for c in plan.changes:
        assert c.to_replicas >= 0 and c.from_replicas != c.to_replicas
        targets[c.cluster] = c.to_replicas
    for name, res in p.spec.resources.items():
        total = sum(r for n, r in targets.items() if n != "db" and _type_of(p, plan, n) == name)
        if res.count is not None:
            assert total <= res.count  # never above the type's count
    ins = [c for c in plan.changes if c.direction == "in" and not c.reason.startswith("resource type")]
    outs_het = [c for c in plan.changes if c.direction == "out" and c.cluster != "db"]
    assert not (ins and outs_het)  # never both grow and shrink heterogeneous groups in one plan
    if not p.growth_manages_nodes and p.fits is not None:
        for c in outs_het:
            assert c.to_replicas - c.from_replicas <= p.fits[c.resource_type]
    cpu = p.spec.rules["cpu"]
    used = sum(g.cpu_used for g in p.metrics.groups)
    quota = sum(g.cpu_quota for g in p.metrics.groups)
    if base is not None and base > p.homogeneous_replicas and (p.fits is None or p.growth_manages_nodes):
        # a homogeneous scale-out with room for all of it lands strictly below (max+min)/2
        added = (base - p.homogeneous_replicas) * p.metrics.groups[0].cpu_quota / p.homogeneous_replicas
        assert used / (quota + added) < cpu.target or used / quota <= cpu.max_threshold


def _type_of(p: PlanInput, plan, name: str) -> str:
    for g in p.groups:
        if g.name == name:
            return g.resource_type
    return next(c.resource_type for c in plan.changes if c.cluster == name)


@given(situations(), st.integers(0, 20))
@settings(max_examples=200, deadline=None)
def test_property_external_never_above_max_replicas(p: PlanInput, recommended: int) -> None:
    raw = {"cluster": {"name": "db"}, "tikv": {"external": {"endpoint": {"host": "r", "port": 1}, "maxReplicas": 8}}}
    spec = parse_spec(raw, "ns", BASE)[0].components["tikv"]
    q = p.model_copy(update={"spec": spec, "groups": []})
    plan = plan_from_external(q, recommended)
    assert [c.to_replicas for c in plan.changes] == ([min(recommended, 8)] if recommended else [])
    assert plan.target("db") is None


def operator_group(spec: ComponentSpec, resource_type: str, replicas: int, group: str) -> Group:
    """A TidbCluster tidb-operator made with released PD: named from the labels of PD's first plan
    for it ({group, resource-type, specialUse}, pdplan_autoscaler.go createAutoscalingClusters),
    labelled tidb.pingcap.com/autoscaling-group=<group>."""
    created_with = {"group": group, "resource-type": resource_type, "specialUse": "hotRegion"}
    return Group(
        name=group_name(inp(spec, []), spec.resources[resource_type], created_with),
        group=group,
        resource_type=resource_type,
        replicas=replicas,
        labels=created_with,
    )


def test_pd_grows_the_group_tidb_operator_made_in_place() -> None:
    # tikv/pd pkg/autoscaling/calculation_test.go TestStrategyChangeCount: two stores of group
    # pd-auto-scaling-tikv-0 (resource_a), the resource's count raised to 3 under high load: PD's
    # plan is count 3 on that group. tidb-operator's syncPlans updates the TidbCluster whose
    # autoscaling-group label is the plan's group; growth must do the same, not create a second
    # TidbCluster of resource_a (the plan's labels no longer carry specialUse, so its name differs).
    spec = tikv_spec(count_big=3, count_small=None)
    standing = operator_group(spec, "big", 2, "pd-auto-scaling-tikv-0")
    plans = [
        PdPlan(
            component="tikv",
            count=3,
            resource_type="big",
            labels={"group": "pd-auto-scaling-tikv-0", "resource-type": "big"},
        )
    ]
    plan = plan_from_pd(inp(spec, [], groups=[standing]), plans)
    assert [(c.cluster, c.create, c.from_replicas, c.to_replicas) for c in plan.changes] == [
        (standing.name, False, 2, 3)
    ]
    # Count lowered to 1 (the test's last step): the same group goes down to 1.
    lowered = plan_from_pd(inp(tikv_spec(count_big=1, count_small=None), [], groups=[standing]), plans)
    assert [(c.cluster, c.to_replicas) for c in lowered.changes] == [(standing.name, 1)]


def test_growths_rules_grow_a_group_tidb_operator_made_instead_of_a_second_of_its_type() -> None:
    spec = tikv_spec(count_big=3, count_small=0)
    standing = operator_group(spec, "big", 1, "pd-auto-scaling-tikv")
    plan = plan_growth(inp(spec, [hom(3, 0.5, hot=1, hot_ratio=0.99)], groups=[standing]))
    grown = [c for c in plan.changes if c.resource_type == "big"]
    assert [(c.cluster, c.create, c.direction) for c in grown] == [(standing.name, False, "out")]
