"""Scale-down candidates: empty and underused nodes, timers, blockers of one node on its own."""

from __future__ import annotations

from datetime import UTC, datetime

from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from scaling.kube.drain import (
    ANNOTATION_SAFE_TO_EVICT,
    ANNOTATION_SCALE_DOWN_AT,
    ANNOTATION_SCALE_DOWN_DISABLED,
    LOCAL_STORAGE,
    NO_PLACE_TO_MOVE,
    NOT_ENOUGH_PDB,
    NOT_REPLICATED,
    NOT_SAFE_TO_EVICT,
    PROTECTED,
    SCALE_DOWN_DISABLED,
    TAINT_DELETION_CANDIDATE,
    TAINT_TO_BE_DELETED,
    UNMOVABLE_KUBE_SYSTEM,
    LabelSelector,
    PdbInfo,
)
from scaling.kube.models import NodeInfo, PodInfo, Resources, Taint, Toleration
from scaling.nodes.models import LABEL_GROUP, LABEL_POOL, NodeGroup, PoolSpec, ScaleDownSettings
from scaling.nodes.scale_down.candidates import (
    DELAY_AFTER_ADD,
    UNNEEDED_TIME,
    UNREADY_TIME,
    plan_from_input,
    plan_scale_down,
)
from scaling.nodes.scale_down.checks import is_empty, pods_fit_elsewhere, utilization
from scaling.nodes.scale_down.models import (
    GROUP_SCALE_DOWN_DISABLED,
    NodeState,
    ScaleDownInput,
    ScaleDownLoopSettings,
    ScaleDownPlan,
)
from scaling.nodes.scale_down.storage import (
    LAST_HEALTHY_REPLICA,
    VOLUME_ATTACHED,
    LonghornReplica,
    LonghornState,
    LonghornVolume,
)

GI = 1024**3


def node(
    name: str, cpu: int = 4000, mem: int = 8 * GI, group: str | None = "g", pool: str = "kwok-small", **kw
) -> NodeInfo:
    labels = dict(kw.pop("labels", {}))
    if group is not None:
        labels[LABEL_GROUP] = group
        labels[LABEL_POOL] = pool
    kw.setdefault("ready", True)
    return NodeInfo(name=name, labels=labels, allocatable=Resources(cpu_m=cpu, memory=mem, pods=110), **kw)


def pod(name: str, on: str | None, cpu: int = 100, mem: int = 128 * 1024**2, ns: str = "default", **kw) -> PodInfo:
    kw.setdefault("controller_kind", "ReplicaSet")
    return PodInfo(
        namespace=ns,
        name=name,
        uid=f"{ns}/{name}",
        node_name=on,
        phase="Running",
        requests=Resources(cpu_m=cpu, memory=mem, pods=1),
        **kw,
    )


def ds(name: str, on: str, cpu: int = 100) -> PodInfo:
    return pod(name, on, cpu=cpu, ns="kube-system", controller_kind="DaemonSet", is_daemonset=True)


def group(name: str = "g", min_nodes: int = 0, **sd) -> NodeGroup:
    return NodeGroup(
        name=name,
        pools=[PoolSpec(provider="kwok", serverType=["small"], priority=10, minNodes=min_nodes)],
        scaleDown=ScaleDownSettings(**sd),
    )


def plan(
    nodes,
    pods,
    *,
    pdbs=(),
    groups=None,
    storage=None,
    now=10_000.0,
    since=None,
    last_up=None,
    protected=(),
    in_progress=(),
    refused=None,
    prices=None,
    replacing=(),
    **loop,
) -> ScaleDownPlan:
    return plan_scale_down(
        list(nodes),
        list(pods),
        list(pdbs),
        groups if groups is not None else [group()],
        storage,
        now,
        dict(since or {}),
        last_up,
        set(protected),
        set(in_progress),
        ScaleDownLoopSettings(**loop),
        refused,
        prices,
        replacing,
    )


def removed(p: ScaleDownPlan) -> list[str]:
    return [r.name for r in p.to_remove]


def state(p: ScaleDownPlan, name: str) -> tuple[NodeState, str | None]:
    d = p.decisions[name]
    return d.state, d.reason


BUSY = [pod(f"busy-{i}", "big", cpu=3000) for i in range(1)]  # keeps "big" utilized


