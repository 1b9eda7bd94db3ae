"""Nodes pods are about to land on (scaling.nodes.scale_down.landing): the chaos run's
node-replacement/kill-worker-during-cordon found a replacement's successor tainted as an Empty
node between its predecessor's delete and the scheduler binding the evicted pods' replacements to
it; the successor then stood cordoned while the node it replaced was gone. And the room they are
about to take, which an underused node's pods cannot count on (Cluster Autoscaler's
filterOutSchedulable packs them into its snapshot before it simulates a scale-down)."""

from __future__ import annotations

from datetime import UTC, datetime

from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from scaling.kube.drain import NO_PLACE_TO_MOVE, TAINT_TO_BE_DELETED
from scaling.kube.models import Resources, Taint
from scaling.kube.pods import pod_info
from scaling.nodes.contracts import ScaleDownEvaluationInput, ScaleDownObservation
from scaling.nodes.disruption.drift import LABEL_REPLACES
from scaling.nodes.scale_down.checks import can_land, pods_fit_elsewhere
from scaling.nodes.scale_down.evaluation import evaluate_scale_down
from scaling.nodes.scale_down.landing import (
    LANDING_MAX,
    PODS_ABOUT_TO_LAND,
    FirstOfEachKey,
    about_to_land,
    awaiting_scheduler,
    land,
    landing_key,
)
from scaling.nodes.scale_down.models import ROOM_TAKEN, NodeState
from tests.scaling.nodes.scale_down.test_candidates import group, node, plan, pod, removed, state


def recreated(name: str, cpu: int = 500, **kw: object):  # noqa: ANN201
    """A ReplicaSet's new pod: pending, unbound, not yet judged by the scheduler."""
    return pod(name, None, cpu=cpu, **kw).model_copy(update={"phase": "Pending"})


SUCCESSOR = node("n1-successor", cpu=2000, labels={LABEL_REPLACES: "n1"})
STAYING = node("n2", cpu=2000)
ON_N2 = [pod(f"b{i}", "n2", cpu=500) for i in range(3)]


def test_the_successor_of_a_removed_node_is_not_emptied_while_its_pods_wait_for_the_scheduler() -> None:
    # n1 is gone and its removal reported; its three pods were recreated and are not bound yet.
    pods = [*ON_N2, *(recreated(f"a{i}") for i in range(3))]
    p = plan([SUCCESSOR, STAYING], pods, last_up=0.0)
    assert state(p, "n1-successor") == (NodeState.BLOCKED, PODS_ABOUT_TO_LAND) and removed(p) == []
    # Bound: it is no longer empty. Nothing waiting: a plain empty node again.
    bound = [*ON_N2, *(pod(f"a{i}", "n1-successor", cpu=500) for i in range(3))]
    assert state(plan([SUCCESSOR, STAYING], bound, last_up=0.0), "n1-successor")[0] == NodeState.UTILIZED
    assert removed(plan([SUCCESSOR, STAYING], ON_N2, last_up=0.0)) == ["n1-successor"]


def test_only_a_pod_the_node_would_take_holds_it() -> None:
    empty = node("e", cpu=2000)
    other = node("o", cpu=2000, labels={"zone": "b"})
    too_big = recreated("big", cpu=4000)
    elsewhere = recreated("sel", node_selector={"zone": "b"})
    deleted = recreated("gone").model_copy(update={"deletion_timestamp": datetime(2030, 1, 1, tzinfo=UTC)})
    judged = recreated("judged").model_copy(update={"unschedulable": True})  # the scale-up planner's
    daemon = recreated("ds", is_daemonset=True)
    waiting = awaiting_scheduler([too_big, elsewhere, deleted, judged, daemon, pod("bound", "o")])
    assert [p.name for p in waiting] == ["big", "sel"]
    assert about_to_land(empty, Resources(), waiting) is None
    assert about_to_land(other, Resources(), waiting) is not None  # selector matches, fits
    # Room already taken counts: 1600m used leaves no room for a 500m pod.
    assert about_to_land(empty, Resources(cpu_m=1600), [recreated("p")]) is None
    held = about_to_land(empty, Resources(cpu_m=1000), [recreated("p")])
    assert held is not None and held.pod == "default/p" and held.code == PODS_ABOUT_TO_LAND
    p = plan([empty, other], [too_big, elsewhere, deleted, judged], last_up=0.0)
    assert "e" in removed(p) and state(p, "o") == (NodeState.BLOCKED, PODS_ABOUT_TO_LAND)


