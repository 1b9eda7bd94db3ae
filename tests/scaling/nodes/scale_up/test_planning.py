from collections import Counter
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scaling.kube.models import (
    NodeInfo,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    PodInfo,
    PodSpread,
    Resources,
    Taint,
    Toleration,
)
from scaling.nodes.catalogue import catalogue_index
from scaling.nodes.models import LABEL_GROUP, LABEL_POOL, InFlightRequest, NodeGroup, PlannedNode, ScaleUpPlan
from scaling.nodes.nodegroups import flatten_pools, parse_node_group
from scaling.nodes.providers.kwok import kwok_catalogue
from scaling.nodes.scale_up.demand import demand_key, observe_demand
from scaling.nodes.scale_up.planning import fallback_candidates, plan_scale_up

CAT = catalogue_index(kwok_catalogue())
GI = 2**30
MI = 2**20


def group(name: str = "g", pools: list[tuple[list[str], int]] | list[dict[str, Any]] = (), **spec: Any) -> NodeGroup:
    entries = [p if isinstance(p, dict) else {"provider": "kwok", "serverType": p[0], "priority": p[1]} for p in pools]
    return parse_node_group({"metadata": {"name": name}, "spec": {"pools": entries, **spec}}, {"kwok"})


def pods(n: int, cpu_m: int = 500, mem: int = 512 * MI, prefix: str = "p", **kw: Any) -> list[PodInfo]:
    return [
        PodInfo(
            namespace="ns",
            name=f"{prefix}{i}",
            uid=f"{prefix}{i}",
            requests=Resources(cpu_m=cpu_m, memory=mem, pods=1),
            **kw,
        )
        for i in range(n)
    ]


def price(plan: ScaleUpPlan) -> float:
    return sum(CAT[("kwok", n.pool.split("-", 1)[1])].price_hourly for n in plan.new_nodes)


def test_highest_priority_tier_wins_even_if_a_lower_tier_is_cheaper() -> None:
    g = group(pools=[(["cx33"], 50), (["cax21"], 90)])
    plan = plan_scale_up(pods(3), [], [g], CAT, [])
    assert {n.pool for n in plan.new_nodes} == {"kwok-cax21"}


def test_pod_too_big_for_the_top_tier_goes_to_a_lower_tier() -> None:
    g = group(pools=[(["cx22"], 90), (["cx52"], 10)])
    plan = plan_scale_up(pods(1, cpu_m=3000, prefix="big") + pods(2, cpu_m=500), [], [g], CAT, [])
    where = {uid: n.pool for n in plan.new_nodes for uid in n.pod_uids}
    assert where == {"big0": "kwok-cx52", "p0": "kwok-cx22", "p1": "kwok-cx22"}


def test_equal_priority_cheapest_wins_regardless_of_listing_order() -> None:
    for order in (["cx32", "cx33", "cpx31"], ["cpx31", "cx33", "cx32"]):
        plan = plan_scale_up(pods(4), [], [group(pools=[(order, 50)])], CAT, [])
        assert {n.pool for n in plan.new_nodes} == {"kwok-cx33"}


def test_least_waste_prefers_a_small_type_for_a_small_pod() -> None:
    plan = plan_scale_up(pods(1, cpu_m=1500), [], [group(pools=[(["cx52", "cx22"], 50)])], CAT, [])
    assert [n.pool for n in plan.new_nodes] == ["kwok-cx22"]


def test_memory_heavy_pods_go_to_memory_rich_types() -> None:
    plan = plan_scale_up(pods(20, cpu_m=100, mem=6 * GI), [], [group(pools=[(["cx22", "cx31", "cx52"], 50)])], CAT, [])
    # cx31 (2 cores, 8 GiB) holds one 6 GiB pod for less than a cx22 can (it can't) or a cx52 share.
    assert Counter(n.pool for n in plan.new_nodes)["kwok-cx31"] >= 1
    assert price(plan) <= 20 * CAT[("kwok", "cx31")].price_hourly + 1e-9