# --- empty nodes (seed 004: a growth node with only DaemonSet, mirror or finished pods) ----


def test_is_empty_ignores_daemonset_mirror_and_finished_pods() -> None:
    n = node("n1")
    finished = pod("job-1", "n1", controller_kind="Job").model_copy(update={"phase": "Succeeded"})
    mirror = pod("etcd", "n1", ns="kube-system", controller_kind="Node", is_mirror=True)
    assert is_empty(n, [ds("proxy", "n1"), finished, mirror, pod("web", "n2")])
    assert not is_empty(n, [pod("web", "n1")])
    assert not is_empty(node("n1", group=None), [])  # not growth's


def test_empty_node_is_selected_at_once_with_scale_down_at_in_the_future() -> None:
    p = plan(
        [node("n1"), node("big", group=None)],
        [ds("proxy", "n1"), *BUSY],
        groups=[group(unneeded_time_s=300)],
        now=1000.0,
    )
    assert state(p, "n1") == (NodeState.EMPTY, None)
    [r] = p.to_remove
    assert (r.name, r.kind, r.scale_down_at, r.pods_to_evict) == ("n1", NodeState.EMPTY, 1300.0, [])
    assert p.unneeded_since == {"n1": 1000.0}


def test_unmanaged_and_in_progress_nodes_are_left_alone() -> None:
    p = plan([node("mine", group=None), node("going")], [], in_progress={"going"})
    assert state(p, "mine") == (NodeState.NOT_MANAGED, None)
    assert state(p, "going") == (NodeState.REMOVING, None)
    assert p.to_remove == [] and p.unneeded_since == {}


# --- underused nodes and timers -------------------------------------------------------------


def test_utilization_is_the_larger_of_cpu_and_memory() -> None:
    n = node("n1", cpu=1000, mem=1000)
    assert utilization(n, [pod("a", "n1", cpu=100, mem=700)]) == 0.7
    assert (
        utilization(
            n,
            [
                pod("a", "n1", cpu=600, mem=100),
                ds("d", "n1", cpu=100).model_copy(update={"requests": Resources(cpu_m=100, memory=0, pods=1)}),
            ],
        )
        == 0.7
    )


def test_underused_node_waits_for_unneeded_time_then_goes() -> None:
    nodes = [node("n1"), node("n2")]
    pods = [pod("web", "n1", cpu=500), pod("api", "n2", cpu=2500)]
    g = [group(unneeded_time_s=600)]
    p1 = plan(nodes, pods, groups=g, now=1000.0)
    assert state(p1, "n1") == (NodeState.UNNEEDED_WAITING, UNNEEDED_TIME)
    assert state(p1, "n2") == (NodeState.UTILIZED, None)
    assert p1.to_remove == [] and p1.unneeded_since == {"n1": 1000.0}
    assert p1.decisions["n1"].removable_at == 1600.0  # since + the group's unneeded time (for `explain node`)
    p2 = plan(nodes, pods, groups=g, now=1599.0, since=p1.unneeded_since)
    assert state(p2, "n1")[0] == NodeState.UNNEEDED_WAITING and p2.unneeded_since == {"n1": 1000.0}
    p3 = plan(nodes, pods, groups=g, now=1600.0, since=p2.unneeded_since)
    assert state(p3, "n1") == (NodeState.UNDERUSED, None)
    [r] = p3.to_remove
    assert r.scale_down_at == 1600.0 and r.pods_to_evict == ["default/web"] and r.destinations == {"default/web": "n2"}


def test_unneeded_timer_resets_when_node_becomes_utilized_or_blocked() -> None:
    nodes = [node("n1"), node("n2")]
    since = {"n1": 0.0}
    busy = plan(nodes, [pod("web", "n1", cpu=2500), pod("api", "n2", cpu=100)], since=since)
    assert state(busy, "n1") == (NodeState.UTILIZED, None) and "n1" not in busy.unneeded_since
    blocked = plan(nodes, [pod("web", "n1", annotations={ANNOTATION_SAFE_TO_EVICT: "false"})], since=since)
    assert state(blocked, "n1") == (NodeState.BLOCKED, NOT_SAFE_TO_EVICT) and "n1" not in blocked.unneeded_since


