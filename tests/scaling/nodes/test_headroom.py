"""Headroom: spec parsing and validation, the planner's virtual pods, the scale-down blocker."""

from __future__ import annotations

from typing import Any

import pytest

from scaling.kube.drain import TAINT_TO_BE_DELETED
from scaling.kube.models import NodeInfo, PodInfo, Resources, Taint
from scaling.nodes.catalogue import catalogue_index
from scaling.nodes.headroom import (
    HEADROOM,
    headroom_blocker,
    headroom_pods,
    headroom_uid,
    holds_headroom,
    is_headroom,
    split_headroom,
)
from scaling.nodes.loop import may_scale_down, never_satisfiable_of
from scaling.nodes.matching import node_labels_for
from scaling.nodes.models import InFlightRequest, NodeGroup, PodProblem
from scaling.nodes.nodegroups import flatten_pools, load_node_groups, parse_node_group
from scaling.nodes.observation import never_satisfiable_events
from scaling.nodes.providers.kwok import kwok_catalogue
from scaling.nodes.scale_down.candidates import UNNEEDED_TIME, plan_scale_down
from scaling.nodes.scale_down.models import NodeState
from scaling.nodes.scale_down.recheck import still_removable
from scaling.nodes.scale_down.soft_taints import unneeded_nodes
from scaling.nodes.scale_up.demand import tally_nodes
from scaling.nodes.scale_up.planning import plan_scale_up

CAT = catalogue_index(kwok_catalogue())
GI = 2**30
MI = 2**20
CX22 = CAT[("kwok", "cx22")].allocatable  # 1930m, ~2.9 GiB
CX32 = CAT[("kwok", "cx32")].allocatable  # 3920m, ~6.1 GiB


def obj(name: str = "g", headroom: Any = None, **spec: Any) -> dict[str, Any]:
    pools = spec.pop("pools", [{"provider": "kwok", "serverType": ["cx22", "cx32"], "priority": 10}])
    if headroom is not None:
        spec["headroom"] = headroom
    return {"metadata": {"name": name}, "spec": {"pools": pools, **spec}}


def group(name: str = "g", headroom: Any = None, **spec: Any) -> NodeGroup:
    return parse_node_group(obj(name, headroom, **spec), {"kwok"})


def node_of(g: NodeGroup, name: str, used: Resources | None = None, server_type: str = "cx22", **kw: Any) -> NodeInfo:
    """A Ready node of `g` as growth creates it (the labels node_labels_for gives), `used` requested."""
    pool = next(p for p in flatten_pools(g) if p.server_type == server_type)
    stype = CAT[("kwok", server_type)]
    kw.setdefault("ready", True)
    return NodeInfo(
        name=name,
        labels=node_labels_for(g, pool, stype),
        taints=list(g.taints),
        allocatable=stype.allocatable,
        requested=used or Resources(),
        **kw,
    )


def pending(n: int, cpu_m: int, mem: int, prefix: str = "p", **kw: Any) -> list[PodInfo]:
    return [
        PodInfo(
            namespace="ns",
            name=f"{prefix}{i}",
            uid=f"{prefix}{i}",
            requests=Resources(cpu_m=cpu_m, memory=mem, pods=1),
            unschedulable=True,
            controller_kind="ReplicaSet",
            **kw,
        )
        for i in range(n)
    ]


# -- spec --------------------------------------------------------------------------------------


def test_headroom_quantities_are_parsed_exactly() -> None:
    assert group(headroom={"cpu": "1500m", "memory": "2Gi"}).headroom == Resources(cpu_m=1500, memory=2 * GI, pods=1)
    assert group(headroom={"cpu": 2, "pods": "3"}).headroom == Resources(cpu_m=2000, memory=0, pods=3)
    assert group(headroom={"memory": "512Mi", "pods": 10}).headroom == Resources(cpu_m=0, memory=512 * MI, pods=10)
    assert group().headroom is None
    assert group(headroom=None).headroom is None