def test_fallback_candidate_order() -> None:
    g = group(
        pools=[
            (["cx42", "cx32", "cx33", "cx41", "nosuch"], 90),
            (["cx52", "cax41", "cx22"], 50),
            (["ccx33"], 10),
        ]
    )
    flat = {p.name: p for p in flatten_pools(g)}
    req = Resources(cpu_m=3000, memory=4 * GI, pods=3)
    names = [p.name for p in fallback_candidates(g, flat["kwok-cx33"], req, CAT)]
    # chosen, rest of its tier cheapest first (cx41 deprecated, nosuch unknown), then lower
    # tiers by priority then price; cx22 cannot hold 3 cores.
    assert names == ["kwok-cx33", "kwok-cx32", "kwok-cx42", "kwok-cax41", "kwok-cx52", "kwok-ccx33"]
    without = [
        p.name for p in fallback_candidates(g, flat["kwok-cx33"], req, CAT, {("g", "kwok-cx42"), ("kwok", "cx52")})
    ]
    assert without == ["kwok-cx33", "kwok-cx32", "kwok-cax41", "kwok-ccx33"]
    arm_only = [
        p.name for p in fallback_candidates(g, flat["kwok-cx33"], req, CAT, allowed={"kwok-cx33", "kwok-cax41"})
    ]
    assert arm_only == ["kwok-cx33", "kwok-cax41"]


def test_planned_nodes_carry_candidates_that_respect_pod_arch() -> None:
    g = group(pools=[(["cax21", "cx33"], 50)])
    plan = plan_scale_up(pods(2, node_selector={"kubernetes.io/arch": "arm64"}), [], [g], CAT, [])
    assert [[c.name for c in n.candidates] for n in plan.new_nodes] == [["kwok-cax21"]]


def test_a_linux_node_selector_is_met_by_every_planned_node() -> None:
    # Nodes growth creates run Linux; a selector on the well-known os label must not be a problem.
    g = group(pools=[(["cx22"], 50)])
    plan = plan_scale_up(pods(2, node_selector={"kubernetes.io/os": "linux"}), [], [g], CAT, [])
    assert not plan.problems and len(plan.new_nodes) == 1
    plan = plan_scale_up(pods(1, node_selector={"kubernetes.io/os": "windows"}), [], [g], CAT, [])
    assert [p.reason for p in plan.problems] == ["NoMatchingNodeGroup"] and not plan.new_nodes


def test_required_node_affinity_steers_pools_and_groups() -> None:
    arm_only = [
        NodeSelectorTerm(
            match_expressions=(NodeSelectorRequirement(key="kubernetes.io/arch", operator="In", values=("arm64",)),)
        )
    ]
    g = group(pools=[(["cax21", "cx33"], 50)])
    plan = plan_scale_up(pods(2, node_affinity=arm_only), [], [g], CAT, [])
    assert [[c.name for c in n.candidates] for n in plan.new_nodes] == [["kwok-cax21"]]
    # NotIn on a group's label keeps the pod off that group: the other one is the only match.
    not_batch = [
        NodeSelectorTerm(match_expressions=(NodeSelectorRequirement(key="team", operator="NotIn", values=("batch",)),))
    ]
    batch = group("batch", pools=[(["cx22"], 50)], labels={"team": "batch"})
    web = group("web", pools=[(["cx22"], 50)], labels={"team": "web"})
    plan = plan_scale_up(pods(1, node_affinity=not_batch), [], [batch, web], CAT, [])
    assert [n.group for n in plan.new_nodes] == ["web"] and not plan.problems
    # An existing node the affinity excludes is not counted as room.
    node = labelled_node("n1", "kwok-cx22", "batch")
    node = node.model_copy(update={"labels": {**node.labels, "team": "batch"}})
    plan = plan_scale_up(pods(1, node_affinity=not_batch), [node], [batch, web], CAT, [])
    assert not plan.fits_existing and [n.group for n in plan.new_nodes] == ["web"]