def test_threshold_is_strict() -> None:
    nodes = [node("n1"), node("n2", group=None)]
    at = plan(nodes, [pod("web", "n1", cpu=2000), pod("x", "n2", cpu=3000)], since={"n1": 0.0})
    assert state(at, "n1")[0] == NodeState.UTILIZED
    below = plan(nodes, [pod("web", "n1", cpu=1999)], since={"n1": 0.0}, groups=[group(utilization_threshold=0.5)])
    assert "n1" in removed(below)


def test_delay_after_scale_up_holds_every_removal() -> None:
    nodes = [node("n1"), node("big", group=None)]
    g = [group(delay_after_add_s=600)]
    p = plan(nodes, [*BUSY], groups=g, now=1000.0, last_up=500.0)
    assert state(p, "n1") == (NodeState.UNNEEDED_WAITING, DELAY_AFTER_ADD) and p.to_remove == []
    assert "n1" in p.unneeded_since  # the unneeded timer runs meanwhile
    assert p.decisions["n1"].removable_at == 1100.0  # the last scale-up + the delay after it
    assert removed(plan(nodes, [*BUSY], groups=g, now=1100.0, last_up=500.0)) == ["n1"]


def test_group_with_scale_down_disabled() -> None:
    p = plan([node("n1")], [], groups=[group(enabled=False)])
    assert state(p, "n1") == (NodeState.BLOCKED, GROUP_SCALE_DOWN_DISABLED)


# --- limits -------------------------------------------------------------------------------


# --- blockers -----------------------------------------------------------------------------


def _one_pod_plan(p: PodInfo, **kw) -> ScaleDownPlan:
    return plan([node("n1"), node("n2", group=None)], [p], since={"n1": 0.0}, **kw)


def test_each_pod_blocker_names_the_pod() -> None:
    cases = [
        (pod("x", "n1", annotations={ANNOTATION_SAFE_TO_EVICT: "false"}), NOT_SAFE_TO_EVICT),
        (pod("x", "n1", controller_kind=None), NOT_REPLICATED),
        (pod("x", "n1", controller_kind="InstanceManager"), NOT_REPLICATED),
        (pod("x", "n1", has_local_storage=True), LOCAL_STORAGE),
        (pod("x", "n1", ns="kube-system"), UNMOVABLE_KUBE_SYSTEM),
    ]
    for p, code in cases:
        out = _one_pod_plan(p)
        assert state(out, "n1") == (NodeState.BLOCKED, code), code
        assert out.decisions["n1"].reasons[0].pod == f"{p.namespace}/x"
        assert out.to_remove == []


def test_safe_to_evict_true_lifts_those_blockers() -> None:
    ann = {ANNOTATION_SAFE_TO_EVICT: "true"}
    for p in (
        pod("x", "n1", controller_kind=None, annotations=ann),
        pod("x", "n1", has_local_storage=True, annotations=ann),
        pod("x", "n1", ns="kube-system", controller_kind="InstanceManager", annotations=ann),
    ):
        assert removed(_one_pod_plan(p)) == ["n1"]


def test_scale_down_disabled_annotation_and_operator_protection() -> None:
    n1 = node("n1", annotations={ANNOTATION_SCALE_DOWN_DISABLED: "true"})
    p = plan([n1, node("n2"), node("n3")], [*BUSY], protected={"n2"})
    assert state(p, "n1") == (NodeState.BLOCKED, SCALE_DOWN_DISABLED)
    assert state(p, "n2") == (NodeState.BLOCKED, PROTECTED)
    assert removed(p) == ["n3"]


def test_pdb_that_would_be_violated_blocks() -> None:
    pdb = PdbInfo(
        namespace="default", name="web", selector=LabelSelector(match_labels={"app": "web"}), disruptions_allowed=0
    )
    p = _one_pod_plan(pod("web-1", "n1", labels={"app": "web"}), pdbs=[pdb])
    assert state(p, "n1") == (NodeState.BLOCKED, NOT_ENOUGH_PDB)
    assert "default/web-1" in p.decisions["n1"].reasons[0].message
    ok = pdb.model_copy(update={"disruptions_allowed": 1})
    assert removed(_one_pod_plan(pod("web-1", "n1", labels={"app": "web"}), pdbs=[ok])) == ["n1"]