@pytest.mark.parametrize(
    ("headroom", "field"),
    [
        ({"cpu": "2x"}, "spec.headroom.cpu"),
        ({"cpu": "-1"}, "spec.headroom.cpu"),
        ({"cpu": True}, "spec.headroom.cpu"),
        ({"memory": "4Gb"}, "spec.headroom.memory"),
        ({"memory": -5}, "spec.headroom.memory"),
        ({"cpu": "1", "pods": 0}, "spec.headroom.pods"),
        ({"cpu": "1", "pods": 1.5}, "spec.headroom.pods"),
        ({"cpu": "1", "pods": "two"}, "spec.headroom.pods"),
        ({"cpu": "1", "gpu": "1"}, "spec.headroom.gpu"),
        ({}, "spec.headroom"),
        ("2", "spec.headroom"),
        ([{"cpu": "1"}], "spec.headroom"),
    ],
)
def test_invalid_headroom_is_refused_naming_the_field(headroom: Any, field: str) -> None:
    groups, problems = load_node_groups([obj("bad", headroom), obj("good", {"cpu": "1"})], {"kwok"})
    # The bad group is reported with the field; the other group keeps working.
    assert [g.name for g in groups] == ["good"]
    assert [(p.name, p.field) for p in problems] == [("bad", field)]
    assert problems[0].kind == "NodeGroupWithPriority" and problems[0].message


# -- virtual pods --------------------------------------------------------------------------------


def test_one_virtual_pod_per_group_with_headroom_matching_only_that_group() -> None:
    tainted = group("b", {"cpu": "1", "memory": "1Gi"}, taints=[{"key": "dedicated", "value": "b"}])
    plain = group("a", {"cpu": "500m"})
    none = group("c")
    vpods = headroom_pods([tainted, none, plain])
    assert [p.uid for p in vpods] == [headroom_uid("a"), headroom_uid("b")]
    assert all(is_headroom(p.uid) for p in vpods) and not is_headroom("0b5f7c1e-uid")
    assert vpods[1].requests == Resources(cpu_m=1000, memory=GI, pods=1)
    # All three groups (no labels, so any plain pod would match all of them) are candidates,
    # yet each virtual pod gets a node only in its own group: no MultipleNodeGroups problem.
    plan = plan_scale_up(vpods, [], [tainted, none, plain], CAT, [])
    assert plan.problems == []
    assert sorted((n.group, n.pod_uids[0]) for n in plan.new_nodes) == [("a", "headroom/a"), ("b", "headroom/b")]


def test_a_group_with_headroom_and_no_nodes_gets_one_node_sized_for_it() -> None:
    g = group(headroom={"cpu": "3", "memory": "4Gi"})  # too much for a cx22, fits a cx32
    plan = plan_scale_up(headroom_pods([g]), [], [g], CAT, [])
    [planned] = plan.new_nodes
    assert planned.group == "g" and planned.pool == "kwok-cx32"
    assert planned.requirements == Resources(cpu_m=3000, memory=4 * GI, pods=1)
    assert planned.pod_uids == [headroom_uid("g")]


def test_a_node_with_enough_free_room_gets_no_request_and_a_full_one_does() -> None:
    g = group(headroom={"cpu": "1", "memory": "1Gi"})
    half = node_of(g, "n1", used=Resources(cpu_m=500, memory=GI, pods=3))
    plan = plan_scale_up(headroom_pods([g]), [half], [g], CAT, [])
    assert plan.new_nodes == [] and plan.fits_existing == [headroom_uid("g")]
    # Pods filled it: less than 1 CPU left, so a second node is planned for the headroom.
    full = node_of(g, "n1", used=Resources(cpu_m=1200, memory=GI, pods=6))
    plan = plan_scale_up(headroom_pods([g]), [full], [g], CAT, [])
    assert [n.pod_uids for n in plan.new_nodes] == [[headroom_uid("g")]]