def request_for(n: PlannedNode, rid: str, **fields: Any) -> InFlightRequest:
    """The request in flight for planned node ``n`` (its first choice of pool), id ``rid``, with
    ``fields`` (pod_uids, pods, successor) as the case needs."""
    pool = n.candidates[0]
    return InFlightRequest(
        id=rid,
        group=n.group,
        pool=pool.name,
        server_type=pool.server_type,
        provider=pool.provider,
        requirements=n.requirements,
        **fields,
    )


def as_in_flight(plan: ScaleUpPlan, offset: int = 0) -> list[InFlightRequest]:
    return [request_for(n, f"r{offset + i}", pod_uids=n.pod_uids) for i, n in enumerate(plan.new_nodes)]


def test_in_flight_requests_are_not_double_counted_across_rounds() -> None:
    g = group(pools=[(["cx33"], 50)])
    first = plan_scale_up(pods(10), [], [g], CAT, [])
    assert first.new_nodes and not first.covered_in_flight
    flight = as_in_flight(first)
    second = plan_scale_up(pods(10), [], [g], CAT, flight)
    assert second.new_nodes == []
    assert sorted(second.covered_in_flight) == sorted(f"p{i}" for i in range(10))
    # More pods arrive: spare room of the requests is used first, and the next round again
    # plans nothing new for pods already covered.
    more = pods(10) + pods(12, prefix="q")
    third = plan_scale_up(more, [], [g], CAT, flight)
    covered_q = [u for u in third.covered_in_flight if u.startswith("q")]
    spare = sum(
        min(
            (CAT[("kwok", "cx33")].allocatable.cpu_m - r.requirements.cpu_m) // 500,
            (CAT[("kwok", "cx33")].allocatable.memory - r.requirements.memory) // (512 * MI),
        )
        for r in flight
    )
    assert len(covered_q) == min(spare, 12)
    assert sum(len(n.pod_uids) for n in third.new_nodes) == 12 - len(covered_q)
    fourth = plan_scale_up(more, [], [g], CAT, flight + as_in_flight(third, offset=100))
    assert fourth.new_nodes == [] and len(fourth.covered_in_flight) == 22


def test_in_flight_spare_room_respects_the_requests_arch() -> None:
    g = group(pools=[(["cax21", "cx33"], 50)])
    flight = [
        InFlightRequest(
            id="r",
            group="g",
            pool="kwok-cx33",
            server_type="cx33",
            provider="kwok",
            requirements=Resources(cpu_m=500, memory=512 * MI, pods=1),
            pod_uids=["other"],
        )
    ]
    plan = plan_scale_up(pods(1, node_selector={"kubernetes.io/arch": "arm64"}), [], [g], CAT, flight)
    assert plan.covered_in_flight == [] and [n.pool for n in plan.new_nodes] == ["kwok-cax21"]


def test_too_large_pod_is_never_satisfiable_while_others_are_planned() -> None:
    g = group(pools=[(["cx22", "cx52"], 50)])
    plan = plan_scale_up(pods(1, cpu_m=64000, prefix="huge") + pods(3), [], [g], CAT, [])
    assert [(p.uid, p.reason) for p in plan.problems] == [("huge0", "NeverSatisfiable")]
    assert "cpu=64" in plan.problems[0].message and "kwok-cx52" in plan.problems[0].message
    assert sorted(u for n in plan.new_nodes for u in n.pod_uids) == ["p0", "p1", "p2"]


def test_multiple_group_match_is_a_problem_and_not_scaled() -> None:
    a, b = group("a", pools=[(["cx33"], 1)]), group("b", pools=[(["cx32"], 1)])
    plan = plan_scale_up(pods(2), [], [a, b], CAT, [])
    assert plan.new_nodes == []
    assert {p.reason for p in plan.problems} == {"MultipleNodeGroups"}