def test_pods_must_fit_elsewhere() -> None:
    p = plan(
        [node("n1", cpu=4000), node("n2", cpu=4000)],
        [pod("a", "n1", cpu=1500), pod("b", "n2", cpu=3000)],
        since={"n1": 0.0},
    )
    assert state(p, "n1") == (NodeState.BLOCKED, NO_PLACE_TO_MOVE)
    assert "default/a" in p.decisions["n1"].reasons[0].message


def test_never_move_pods_onto_cordoned_tainted_or_leaving_nodes() -> None:
    # "waiting": an empty node soft-tainted for its wait, its ScaleDownAt beside the taint. The
    # scheduler may still bind there (a PreferNoSchedule taint never filters), but it is on its way
    # out: no room to plan on.
    soft = Taint(key=TAINT_DELETION_CANDIDATE, value="1", effect="PreferNoSchedule")
    waiting = node("waiting", taints=[soft]).model_copy(
        update={"annotations": {ANNOTATION_SCALE_DOWN_AT: "2030-01-01T00:00:00Z"}}
    )
    targets = [
        node("cordoned", unschedulable=True),
        node("tainted", taints=[Taint(key=TAINT_TO_BE_DELETED, value="1")]),
        waiting,
        node("leaving"),
        node("notready", ready=False),
    ]
    p = plan(
        [node("n1"), *targets],
        [pod("a", "n1")],
        since={"n1": 0.0},
        in_progress={"leaving"},
        protected={"cordoned", "tainted", "waiting", "notready"},
    )
    assert state(p, "n1") == (NodeState.BLOCKED, NO_PLACE_TO_MOVE)
    # The soft taint alone is the loop's hint on an unneeded node (Cluster Autoscaler's): it serves,
    # its room counts, and it is a candidate itself.
    unneeded = node("unneeded", taints=[soft])
    p = plan([node("n1"), unneeded], [pod("a", "n1")], since={"n1": 0.0, "unneeded": 0.0}, protected={"n1"})
    assert state(p, "unneeded")[0] == NodeState.EMPTY
    p = plan([node("n1"), unneeded], [pod("a", "n1")], since={"n1": 0.0}, protected={"unneeded"})
    assert state(p, "n1")[0] == NodeState.UNDERUSED


def test_fit_honours_node_selector_and_taints() -> None:
    gpu = node("gpu", group=None, labels={"gpu": "yes"}, taints=[Taint(key="gpu", value="yes")])
    plain = node("plain", group=None)
    sel = pod("s", None, node_selector={"gpu": "yes"})
    assert not pods_fit_elsewhere([sel], [gpu, plain], {}).ok
    tol = sel.model_copy(update={"tolerations": [Toleration(key="gpu", operator="Exists")]})
    assert pods_fit_elsewhere([tol], [plain, gpu], {}).placements == {"default/s": "gpu"}
    # First-fit-decreasing packs the big pod first.
    a, b = node("a", group=None, cpu=1000), node("b", group=None, cpu=2000)
    fit = pods_fit_elsewhere([pod("small", None, cpu=1000), pod("large", None, cpu=2000)], [a, b], {})
    assert fit.placements == {"default/large": "b", "default/small": "a"}
    # By cpu first, then by memory: the consolidation bench's seed 3 had an api (1 CPU, 2 GiB) take the
    # only node a cache (500m, 3 GiB) fits, and its re-check cancel what the scale-up planner had placed.
    roomy, small = node("roomy", group=None, cpu=3420, mem=3 * GI), node("small", group=None, cpu=1920, mem=2 * GI)
    api, cache = pod("api", None, cpu=1000, mem=2 * GI), pod("cache", None, cpu=500, mem=3 * GI)
    fit = pods_fit_elsewhere([api, cache], [roomy, small], {})
    assert fit.ok and fit.placements == {"default/cache": "roomy", "default/api": "small"}
    # Pod slots count too.
    full = node("full", group=None).model_copy(update={"allocatable": Resources(cpu_m=4000, memory=8 * GI, pods=1)})
    assert not pods_fit_elsewhere([pod("p", None)], [full], {"full": Resources(pods=1)}).ok