def test_pending_pods_take_the_free_room_first_and_push_the_headroom_onto_a_new_node() -> None:
    g = group(headroom={"cpu": "1", "memory": "1Gi"})
    n1 = node_of(g, "n1")  # 1930m free: the headroom, or the pending 1.5 CPU pod, not both
    plan = plan_scale_up(pending(1, 1500, GI) + headroom_pods([g]), [n1], [g], CAT, [])
    assert plan.fits_existing == ["p0"]
    assert [n.pod_uids for n in plan.new_nodes] == [[headroom_uid("g")]]


def test_headroom_is_held_by_one_node_not_by_room_spread_over_several() -> None:
    g = group(headroom={"cpu": "1500m", "memory": "1Gi"})
    # 1 CPU free on each of two nodes: 2 CPUs in all, but a 1.5 CPU pod fits on neither.
    nodes = [node_of(g, f"n{i}", used=Resources(cpu_m=930, memory=GI, pods=1)) for i in range(2)]
    plan = plan_scale_up(headroom_pods([g]), nodes, [g], CAT, [])
    assert [n.pod_uids for n in plan.new_nodes] == [[headroom_uid("g")]]


def test_only_the_groups_own_ready_untainted_nodes_hold_its_headroom() -> None:
    g = group("g", {"cpu": "1", "memory": "1Gi"})
    other = group("other")
    empty_other = node_of(other, "o1")  # plenty of room, wrong group
    not_ready = node_of(g, "n1", ready=False)
    cordoned = node_of(g, "n2", unschedulable=True)
    leaving = node_of(g, "n3")
    leaving = leaving.model_copy(update={"taints": [Taint(key=TAINT_TO_BE_DELETED, effect="NoSchedule")]})
    nodes = [empty_other, not_ready, cordoned, leaving]
    plan = plan_scale_up(headroom_pods([g, other]), nodes, [g, other], CAT, [])
    assert [(n.group, n.pod_uids) for n in plan.new_nodes] == [("g", [headroom_uid("g")])]
    assert not any(holds_headroom(n, g, n.requested) for n in nodes)
    assert holds_headroom(node_of(g, "ok"), g, Resources())


def test_a_tainted_groups_headroom_lands_on_its_tainted_nodes() -> None:
    g = group(headroom={"cpu": "1"}, taints=[{"key": "dedicated", "value": "ml", "effect": "NoExecute"}])
    assert plan_scale_up(headroom_pods([g]), [node_of(g, "n1")], [g], CAT, []).new_nodes == []
    plan = plan_scale_up(headroom_pods([g]), [], [g], CAT, [])
    assert plan.problems == [] and len(plan.new_nodes) == 1


def test_a_request_in_flight_covers_the_headroom() -> None:
    g = group(headroom={"cpu": "1", "memory": "1Gi"})
    req = Resources(cpu_m=1000, memory=GI, pods=1)
    for_it = InFlightRequest(
        id="r1",
        group="g",
        pool="kwok-cx22",
        server_type="cx22",
        provider="kwok",
        requirements=req,
        pod_uids=["headroom/g"],
    )
    plan = plan_scale_up(headroom_pods([g]), [], [g], CAT, [for_it])
    assert plan.new_nodes == [] and plan.covered_in_flight == [headroom_uid("g")]
    # The spare room of a request made for real pods covers it as well...
    for_pods = for_it.model_copy(update={"pod_uids": ["p0"], "requirements": Resources(cpu_m=500, memory=GI, pods=1)})
    assert plan_scale_up(headroom_pods([g]), [], [g], CAT, [for_pods]).new_nodes == []
    # ...but not when the pods leave less than the headroom free.
    tight = for_pods.model_copy(update={"requirements": Resources(cpu_m=1500, memory=GI, pods=1)})
    assert len(plan_scale_up(headroom_pods([g]), [], [g], CAT, [tight]).new_nodes) == 1