def test_no_matching_group() -> None:
    g = group(pools=[(["cx33"], 1)], taints=[{"key": "k", "effect": "NoSchedule"}])
    plan = plan_scale_up(pods(1), [], [g], CAT, [])
    assert [p.reason for p in plan.problems] == ["NoMatchingNodeGroup"]


def labelled_node(name: str, pool: str, group_name: str = "g") -> NodeInfo:
    return NodeInfo(
        name=name,
        labels={LABEL_GROUP: group_name, LABEL_POOL: pool},
        ready=True,
        allocatable=Resources(cpu_m=1000, memory=GI, pods=110),
        requested=Resources(cpu_m=1000, memory=GI, pods=5),
    )


def test_pool_max_nodes_counts_existing_and_in_flight_then_falls_to_lower_tier() -> None:
    g = group(
        pools=[
            {"provider": "kwok", "serverType": ["cx22"], "priority": 90, "maxNodes": 3},
            {"provider": "kwok", "serverType": ["cx52"], "priority": 10},
        ]
    )
    existing = [labelled_node("n1", "kwok-cx22")]
    flight = [
        InFlightRequest(
            id="r",
            group="g",
            pool="kwok-cx22",
            server_type="cx22",
            provider="kwok",
            requirements=Resources(cpu_m=1900, memory=GI, pods=1),
            pod_uids=["x"],
        )
    ]
    plan = plan_scale_up(pods(6, cpu_m=1500), existing, [g], CAT, flight)
    c = Counter(n.pool for n in plan.new_nodes)
    assert c["kwok-cx22"] == 1  # 3 - 1 existing - 1 in flight
    assert c["kwok-cx52"] >= 1 and plan.problems == []


def test_group_and_cluster_max_nodes_are_respected() -> None:
    g = group(pools=[(["cx22"], 50)], maxNodes=4)
    plan = plan_scale_up(pods(10, cpu_m=1500), [labelled_node("n1", "kwok-cx22")], [g], CAT, [])
    assert len(plan.new_nodes) == 3
    assert [p.reason for p in plan.problems] == ["MaxNodesReached"] * 7
    assert "maxNodes=4" in plan.problems[0].message
    g2 = group(pools=[(["cx22"], 50)])
    plan = plan_scale_up(pods(10, cpu_m=1500), [labelled_node("n1", "other", "x")], [g2], CAT, [], max_nodes_total=3)
    assert len(plan.new_nodes) == 2 and len(plan.problems) == 8
    assert "cluster max nodes 3" in plan.problems[0].message


def test_pools_in_backoff_are_skipped() -> None:
    g = group(pools=[(["cx33"], 90), (["cx52"], 10)])
    plan = plan_scale_up(pods(2), [], [g], CAT, [], unavailable_pools={("g", "kwok-cx33")})
    assert {n.pool for n in plan.new_nodes} == {"kwok-cx52"}
    assert all(c.name != "kwok-cx33" for n in plan.new_nodes for c in n.candidates)
    plan = plan_scale_up(pods(2), [], [g], CAT, [], unavailable_pools={("kwok", "cx33"), ("kwok", "cx52")})
    assert plan.new_nodes == [] and {p.reason for p in plan.problems} == {"NoAvailablePool"}


def test_pods_fitting_existing_ready_nodes_are_left_to_the_scheduler() -> None:
    room = dict(
        allocatable=Resources(cpu_m=2000, memory=4 * GI, pods=110), requested=Resources(cpu_m=1000, memory=GI, pods=3)
    )
    nodes = [
        NodeInfo(name="notready", ready=False, **room),
        NodeInfo(name="cordoned", ready=True, unschedulable=True, **room),
        NodeInfo(name="tainted", ready=True, taints=[Taint(key="k", effect="NoSchedule")], **room),
        NodeInfo(name="ok", ready=True, **room),
    ]
    g = group(pools=[(["cx33"], 50)])
    plan = plan_scale_up(pods(3), nodes, [g], CAT, [])
    assert sorted(plan.fits_existing) == ["p0", "p1"]  # 1000m free on "ok" holds two 500m pods
    assert [n.pod_uids for n in plan.new_nodes] == [["p2"]]
    tolerant = pods(2, prefix="t", tolerations=[Toleration(key="k", operator="Exists")])
    plan = plan_scale_up(tolerant, nodes, [g], CAT, [])
    assert sorted(plan.fits_existing) == ["t0", "t1"]