def test_plan_from_input_round_trips_through_json() -> None:
    inp = ScaleDownInput(
        nodes=[node("n1"), node("big", group=None)], pods=[*BUSY], groups=[group()], now=5.0, protected=["big"]
    )
    again = ScaleDownInput.model_validate_json(inp.model_dump_json())
    p = plan_from_input(again)
    assert removed(p) == ["n1"]
    assert ScaleDownPlan.model_validate_json(p.model_dump_json()) == p


# --- Longhorn through the plan ------------------------------------------------------------


def test_longhorn_attached_volume_and_last_replica_block_in_the_plan() -> None:
    storage = LonghornState(
        volumes=[LonghornVolume(name="vol-1", state="attached", node="n1"), LonghornVolume(name="vol-2")],
        replicas=[
            LonghornReplica(name="r1", volume="vol-1", node="n2", healthy=True),
            LonghornReplica(name="r2", volume="vol-2", node="n3", healthy=True),
        ],
    )
    p = plan([node("n1"), node("n2"), node("n3"), node("big", group=None)], [*BUSY], storage=storage)
    assert state(p, "n1") == (NodeState.BLOCKED, VOLUME_ATTACHED)
    assert state(p, "n2") == (NodeState.BLOCKED, LAST_HEALTHY_REPLICA)
    assert state(p, "n3") == (NodeState.BLOCKED, LAST_HEALTHY_REPLICA)


# --- re-check when the timer fires ----------------------------------------------------------


# --- Cluster Autoscaler parity: long-terminating pods, NotReady nodes ------------------------

DELETED_AT = 1_000_000.0


def terminating(name: str, on: str, grace: int | None = None, **kw) -> PodInfo:
    """A pod deleted at DELETED_AT (default grace: 30 s, so long-terminating from +60 s)."""
    stamp = datetime.fromtimestamp(DELETED_AT, UTC)
    return pod(name, on, deletion_timestamp=stamp, termination_grace_period_s=grace, **kw)


def test_long_terminating_pods_do_not_pin_a_node_and_are_not_moved() -> None:
    nodes = [node("n1"), node("n2")]
    # A bare pod would block (NotReplicated); a huge one would not fit on n2 and hold n1 utilized.
    stuck = [terminating("orphan", "n1", controller_kind=None), terminating("big", "n1", cpu=3900)]
    p = plan(nodes, [*stuck, pod("api", "n2", cpu=2500)], groups=[group(unneeded_time_s=300)], now=DELETED_AT + 61)
    assert state(p, "n1") == (NodeState.EMPTY, None) and p.decisions["n1"].utilization == 0.0
    [r] = p.to_remove
    assert (r.name, r.pods_to_evict, r.destinations) == ("n1", [], {})
    # Within grace plus the 30 s margin the same pods still count.
    early = plan(nodes, [*stuck, pod("api", "n2", cpu=2500)], groups=[group(unneeded_time_s=300)], now=DELETED_AT + 60)
    assert state(early, "n1") == (NodeState.UTILIZED, None) and early.to_remove == []


def test_grace_period_sets_when_a_pod_is_long_terminating() -> None:
    nodes = [node("n1"), node("n2")]
    pods = [terminating("db", "n1", grace=600, controller_kind=None)]
    assert state(plan(nodes, pods, now=DELETED_AT + 630), "n1") == (NodeState.BLOCKED, NOT_REPLICATED)
    assert state(plan(nodes, pods, now=DELETED_AT + 631), "n1") == (NodeState.EMPTY, None)


def test_long_terminating_pods_on_a_target_still_take_its_room() -> None:
    """The scheduler counts a terminating pod's requests until it is gone: so does the fit."""
    nodes = [node("n1"), node("n2")]
    pods = [pod("web", "n1", cpu=1000), terminating("stuck", "n2", cpu=3500)]
    p = plan(nodes, pods, now=DELETED_AT + 61, since={"n1": 0.0})
    assert state(p, "n1") == (NodeState.BLOCKED, NO_PLACE_TO_MOVE)