def test_a_pod_for_another_scheduler_holds_no_node() -> None:
    """The kube-scheduler never judges a pod whose spec.schedulerName names another scheduler: one
    waiting for a scheduler that is not running held an empty node for good. Read from the pod as
    the API server stores it (the default name is the kube-scheduler's)."""
    empty = node("e", cpu=2000)
    ours, theirs = (
        pod_info({"metadata": {"name": n, "namespace": "default"}, "spec": {"schedulerName": s, "containers": []}})
        for n, s in (("ours", "default-scheduler"), ("theirs", "volcano"))
    )
    assert (ours.scheduler_name, theirs.scheduler_name) == (None, "volcano")
    assert [p.name for p in awaiting_scheduler([ours, theirs])] == ["ours"]
    assert removed(plan([empty], [theirs], last_up=0.0)) == ["e"]
    assert state(plan([empty], [ours, theirs], last_up=0.0), "e") == (NodeState.BLOCKED, PODS_ABOUT_TO_LAND)


# --- the room pods about to land take (scale_down.landing.land) ----------------------------
# t holds 2500m of 4000m (1500m free); u is underused (one 1000m pod) and its timer ran out; s,
# when present, comes first by name with 2000m free.

T = node("t", cpu=4000)
U = node("u", cpu=4000)
S = node("s", cpu=4000)
ON_T = [pod(f"busy-{i}", "t", cpu=500) for i in range(5)]
ON_U = [pod("web", "u", cpu=1000)]
ON_S = [pod("s-busy", "s", cpu=2000)]
TIMER_RAN_OUT = {"u": 0.0, "s": 0.0}


def room_plan(nodes, waiting):  # noqa: ANN001, ANN201
    return plan(nodes, [*ON_T, *ON_U, *ON_S, *waiting], since=TIMER_RAN_OUT)


def test_an_underused_nodes_pods_do_not_fit_into_room_a_waiting_pod_takes() -> None:
    assert removed(room_plan([T, U], [])) == ["u"]  # its pod fits t's 1500m
    # A 1000m pod not yet scheduled lands on t first (by name): u's pod would stay pending.
    p = room_plan([T, U], [recreated("new", cpu=1000)])
    assert removed(p) == [] and state(p, "u") == (NodeState.BLOCKED, ROOM_TAKEN)
    [why] = p.decisions["u"].reasons
    assert why.pod == "default/web" and "not yet scheduled" in why.message
    assert p.unneeded_since.get("u") is None  # needed again: its timer ends
    # Room for both (s takes the new pod first): removed as before.
    p = room_plan([S, T, U], [recreated("new", cpu=1000)])
    assert "u" in removed(p)


def test_the_evaluation_says_why_an_underused_node_stays() -> None:
    obs = ScaleDownObservation(nodes=[T, U], pods=[*ON_T, *ON_U, recreated("new", cpu=1000)], groups=[group()])
    ev = evaluate_scale_down(obs, ScaleDownEvaluationInput(cluster="c", now=10_000.0, unneeded_since={"u": 0.0}))
    [u] = [c for c in ev.candidates if c.node == "u"]
    assert ev.to_remove == [] and ev.unneeded_ended == ["u"]
    assert (u.state, u.reason) == (NodeState.BLOCKED.value, ROOM_TAKEN)
    assert (
        u.message == "pod default/web fits on no other node once the room of pods not yet scheduled is taken (1 placed)"
    )