def test_daemonset_mirror_and_bound_pods_are_never_demand() -> None:
    g = group(pools=[(["cx33"], 50)])
    ps = (
        pods(1, prefix="ds", is_daemonset=True)
        + pods(1, prefix="m", is_mirror=True)
        + pods(1, prefix="b", node_name="n")
    )
    plan = plan_scale_up(ps, [], [g], CAT, [])
    assert plan == ScaleUpPlan()


# ---------------------------------------------------------------------------- properties

TYPES = ["cx22", "cx33", "cx52", "cx31", "cax21", "ccx13", "cpx11"]
shape_st = st.tuples(
    st.integers(min_value=10, max_value=20000),  # cpu m (some too big for everything)
    st.integers(min_value=16, max_value=40 * 1024),  # memory MiB
    st.integers(min_value=1, max_value=40),  # replicas
    st.sampled_from([None, "amd64", "arm64"]),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    shapes=st.lists(shape_st, min_size=1, max_size=6),
    tiers=st.lists(
        st.tuples(
            st.lists(st.sampled_from(TYPES), min_size=1, max_size=3, unique=True),
            st.integers(min_value=0, max_value=3),
            st.one_of(st.none(), st.integers(min_value=0, max_value=5)),
        ),
        min_size=1,
        max_size=3,
    ),
    group_max=st.one_of(st.none(), st.integers(min_value=0, max_value=30)),
    existing_free=st.lists(st.integers(min_value=0, max_value=4000), max_size=4),
    in_flight_share=st.integers(min_value=0, max_value=3),
)
def test_packer_properties(shapes, tiers, group_max, existing_free, in_flight_share) -> None:
    seen: set[str] = set()
    entries = []
    for types, prio, max_nodes in tiers:
        types = [t for t in types if t not in seen]
        seen.update(types)
        if types:
            entries.append({"provider": "kwok", "serverType": types, "priority": prio, "maxNodes": max_nodes})
    g = group(pools=entries, maxNodes=group_max)
    all_pods: list[PodInfo] = []
    for i, (cpu, mem, n, arch) in enumerate(shapes):
        sel = {"kubernetes.io/arch": arch} if arch else {}
        all_pods += pods(n, cpu_m=cpu, mem=mem * MI, prefix=f"s{i}-", node_selector=sel)
    nodes = [
        NodeInfo(
            name=f"e{i}",
            ready=True,
            allocatable=Resources(cpu_m=4000, memory=8 * GI, pods=110),
            requested=Resources(cpu_m=4000 - f, memory=8 * GI - f * MI, pods=1),
        )
        for i, f in enumerate(existing_free)
    ]
    # Some pods already have an in-flight request of their own.
    flight = [
        InFlightRequest(
            id=f"r{i}",
            group="g",
            pool=flatten_pools(g)[0].name,
            server_type=flatten_pools(g)[0].server_type,
            provider="kwok",
            requirements=p.requests,
            pod_uids=[p.uid],
        )
        for i, p in enumerate(all_pods[:in_flight_share])
    ]
    plan = plan_scale_up(all_pods, nodes, [g], CAT, flight)

    by_uid = {p.uid: p for p in all_pods}
    accounted = (
        [u for n in plan.new_nodes for u in n.pod_uids]
        + plan.fits_existing
        + plan.covered_in_flight
        + [p.uid for p in plan.problems]
    )
    assert Counter(accounted) == Counter(list(by_uid))  # every pod exactly once
    per_pool = Counter(n.pool for n in plan.new_nodes)
    for n in plan.new_nodes:
        t = CAT[("kwok", n.pool.split("-", 1)[1])]
        total = Resources()
        for u in n.pod_uids:
            total = total + by_uid[u].requests
            arch = by_uid[u].node_selector.get("kubernetes.io/arch")
            assert arch in (None, t.arch)
        assert total == n.requirements
        assert n.requirements.fits_in(t.allocatable)
        assert n.candidates[0].name == n.pool
        for c in n.candidates:
            ct = CAT[("kwok", c.server_type.lower())]
            assert n.requirements.fits_in(ct.allocatable) and not ct.deprecated
    for p in flatten_pools(g):
        if p.max_nodes is not None:
            assert per_pool[p.name] <= max(p.max_nodes - sum(1 for r in flight if r.pool == p.name), 0)
    if group_max is not None:
        assert len(plan.new_nodes) <= max(group_max - len(flight), 0)
    for prob in plan.problems:
        if prob.reason == "NeverSatisfiable":
            req = by_uid[prob.uid].requests
            arch = by_uid[prob.uid].node_selector.get("kubernetes.io/arch")
            assert not any(
                req.fits_in(CAT[("kwok", p.server_type)].allocatable)
                for p in flatten_pools(g)
                if arch in (None, CAT[("kwok", p.server_type)].arch)
            )


