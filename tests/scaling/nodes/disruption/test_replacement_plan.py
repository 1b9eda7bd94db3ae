"""plan_replacement beside another replacement under way: the successor made for a node still
leaving is that node's pods' room, so a second replacement planned while it stands empty (before
its node is drained) buys its own successor instead of counting on it. Counting on it drained the
second node onto it, and the first node's pods then found no room (both nodes out of service for
them until a scale-up)."""

from __future__ import annotations

from datetime import UTC, datetime

from scaling.kube.drain import TAINT_TO_BE_DELETED
from scaling.kube.labels import label_value
from scaling.kube.models import Resources, Taint
from scaling.nodes.contracts import ScaleDownObservation
from scaling.nodes.disruption.arrival_orders import with_stranding
from scaling.nodes.disruption.drift import LABEL_REPLACES
from scaling.nodes.disruption.replacement import plan_replacement, saving_refused
from scaling.nodes.providers.kwok import kwok_catalogue
from scaling.nodes.scale_down.methods.consolidated import MIN_SAVING
from tests.workflows.nodes.test_node_replacement import busy
from tests.workflows.nodes.test_node_scale_down import GIB, GROUP, node


def successor_of(name: str, of: str):  # noqa: ANN201
    n = node(name)
    return n.model_copy(update={"labels": {**n.labels, LABEL_REPLACES: label_value(of)}})


def test_a_successor_of_a_node_still_leaving_is_not_room_for_another() -> None:
    # a and b are full cx22s; a is being replaced (leaving), its successor sa is Ready and empty.
    obs = ScaleDownObservation(
        nodes=[node("a"), node("b"), successor_of("sa", "a")], pods=[*busy("a"), *busy("b")], groups=[GROUP]
    )
    plan = plan_replacement(obs, kwok_catalogue(), "b", {"a"}, 0.0)
    assert len(plan.new_nodes) == 1 and plan.new_nodes[0].pod_uids == ["b-web"] and not plan.problems
    # Once a is gone (its replacement over), sa is a node like any other: b's pods fit its room.
    after = ScaleDownObservation(nodes=[node("b"), successor_of("sa", "a")], pods=busy("b"), groups=[GROUP])
    assert plan_replacement(after, kwok_catalogue(), "b", set(), 0.0).new_nodes == []


def test_pods_the_scheduler_is_about_to_bind_take_their_room_first() -> None:
    """a's replacement just ended: a is gone, its pod recreated and not yet bound (it will land on sa).
    b's replacement, planned in that window, must not count sa as room (found by running the node
    replacement with the sim's scheduler slowed to 8 s: b was drained onto sa with no successor, and
    its pods went pending until a scale-up)."""
    recreated = [p.model_copy(update={"node_name": None, "phase": "Pending", "uid": f"{p.uid}-2"}) for p in busy("a")]
    obs = ScaleDownObservation(
        nodes=[node("b"), successor_of("sa", "a")], pods=[*busy("b"), *recreated], groups=[GROUP]
    )
    plan = plan_replacement(obs, kwok_catalogue(), "b", set(), 0.0)
    assert len(plan.new_nodes) == 1 and plan.new_nodes[0].pod_uids == ["b-web"] and not plan.problems
    # Judged Unschedulable, a pod is the scale-up planner's: the room stays b's to count on.
    judged = [p.model_copy(update={"unschedulable": True}) for p in recreated]
    judged_obs = obs.model_copy(update={"pods": [*busy("b"), *judged]})
    assert plan_replacement(judged_obs, kwok_catalogue(), "b", set(), 0.0).new_nodes == []


def tainted(name: str):  # noqa: ANN201
    n = node(name)
    return n.model_copy(update={"taints": [Taint(key=TAINT_TO_BE_DELETED, value="1", effect="NoSchedule")]})