def test_a_pod_for_another_scheduler_or_judged_unschedulable_takes_no_room() -> None:
    theirs = recreated("theirs", cpu=1000).model_copy(update={"scheduler_name": "volcano"})
    judged = recreated("judged", cpu=1000).model_copy(update={"unschedulable": True})
    deleted = recreated("gone", cpu=1000).model_copy(update={"deletion_timestamp": datetime(2030, 1, 1, tzinfo=UTC)})
    for waiting in ([theirs], [judged], [deleted], [theirs, judged, deleted]):
        assert removed(room_plan([T, U], waiting)) == ["u"], waiting
    # One that fits nowhere takes nothing either (the scale-up planner's once judged).
    assert removed(room_plan([T, U], [recreated("huge", cpu=9000)])) == ["u"]


def test_pods_about_to_land_on_an_underused_node_move_with_it() -> None:
    """As in Cluster Autoscaler's snapshot, a candidate may receive the waiting pods; then they must
    find room elsewhere too for it to go (they are not evicted: no destinations of its removal)."""
    a = node("a-underused", cpu=4000)
    mine = [pod("a-web", "a-underused", cpu=1000)]
    # The 1000m pod lands on a (first by name, 3000m free); both fit t's 1500m? No: 2000m needed.
    p = plan([a, T], [*ON_T, *mine, recreated("new", cpu=1000)], since={"a-underused": 0.0})
    assert state(p, "a-underused") == (NodeState.BLOCKED, ROOM_TAKEN) and removed(p) == []
    # A 400m one: it and a's pod fit t; a goes, evicting its own pod only.
    p = plan([a, T], [*ON_T, *mine, recreated("new", cpu=400)], since={"a-underused": 0.0})
    [r] = p.to_remove
    assert r.name == "a-underused" and r.pods_to_evict == ["default/a-web"]
    assert r.destinations == {"default/a-web": "t"}


def test_an_empty_node_a_waiting_pod_lands_on_is_held_once() -> None:
    """The placement takes the room of the pod on the empty node; about_to_land reads the room
    before it did, so that pod still holds the node (it is not counted against its own room)."""
    empty = node("e", cpu=4000)
    full = node("f", cpu=2000)
    p = plan([empty, full], [pod("f-busy", "f", cpu=2000), recreated("big", cpu=3000)])
    assert state(p, "e") == (NodeState.BLOCKED, PODS_ABOUT_TO_LAND) and removed(p) == []
    # And the room it takes there counts once: u's 1000m pod still fits the 1000m left on e.
    p = plan([empty, U], [*ON_U, recreated("big", cpu=3000)], since={"u": 0.0})
    assert state(p, "e")[1] == PODS_ABOUT_TO_LAND and removed(p) == ["u"]
    assert p.to_remove[0].destinations == {"default/web": "e"}


# --- removals in progress (scale_down.landing.land_removals_first) --------------------------
# d is tainted for deletion (another removal drains it) and still holds a 1000m pod that needs a
# place: Cluster Autoscaler injects such pods into its snapshot before it simulates a removal
# (core/scaledown/planner/planner.go injectOngoingActuation).

D = node("d", cpu=4000, taints=[Taint(key=TAINT_TO_BE_DELETED, value="1")])
ON_D = [pod("d-web", "d", cpu=1000)]


def test_an_underused_nodes_pods_do_not_fit_into_room_a_drained_pod_needs() -> None:
    # d's pod takes t's 1500m first: u's 1000m pod has none left, and would stay pending.
    p = room_plan([D, T, U], ON_D)
    assert removed(p) == [] and state(p, "u") == (NodeState.BLOCKED, ROOM_TAKEN)
    [why] = p.decisions["u"].reasons
    assert why.message == (
        "pod default/web fits on no other node once the room of pods not yet scheduled and of pods "
        "on nodes being removed is taken (1 placed)"
    )
    # Evicted already (terminating): its replacement waits for the scheduler and takes the room as such.
    gone = [pod("d-web", "d", cpu=1000, deletion_timestamp=datetime(2030, 1, 1, tzinfo=UTC))]
    assert removed(room_plan([D, T, U], gone)) == ["u"]
    # Not tainted (its removal is not draining yet, or it serves): nothing moves, u goes as before.
    assert removed(room_plan([node("d", cpu=4000), T, U], ON_D)) == ["u"]
    # Room for both (s takes d's pod first): u goes.
    assert "u" in removed(room_plan([D, S, T, U], ON_D))