ONE_PER_NODE = [PodSpread(match_labels=(("app", "web"),), namespaces=("ns",), limit=1)]


def test_burst_with_hostname_anti_affinity_gets_one_node_per_replica() -> None:
    g = group(pools=[(["cx33"], 50)])
    spread = plan_scale_up(pods(5, labels={"app": "web"}, spreads=ONE_PER_NODE), [], [g], CAT, [])
    assert len(spread.new_nodes) == 5
    assert all(len(n.pod_uids) == 1 and sum(n.pods.values()) == 1 for n in spread.new_nodes)
    # The same replicas without it share one node.
    assert len(plan_scale_up(pods(5, labels={"app": "web"}), [], [g], CAT, []).new_nodes) == 1


def test_anti_affinity_pods_share_new_nodes_with_other_pods() -> None:
    g = group(pools=[(["cx33"], 50)])
    plan = plan_scale_up(pods(3, spreads=ONE_PER_NODE) + pods(6, prefix="q"), [], [g], CAT, [])
    assert len(plan.new_nodes) == 3  # the 6 plain pods fill the 3 nodes beside one each
    assert sorted(sum(1 for u in n.pod_uids if u.startswith("p")) for n in plan.new_nodes) == [1, 1, 1]


def test_hostname_spread_puts_at_most_max_skew_per_new_node() -> None:
    g = group(pools=[(["cx33"], 50)])
    two = [PodSpread(match_labels=(("app", "web"),), namespaces=("ns",), limit=2)]
    plan = plan_scale_up(pods(6, labels={"app": "web"}, spreads=two), [], [g], CAT, [])
    assert sorted(len(n.pod_uids) for n in plan.new_nodes) == [2, 2, 2]


def test_anti_affinity_settles_only_on_nodes_without_a_matching_pod() -> None:
    room = dict(allocatable=Resources(cpu_m=4000, memory=8 * GI, pods=110), ready=True)
    nodes = [NodeInfo(name="busy", **room), NodeInfo(name="free", **room)]
    running = PodInfo(namespace="ns", name="r", uid="r", node_name="busy", labels={"app": "web"})
    g = group(pools=[(["cx33"], 50)])
    plan = plan_scale_up([running, *pods(3, labels={"app": "web"}, spreads=ONE_PER_NODE)], nodes, [g], CAT, [])
    assert plan.pods_fit_existing == 1  # "free" takes one; "busy" already runs one
    assert len(plan.new_nodes) == 2
    # A running pod elsewhere (another namespace) does not count.
    other = running.model_copy(update={"namespace": "other"})
    plan = plan_scale_up([other, *pods(3, labels={"app": "web"}, spreads=ONE_PER_NODE)], nodes, [g], CAT, [])
    assert plan.pods_fit_existing == 2 and len(plan.new_nodes) == 1
    # Without knowing what runs where, such pods never settle (a node is planned instead).
    demand = observe_demand(pods(3, spreads=ONE_PER_NODE), nodes)
    assert demand.fits_existing == 0 and demand.shapes[0].count == 3