def test_not_ready_node_waits_the_unready_time_not_the_unneeded_time() -> None:
    nodes = [node("n1", ready=False), node("n2")]
    pods = [pod("web", "n1", cpu=500), pod("api", "n2", cpu=2500)]
    g = [group(unneeded_time_s=600)]
    at_600 = plan(nodes, pods, groups=g, now=1600.0, since={"n1": 1000.0})
    assert state(at_600, "n1") == (NodeState.UNNEEDED_WAITING, UNREADY_TIME)
    assert "NotReady" in at_600.decisions["n1"].reasons[0].message
    at_1200 = plan(nodes, pods, groups=g, now=2200.0, since={"n1": 1000.0})
    assert state(at_1200, "n1") == (NodeState.UNDERUSED, None) and removed(at_1200) == ["n1"]
    # The same node Ready goes after its group's 600 s.
    ready = plan([node("n1"), node("n2")], pods, groups=g, now=1600.0, since={"n1": 1000.0})
    assert removed(ready) == ["n1"]
    # The unready time is a loop setting.
    short = plan(nodes, pods, groups=g, now=1100.0, since={"n1": 1000.0}, unready_time_s=100)
    assert removed(short) == ["n1"]


def test_empty_not_ready_node_is_marked_with_the_unready_time() -> None:
    nodes = [node("n1", ready=False), node("big", group=None)]
    p = plan(nodes, BUSY, groups=[group(unneeded_time_s=300)], now=1000.0)
    [r] = p.to_remove
    assert (r.name, r.kind, r.scale_down_at) == ("n1", NodeState.EMPTY, 2200.0)
    p2 = plan(nodes, BUSY, groups=[group(unneeded_time_s=300)], now=1000.0, unready_time_s=60)
    assert [(r.name, r.scale_down_at) for r in p2.to_remove] == [("n1", 1060.0)]


# --- properties ---------------------------------------------------------------------------


@hsettings(max_examples=60, deadline=None)
@given(
    loads=st.lists(st.integers(min_value=0, max_value=4000), min_size=1, max_size=12),
    min_nodes=st.integers(min_value=0, max_value=4),
    limit=st.integers(min_value=1, max_value=5),
)
def test_plan_invariants(loads: list[int], min_nodes: int, limit: int) -> None:
    nodes = [node(f"n{i:02}") for i in range(len(loads))]
    pods = [pod(f"p{i}", f"n{i:02}", cpu=c) for i, c in enumerate(loads) if c]
    since = {n.name: 0.0 for n in nodes}
    p = plan(nodes, pods, groups=[group(min_nodes=min_nodes)], since=since, max_removals_per_loop=limit)
    gone = set(removed(p))
    assert len(gone) <= limit
    assert len(nodes) - len(gone) >= min(min_nodes, len(nodes))
    # Every evicted pod has a destination that stays and has room for everything sent there.
    load = {n.name: 0 for n in nodes}
    for q in pods:
        load[q.node_name] += q.requests.cpu_m
    for r in p.to_remove:
        for pk, dest in r.destinations.items():
            assert dest not in gone
            load[dest] += next(q for q in pods if f"{q.namespace}/{q.name}" == pk).requests.cpu_m
    assert all(load[n] <= 4000 for n in load if n not in gone)


@hsettings(max_examples=80, deadline=None)
@given(
    placement=st.lists(
        st.lists(st.tuples(st.integers(min_value=0, max_value=5), st.booleans()), min_size=1, max_size=3),
        min_size=1,
        max_size=4,
    ),
    attached=st.lists(st.one_of(st.none(), st.integers(min_value=0, max_value=5)), min_size=4, max_size=4),
)
def test_plan_never_removes_every_healthy_copy_of_a_volume(placement, attached) -> None:
    nodes = [node(f"n{i}") for i in range(6)]
    volumes, replicas = [], []
    for v, reps in enumerate(placement):
        at = attached[v]
        volumes.append(
            LonghornVolume(
                name=f"vol-{v}",
                state="attached" if at is not None else "detached",
                node=f"n{at}" if at is not None else None,
            )
        )
        replicas += [
            LonghornReplica(name=f"vol-{v}-r{j}", volume=f"vol-{v}", node=f"n{i}", healthy=h)
            for j, (i, h) in enumerate(reps)
        ]
    p = plan(nodes, [], storage=LonghornState(volumes=volumes, replicas=replicas))
    gone = set(removed(p))
    for vol in volumes:
        homes = {r.node for r in replicas if r.volume == vol.name and r.healthy}
        if homes:
            assert homes - gone, f"{vol.name}: every healthy replica removed"
        if vol.node is not None:
            assert vol.node not in gone