def test_pods_still_on_a_node_being_drained_take_their_room_first() -> None:
    """d is tainted and drained by another removal; its pod is not yet evicted and will need e's room.
    b's replacement must not count e as room (Karpenter schedules the pods of deleting nodes with a
    command's own, pkg/controllers/disruption/helpers.go SimulateScheduling). Else both drained onto e
    and one pod went pending until a scale-up."""
    obs = ScaleDownObservation(
        nodes=[node("b"), tainted("d"), node("e")], pods=[*busy("b", 1200), *busy("d", 1200)], groups=[GROUP]
    )
    plan = plan_replacement(obs, kwok_catalogue(), "b", set(), 0.0)
    assert [n.pod_uids for n in plan.new_nodes] == [["b-web"]] and not plan.problems
    # No node is bought for d's pod alone: with no room anywhere it is left to its own removal.
    e = node("e").model_copy(update={"requested": Resources(cpu_m=1500)})
    crowded = ScaleDownObservation(
        nodes=[node("b"), tainted("d"), e], pods=[*busy("b", 1200), *busy("d", 1900), *busy("e", 1500)], groups=[GROUP]
    )
    plan = plan_replacement(crowded, kwok_catalogue(), "b", set(), 0.0)
    assert [n.pod_uids for n in plan.new_nodes] == [["b-web"]]
    # With its successor there (the room left out for it), d's pod goes there: e is b's room again.
    served = obs.model_copy(update={"nodes": [*obs.nodes, successor_of("sd", "d")]})
    assert plan_replacement(served, kwok_catalogue(), "b", {"d"}, 0.0).new_nodes == []
    # Evicted (terminating), d's pod is not counted: its replacement, once created, waits as a pending pod.
    evicted = [p.model_copy(update={"deletion_timestamp": datetime(2030, 1, 1, tzinfo=UTC)}) for p in busy("d", 1200)]
    gone = obs.model_copy(update={"pods": [*busy("b", 1200), *evicted]})
    assert plan_replacement(gone, kwok_catalogue(), "b", set(), 0.0).new_nodes == []


def test_pods_of_a_node_named_to_a_removal_take_their_room_before_it_is_tainted() -> None:
    """d was just named to a removal (``leaving``) and its NodeScaleDown has not tainted it yet. Its pod
    needs e's room as much as a tainted node's would: b's replacement buys for b's pod. The consolidation
    bench's seed 3 planned a command 0.1 s after an underused removal started, counted the room its pods
    then took, and the drain's re-check cancelled the command after it had bought a cx22."""
    obs = ScaleDownObservation(
        nodes=[node("b"), node("d"), node("e")], pods=[*busy("b", 1200), *busy("d", 1200)], groups=[GROUP]
    )
    plan = plan_replacement(obs, kwok_catalogue(), "b", {"d"}, 0.0)
    assert [n.pod_uids for n in plan.new_nodes] == [["b-web"]] and not plan.problems
    # Not leaving, d keeps its pod: e is b's room.
    assert plan_replacement(obs, kwok_catalogue(), "b", set(), 0.0).new_nodes == []


def test_the_pods_a_successor_does_not_hold_take_other_nodes_room() -> None:
    """d is being replaced: its successor sd holds one of its two pods, and its plan put the other in e's
    room. b's replacement, planned while d waits for sd, must not count that room: it buys for b's pod.
    The seed 7 bench run of 29 Nov drained such a second command first, and d's drain then found no node
    for a batch. With room in sd for both, e is b's room."""
    two = [
        p.model_copy(update={"name": f"d-{i}", "uid": f"d-{i}"})
        for i, p in enumerate([*busy("d", 900), *busy("d", 900)])
    ]
    sd = successor_of("sd", "d").model_copy(update={"requested": Resources(cpu_m=1000)})
    obs = ScaleDownObservation(
        nodes=[node("b"), node("d"), node("e"), sd], pods=[*busy("b", 1200), *two], groups=[GROUP]
    )
    plan = plan_replacement(obs, kwok_catalogue(), "b", {"d"}, 0.0)
    assert [n.pod_uids for n in plan.new_nodes] == [["b-web"]] and not plan.problems
    roomy = obs.model_copy(update={"nodes": [node("b"), node("d"), node("e"), successor_of("sd", "d")]})
    assert plan_replacement(roomy, kwok_catalogue(), "b", {"d"}, 0.0).new_nodes == []