def test_a_drained_pod_takes_the_room_of_its_nodes_successor_first() -> None:
    """d's successor was made for d's pods: they take its room, not t's, which u's pod may use."""
    successor = node("z-successor", cpu=2000, labels={LABEL_REPLACES: "d"})
    p = room_plan([D, T, U, successor], ON_D)
    assert "u" in removed(p)
    assert p.to_remove[0].destinations == {"default/web": "t"}


def test_an_empty_node_a_drained_pod_needs_is_held_until_it_fits_elsewhere() -> None:
    empty = node("e", cpu=4000)
    full = node("f", cpu=2000)
    p = plan([D, empty, full], [*ON_D, pod("f-busy", "f", cpu=2000)], last_up=0.0)
    assert removed(p) == [] and state(p, "e")[0] == NodeState.BLOCKED
    [why] = p.decisions["e"].reasons
    assert (why.code, why.pod) == (NO_PLACE_TO_MOVE, "default/d-web")
    assert why.message == "pod default/d-web of node d, being removed, has room on node e only"
    # With room on g (after e by name, so the pod landed on e): e goes, and the pod moves to g.
    p = plan([D, empty, full, node("g", cpu=2000)], [*ON_D, pod("f-busy", "f", cpu=2000)], last_up=0.0)
    assert removed(p) == ["e"]


def test_a_burst_larger_than_the_bound_is_placed_up_to_it() -> None:
    big = node("big", cpu=1_000_000)
    big = big.model_copy(update={"allocatable": Resources(cpu_m=1_000_000, memory=1 << 50, pods=100_000)})
    burst = [recreated(f"b{i:05d}", cpu=10) for i in range(LANDING_MAX + 500)]
    landing = land(burst, [big], {})
    assert landing.tried == LANDING_MAX and landing.placed == LANDING_MAX
    assert landing.arriving["big"][-1].name == f"b{LANDING_MAX - 1:05d}"  # in their order
    assert landing.used["big"].cpu_m == 10 * LANDING_MAX
    # Through the plan: t has 2500m free and room for any number of pods. The first LANDING_MAX
    # of 1m pods take 1000m of it, and u's 1000m pod fits the rest; the pods past the bound take
    # no room (had they, 2000m would be gone and u held).
    roomy = T.model_copy(update={"allocatable": Resources(cpu_m=4000, memory=T.allocatable.memory, pods=100_000)})
    lighter = ON_T[:3]  # 1500m
    tiny = [recreated(f"t{i:05d}", cpu=1, mem=0) for i in range(LANDING_MAX + 1000)]
    assert removed(plan([roomy, U], [*lighter, *ON_U, *tiny], since=TIMER_RAN_OUT)) == ["u"]
    # Within the bound, what they take counts: 999m and 600m leave 901m.
    within = [*tiny[: LANDING_MAX - 1], recreated("more", cpu=600)]
    p = plan([roomy, U], [*lighter, *ON_U, *within], since=TIMER_RAN_OUT)
    assert state(p, "u") == (NodeState.BLOCKED, ROOM_TAKEN)