def test_split_headroom_keeps_virtual_pods_out_of_events_and_scale_down_gating() -> None:
    big = group("big", {"cpu": "64"})  # no server type holds it
    g = group("g", {"cpu": "1"})
    n1 = node_of(g, "n1")
    plan = plan_scale_up(pending(1, 200, 100 * MI, prefix="huge", node_selector={"x": "y"}) + headroom_pods([big, g]),
                         [n1], [big, g], CAT, [])  # fmt: skip
    assert headroom_uid("g") in plan.fits_existing
    assert {p.uid: p.reason for p in plan.problems} == {
        "huge0": "NoMatchingNodeGroup",
        "headroom/big": "NeverSatisfiable",
    }
    split = split_headroom(plan)
    assert split.plan.fits_existing == [] and split.plan.covered_in_flight == []
    assert [p.uid for p in split.plan.problems] == ["huge0"]
    assert [(p.uid, p.reason) for p in split.problems] == [("headroom/big", "NeverSatisfiable")]
    assert never_satisfiable_of(split.plan.problems) == {}
    # Headroom held by an existing node does not hold scale-down back the way a pending pod does.
    assert not may_scale_down(plan, True, tally_nodes([n1]), removals_running=False)
    assert may_scale_down(split.plan, True, tally_nodes([n1]), removals_running=False)


def test_never_satisfiable_events_skip_virtual_pods() -> None:
    problems = [
        PodProblem(namespace="", name="headroom/g", uid="headroom/g", reason="NeverSatisfiable", message="too big"),
        PodProblem(namespace="ns", name="web", uid="u-1", reason="NeverSatisfiable", message="too big"),
    ]
    assert [e.pod_uid for e in never_satisfiable_events(problems)] == ["u-1"]


# -- scale-down --------------------------------------------------------------------------------


def running(name: str, on: str, cpu_m: int, mem: int = 256 * MI) -> PodInfo:
    return PodInfo(
        namespace="ns",
        name=name,
        uid=f"ns/{name}",
        node_name=on,
        phase="Running",
        requests=Resources(cpu_m=cpu_m, memory=mem, pods=1),
        controller_kind="ReplicaSet",
    )


def scale_down(nodes: list[NodeInfo], pods: list[PodInfo], groups: list[NodeGroup]):  # noqa: ANN201
    return plan_scale_down(nodes, pods, [], groups, None, 10_000.0, {n.name: 0.0 for n in nodes}, None, set(), set())


def test_the_only_node_holding_the_headroom_is_kept() -> None:
    g = group(headroom={"cpu": "1", "memory": "1Gi"}, scaleDown={"unneededTime": "1s"})
    plan = scale_down([node_of(g, "n1")], [], [g])
    assert plan.to_remove == []
    dec = plan.decisions["n1"]
    assert dec.state == NodeState.BLOCKED and dec.reason == HEADROOM
    # Without headroom the same empty node goes.
    bare = group(scaleDown={"unneededTime": "1s"})
    assert [r.name for r in scale_down([node_of(bare, "n1")], [], [bare]).to_remove] == ["n1"]


def test_of_two_empty_nodes_one_goes_and_one_keeps_the_headroom() -> None:
    g = group(headroom={"cpu": "1", "memory": "1Gi"}, scaleDown={"unneededTime": "1s"})
    plan = scale_down([node_of(g, "n1"), node_of(g, "n2")], [], [g])
    assert [r.name for r in plan.to_remove] == ["n1"]
    assert plan.decisions["n2"].reason == HEADROOM