def test_in_flight_spare_room_takes_no_second_anti_affinity_pod() -> None:
    g = group(pools=[(["cx33"], 50)])
    reps = pods(2, labels={"app": "web"}, spreads=ONE_PER_NODE)
    first = plan_scale_up(reps[:1], [], [g], CAT, [])
    (node,) = first.new_nodes
    second = plan_scale_up(reps, [], [g], CAT, [request_for(node, "r0", pods=node.pods)])
    assert second.pods_covered == 1 and len(second.new_nodes) == 1  # the request's room is not its


def successor_for(planned: PlannedNode) -> InFlightRequest:
    """A replacement's successor in flight, made for the pods of ``planned``."""
    return request_for(planned, "c/node-0", pods=planned.pods, successor=True)


def test_a_successor_in_flight_lends_its_spare_room_never_the_room_of_the_pods_it_is_made_for() -> None:
    """A replacement's successor (InFlightRequest.successor) is made for pods running on the node it
    replaces. Pending pods of the same shape are not those pods (a plain request's made-for count would
    cover them); they take its spare room only, as Karpenter nominates pending pods to an in-flight
    NodeClaim, and what does not fit gets a node of its own."""
    g = group(pools=[(["cx33"], 50)])
    moving = pods(6, prefix="m")  # on the node being replaced: 3 cpu of the cx33's
    (planned,) = plan_scale_up(moving, [], [g], CAT, []).new_nodes
    successor = successor_for(planned)
    alloc = CAT[("kwok", "cx33")].allocatable
    spare = min(
        (alloc.cpu_m - planned.requirements.cpu_m) // 500, (alloc.memory - planned.requirements.memory) // (512 * MI)
    )
    assert 0 < spare < 8
    pending = pods(8)  # the same shape as the moving pods
    plan = plan_scale_up(pending, [], [g], CAT, [successor])
    assert plan.pods_covered == spare and len(plan.covered_in_flight) == spare
    assert sum(len(n.pod_uids) for n in plan.new_nodes) == 8 - spare
    # As a plain request it would cover six more by its made-for count: the successor's flag is what holds.
    plain = plan_scale_up(pending, [], [g], CAT, [successor.model_copy(update={"successor": False})])
    assert plain.pods_covered == min(6 + spare, 8)


def test_a_successor_in_flight_takes_no_pod_its_moving_pods_repel() -> None:
    g = group(pools=[(["cx33"], 50)])
    reps = pods(2, labels={"app": "web"}, spreads=ONE_PER_NODE)
    (node,) = plan_scale_up(reps[:1], [], [g], CAT, []).new_nodes
    successor = successor_for(node)
    plan = plan_scale_up(reps[1:], [], [g], CAT, [successor])
    assert plan.pods_covered == 0 and len(plan.new_nodes) == 1  # one web per node: the moving one's


def test_per_node_limits_join_the_shape_key_but_labels_do_not() -> None:
    base = pods(1)[0]
    # Unchanged for a pod without limits: keys live in recorded histories and in-flight requests.
    legacy = base.model_copy(
        update={"node_selector": {"kubernetes.io/os": "linux"}, "tolerations": [Toleration(key="k", operator="Exists")]}
    )
    assert demand_key(legacy) == "d4105a5807ff63be"
    limited = base.model_copy(update={"spreads": ONE_PER_NODE})
    assert demand_key(limited) != demand_key(base)
    assert demand_key(limited.model_copy(update={"labels": {"app": "web", "pod-template-hash": "x"}})) == demand_key(
        limited
    )
    two = [ONE_PER_NODE[0].model_copy(update={"limit": 2})]
    assert demand_key(base.model_copy(update={"spreads": two})) != demand_key(limited)