def test_the_pods_of_a_drain_under_way_go_where_the_scheduler_scores_best() -> None:
    """d's pod (600m) fits e1's room (first by name) and e2's; the scheduler binds it to e2, the emptier.
    b's pod (1500m) then fits neither: its replacement buys. Counted first fit, d's pod took e1's room and
    b's plan counted e2 (the seed 3 run above: a drained web went to the emptier cx32, not the one first
    fit named, and took the room the plan had kept for an api)."""
    e1 = node("e1").model_copy(update={"requested": Resources(cpu_m=1000)})
    obs = ScaleDownObservation(
        nodes=[node("b"), tainted("d"), e1, node("e2")],
        pods=[*busy("b", 1500), *busy("d", 600), *busy("e1", 1000)],
        groups=[GROUP],
    )
    plan = plan_replacement(obs, kwok_catalogue(), "b", set(), 0.0)
    assert [n.pod_uids for n in plan.new_nodes] == [["b-web"]] and not plan.problems


def test_a_large_memory_pod_keeps_the_one_room_it_fits(monkeypatch) -> None:  # noqa: ANN001
    """The consolidation bench's seed 3 end: a cx32 [api, cache, web] beside a held node with 3.1 GiB
    free. Settled largest first, the api (1 CPU, 2 GiB) takes that room, the cache (3 GiB) then needs a
    cx32 (a cx22 holds 2.9 GiB): no saving. Settled memory first, the cache takes it, and a cx22 holds
    the api and the web for half the price; the drain's re-check tries memory first too."""
    from scaling.kube.models import PodInfo
    from scaling.nodes.models import LABEL_GROUP, LABEL_POOL, NodeGroup, PoolSpec

    types = {t.name: t for t in kwok_catalogue()}
    group = NodeGroup(name="g", pools=[PoolSpec(provider="kwok", serverType=["cx22", "cx32"], priority=10)])
    a = node("a").model_copy(
        update={"labels": {LABEL_GROUP: "g", LABEL_POOL: "kwok-cx32"}, "allocatable": types["cx32"].allocatable}
    )
    held = node("held", managed=False).model_copy(
        update={
            "allocatable": Resources(cpu_m=8000, memory=16 * GIB, pods=110),
            "requested": Resources(cpu_m=1000, memory=16 * GIB - 31 * GIB // 10, pods=1),
        }
    )

    def pod(name: str, cpu: int, mem: int) -> PodInfo:
        return busy("a")[0].model_copy(
            update={"name": name, "uid": name, "requests": Resources(cpu_m=cpu, memory=mem, pods=1)}
        )

    pods = [pod("api", 1000, 2 * GIB), pod("cache", 500, 3 * GIB), pod("web", 250, GIB // 2)]
    obs = ScaleDownObservation(nodes=[a, held], pods=pods, groups=[group])
    plan = plan_replacement(obs, kwok_catalogue(), "a", set(), 0.0)
    assert not plan.problems and len(plan.new_nodes) == 1
    assert plan.new_nodes[0].candidates[0].server_type == "cx22"
    assert sorted(plan.new_nodes[0].pod_uids) == ["api", "web"]
    assert plan.price_after == types["cx22"].price_hourly < 0.9 * plan.price_before
    # Where largest first is as cheap (the room holds the api and the cache), its plan stands.
    roomy = held.model_copy(update={"requested": Resources(cpu_m=1000, memory=16 * GIB - 6 * GIB, pods=1)})
    plan = plan_replacement(obs.model_copy(update={"nodes": [a, roomy]}), kwok_catalogue(), "a", set(), 0.0)
    assert plan.new_nodes == [] and not plan.problems
    # A memory-first plan the scheduler might not follow (no arrival order places every pod) is not
    # taken: the largest-first plan, a cx32 for the cache, stands.
    from scaling.nodes.disruption import replacement
    from scaling.nodes.disruption.arrival_orders import DrainOrder

    monkeypatch.setattr(
        replacement, "drain_order_of", lambda *a: DrainOrder("the scheduler may leave pod cache without a node")
    )
    plan = plan_replacement(obs, kwok_catalogue(), "a", set(), 0.0)
    assert [n.candidates[0].server_type for n in plan.new_nodes] == ["cx32"]


def test_a_successor_still_joining_holds_its_nodes_pods() -> None:
    """d is being replaced and its successor sd has just registered: NotReady, tainted not-ready by the
    node lifecycle controller as on every real cluster, its CNI's startup taint not lifted yet. Its room
    is still d's pods': b's replacement counts e as its own room and buys nothing. Read with the
    taints, d's pod took e's room and b's plan bought a node (Karpenter leaves the ephemeral and
    startup taints out of a node not initialized yet: its StateNode.Taints)."""
    joining = successor_of("sd", "d").model_copy(
        update={
            "ready": False,
            "taints": [
                Taint(key="node.kubernetes.io/not-ready", effect="NoSchedule"),
                Taint(key="startup-taint.cluster-autoscaler.kubernetes.io/cni", effect="NoSchedule"),
            ],
        }
    )
    obs = ScaleDownObservation(
        nodes=[node("b"), tainted("d"), node("e"), joining], pods=[*busy("b", 1200), *busy("d", 1200)], groups=[GROUP]
    )
    assert plan_replacement(obs, kwok_catalogue(), "b", {"d"}, 0.0).new_nodes == []
    # A taint of the user's stays: sd then holds nothing of d's, and b buys.
    kept = joining.model_copy(
        update={"taints": [*joining.taints, Taint(key="dedicated", value="x", effect="NoSchedule")]}
    )
    held = obs.model_copy(update={"nodes": [node("b"), tainted("d"), node("e"), kept]})
    assert [n.pod_uids for n in plan_replacement(held, kwok_catalogue(), "b", {"d"}, 0.0).new_nodes] == [["b-web"]]


def test_a_command_that_takes_the_only_room_of_a_drained_pod_waits_until_it_is_bound() -> None:
    """d is being drained and its pod (1200m) has room on b only (e is crowded). A consolidation of b
    would take that room: untainted, b took the pod while its successor was made and its re-check
    refused after the successor was bought (the consolidation bench's seed 3: a cx52's cache onto a
    cx32 being replaced by a cx22); tainted first, the pod would go pending. So the command waits:
    its plan names the pod, which consolidation reads as a refusal (saving_refused)."""
    e = node("e").model_copy(update={"requested": Resources(cpu_m=1500)})
    obs = ScaleDownObservation(
        nodes=[node("b"), tainted("d"), e], pods=[*busy("b", 600), *busy("d", 1200), *busy("e", 1500)], groups=[GROUP]
    )
    plan = with_stranding(
        obs, kwok_catalogue(), plan_replacement(obs, kwok_catalogue(), "b", set(), 0.0), "b", set(), 0.0
    )
    assert "pod default/d-web, about to land, has room on no node but b" in plan.stranding
    assert saving_refused(plan, MIN_SAVING) == plan.stranding
    # With room on e, d's pod goes there, and b's pod fits what is left of e: b goes, and buys nothing.
    roomy = obs.model_copy(
        update={"nodes": [node("b"), tainted("d"), node("e")], "pods": [*busy("b", 600), *busy("d", 1200)]}
    )
    plan = with_stranding(
        roomy, kwok_catalogue(), plan_replacement(roomy, kwok_catalogue(), "b", set(), 0.0), "b", set(), 0.0
    )
    assert plan.stranding == "" and plan.new_nodes == []
    # Once the pod is bound on b, it is one of b's own: the plan places it with b's other pods.
    bound = [p.model_copy(update={"node_name": "b", "name": "d-web-2", "uid": "d-web-2"}) for p in busy("d", 1200)]
    settled = obs.model_copy(update={"nodes": [node("b"), e], "pods": [*busy("b", 600), *bound, *busy("e", 1500)]})
    plan = with_stranding(
        settled, kwok_catalogue(), plan_replacement(settled, kwok_catalogue(), "b", set(), 0.0), "b", set(), 0.0
    )
    assert "about to land" not in plan.stranding and sorted(plan.new_nodes[0].pod_uids) == ["b-web", "d-web-2"]