def test_node_visits_are_bounded() -> None:
    """Pods pinned each to its own node scan the nodes before theirs: the visits stop at the bound
    and the pods not reached take no room."""
    nodes = [node(f"n{i:03d}", cpu=1000) for i in range(200)]
    pinned = [
        recreated(f"p{i:03d}", cpu=100, node_selector={"kubernetes.io/hostname": f"n{i:03d}"}) for i in range(200)
    ]
    nodes = [n.model_copy(update={"labels": {**n.labels, "kubernetes.io/hostname": n.name}}) for n in nodes]
    landing = land(pinned, nodes, {}, visits=1000)
    # p000 costs one visit, p001 two, ...: 44 pods cost 990 visits, the 45th is cut short.
    assert landing.placed == 44 and landing.tried == 45
    assert all(landing.arriving[f"n{i:03d}"][0].name == f"p{i:03d}" for i in range(44))
    assert land(pinned, nodes, {}).placed == 200  # 20,100 visits: within LANDING_VISITS_MAX


def first_fit(waiting, targets, used):  # noqa: ANN001, ANN201
    """The rule as written: each pod in order, from the first target, on the first with room."""
    room = {n.name: n.allocatable - used.get(n.name, Resources()) for n in targets}
    out: dict[str, list[str]] = {}
    for p in waiting[:LANDING_MAX]:
        need = Resources(cpu_m=p.requests.cpu_m, memory=p.requests.memory, pods=max(p.requests.pods, 1))
        for n in targets:
            if need.fits_in(room[n.name]) and can_land(p, n):
                room[n.name] = room[n.name] - need
                out.setdefault(n.name, []).append(p.name)
                break
    return out


@given(
    st.lists(st.tuples(st.sampled_from([100, 300, 700, 1500]), st.booleans()), max_size=40),
    st.lists(st.tuples(st.sampled_from([500, 1000, 2000]), st.integers(0, 1500), st.booleans()), max_size=8),
)
@hsettings(max_examples=200, deadline=None)
def test_resuming_where_a_key_last_landed_places_as_first_fit_does(pods, nodes) -> None:  # noqa: ANN001
    """Rooms only shrink, so a pod of a key never fits a node before the one the last of its key
    took: resuming there places every pod where first fit from the start would."""
    targets = [node(f"n{i}", cpu=cpu, labels={"zone": "b"} if zoned else {}) for i, (cpu, _, zoned) in enumerate(nodes)]
    used = {f"n{i}": Resources(cpu_m=taken, pods=1) for i, (_, taken, _) in enumerate(nodes)}
    waiting = [
        recreated(f"w{i:02d}", cpu=cpu, node_selector={"zone": "b"} if zoned else {})
        for i, (cpu, zoned) in enumerate(pods)
    ]
    landing = land(waiting, targets, used)
    assert {n: [p.name for p in ps] for n, ps in landing.arriving.items()} == first_fit(waiting, targets, used)
    # The ceiling only spares scans: a fit of the same pods answers the same with and without it.
    assert pods_fit_elsewhere(waiting, targets, landing.used, landing.ceiling) == pods_fit_elsewhere(
        waiting, targets, landing.used
    )


@given(
    st.lists(st.tuples(st.sampled_from([100, 700, 1500, 5000]), st.sampled_from(["", "a", "b"])), max_size=30),
    st.sampled_from(["", "a", "b"]),
    st.integers(0, 2000),
)
@hsettings(max_examples=200, deadline=None)
def test_about_to_land_answers_the_same_from_the_first_pod_of_each_key(pods, zone, taken) -> None:  # noqa: ANN001
    """Whether a node takes a pod depends only on its landing key: the first pod a node would take
    is the first of its key, so the plan reads one pod per key (each empty node walked them all)."""
    n = node("e", cpu=2000, labels={"zone": zone} if zone else {})
    waiting = [
        recreated(f"w{i:02d}", cpu=cpu, node_selector={"zone": z} if z else {}) for i, (cpu, z) in enumerate(pods)
    ]
    distinct = FirstOfEachKey(waiting)
    used = Resources(cpu_m=taken)
    assert about_to_land(n, used, distinct) == about_to_land(n, used, waiting)
    assert about_to_land(n, used, distinct) == about_to_land(n, used, waiting)  # read again: the same
    assert len(list(distinct)) == len({landing_key(p) for p in waiting})