def test_a_node_whose_pods_would_fill_the_headroom_holder_is_kept() -> None:
    def plan_for(cpu: str):  # noqa: ANN202
        g = group(headroom={"cpu": cpu}, scaleDown={"unneededTime": "1s", "utilizationThreshold": 0.3})
        nodes = [node_of(g, "n1"), node_of(g, "n2")]
        # n1 is utilised (36%) and has 1230m free; n2 (10%) is underused, its pod fits on n1.
        pods = [running("db-0", "n1", 700), running("web-0", "n2", 200)]
        return scale_down(nodes, pods, [g])

    # After the move n1 has 1030m free: it still holds a 1 CPU headroom, so n2 may go.
    assert [r.name for r in plan_for("1").to_remove] == ["n2"]
    # A 1.1 CPU headroom fits n1 now (1230m) but not once n2's pod moved there: n2 stays.
    plan = plan_for("1100m")
    assert plan.to_remove == []
    assert plan.decisions["n2"].state == NodeState.BLOCKED and plan.decisions["n2"].reason == HEADROOM
    assert plan.decisions["n1"].state == NodeState.UTILIZED


def test_headroom_of_another_group_does_not_keep_a_node() -> None:
    g = group("g", {"cpu": "1"}, scaleDown={"unneededTime": "1s"})
    other = group("other", scaleDown={"unneededTime": "1s"})
    plan = scale_down([node_of(g, "g1"), node_of(other, "o1")], [], [g, other])
    assert [r.name for r in plan.to_remove] == ["o1"]


def test_the_recheck_keeps_the_last_headroom_holder() -> None:
    g = group(headroom={"cpu": "1", "memory": "1Gi"})
    n1, n2 = node_of(g, "n1"), node_of(g, "n2")
    assert still_removable(n1, [], [], None, [n1, n2], groups=[g], in_progress={"n1"}).ok
    # n2 filled up since n1 was marked: n1 is the only room left for the headroom.
    pods = [running("web-0", "n2", 1500)]
    check = still_removable(n1, pods, [], None, [n1, n2], groups=[g], in_progress={"n1"})
    assert not check.ok and [b.code for b in check.blockers] == [HEADROOM]
    by_group = {"g": g}
    assert headroom_blocker(n1, by_group, [n2], {"n2": Resources(cpu_m=1500)}) is not None
    assert headroom_blocker(n1, by_group, [n2], {}) is None


def test_an_underused_node_holding_the_headroom_says_so_while_its_timer_runs() -> None:
    """Its unneeded timer runs (select_removals keeps it once the timer is out), and the Headroom
    reason beside the timer's keeps the soft taint off it meanwhile, instead of putting the taint on
    for the timer and lifting it once the timer is out."""
    g = group(headroom={"cpu": "1100m"}, scaleDown={"unneededTime": "10m", "utilizationThreshold": 0.3})
    nodes = [node_of(g, "n1"), node_of(g, "n2")]
    pods = [running("db-0", "n1", 700), running("web-0", "n2", 200)]  # as the test above
    plan = plan_scale_down(nodes, pods, [], [g], None, 10_000.0, {"n2": 9_900.0}, None, set(), set())
    dec = plan.decisions["n2"]
    assert dec.state == NodeState.UNNEEDED_WAITING and dec.unneeded_since == 9_900.0
    assert [r.code for r in dec.reasons] == [UNNEEDED_TIME, HEADROOM]
    assert unneeded_nodes(plan.decisions, plan.unneeded_since) == set()
    # A 1 CPU headroom still fits n1 once n2's pod moved there: n2 is unneeded, the taint goes on.
    g = group(headroom={"cpu": "1"}, scaleDown={"unneededTime": "10m", "utilizationThreshold": 0.3})
    nodes = [node_of(g, "n1"), node_of(g, "n2")]
    plan = plan_scale_down(nodes, pods, [], [g], None, 10_000.0, {"n2": 9_900.0}, None, set(), set())
    assert [r.code for r in plan.decisions["n2"].reasons] == [UNNEEDED_TIME]
    assert unneeded_nodes(plan.decisions, plan.unneeded_since) == {"n2"}
