"""Cluster Autoscaler's soft taint on unneeded nodes, as the loop decides it (scale_down.soft_taints).
Cases from cluster-autoscaler/core/scaledown/actuation/softtaint_test.go (TestSoftTaintUpdate), the
API calls it counts being the names returned here."""

from __future__ import annotations

from scaling.kube.drain import (
    ANNOTATION_SCALE_DOWN_AT,
    TAINT_DELETION_CANDIDATE,
    TAINT_DISRUPTED,
    TAINT_TO_BE_DELETED,
    Blocker,
)
from scaling.kube.models import NodeInfo, Resources, Taint
from scaling.nodes.billing import BILLING_PERIOD
from scaling.nodes.headroom import HEADROOM
from scaling.nodes.models import LABEL_GROUP, LABEL_POOL
from scaling.nodes.scale_down.models import NodeDecision, NodeState
from scaling.nodes.scale_down.soft_taints import (
    OFF_LIFTS_MAX,
    soft_deletion_taints,
    timers_from_soft_taints,
    unneeded_nodes,
    young_soft_taints,
)

SOFT = Taint(key=TAINT_DELETION_CANDIDATE, value="1", effect="PreferNoSchedule")


def node(name: str, *taints: Taint, managed: bool = True, **kw) -> NodeInfo:
    labels = {LABEL_GROUP: "g", LABEL_POOL: "kwok-small"} if managed else {}
    return NodeInfo(name=name, labels=labels, taints=list(taints), allocatable=Resources(cpu_m=1000, pods=110), **kw)


def apply(nodes: list[NodeInfo], taint: list[str], untaint: list[str]) -> list[NodeInfo]:
    """The nodes as the API server has them once the calls are made."""
    out = []
    for n in nodes:
        ts = [t for t in n.taints if not (n.name in untaint and t.key == TAINT_DELETION_CANDIDATE)]
        out.append(n.model_copy(update={"taints": [*ts, SOFT] if n.name in taint else ts}))
    return out


def soft(nodes: list[NodeInfo]) -> list[str]:
    return [n.name for n in nodes if any(t.key == TAINT_DELETION_CANDIDATE for t in n.taints)]


def test_cluster_autoscalers_soft_taint_update() -> None:
    nodes = [node("n1000"), node("n2000")]
    # No superfluous nodes: nothing to do.
    assert soft_deletion_taints(nodes, [], [], 1) == ([], [])
    # One unneeded node: tainted, the other not.
    taint, untaint = soft_deletion_taints(nodes, ["n1000"], [], 1)
    assert (taint, untaint) == (["n1000"], [])
    nodes = apply(nodes, taint, untaint)
    assert soft(nodes) == ["n1000"]
    assert soft_deletion_taints(nodes, ["n1000"], [], 1) == ([], [])  # tainted already: no call
    # Needed again: lifted.
    nodes = apply(nodes, *soft_deletion_taints(nodes, [], [], 1))
    assert soft(nodes) == []
    # The bulk limit: one call a loop, both in two.
    nodes = apply(nodes, *soft_deletion_taints(nodes, ["n1000", "n2000"], [], 1))
    assert len(soft(nodes)) == 1
    nodes = apply(nodes, *soft_deletion_taints(nodes, ["n1000", "n2000"], [], 1))
    assert len(soft(nodes)) == 2
    # And untainting so too.
    nodes = apply(nodes, *soft_deletion_taints(nodes, [], [], 1))
    assert len(soft(nodes)) == 1
    nodes = apply(nodes, *soft_deletion_taints(nodes, [], [], 1))
    assert soft(nodes) == []


def test_lifts_come_first_and_share_the_budget() -> None:
    """CA spends its API calls on the needed nodes first, then on the unneeded ones."""
    nodes = [node("a", SOFT), node("b", SOFT), node("c"), node("d")]
    assert soft_deletion_taints(nodes, ["c", "d"], [], 3) == (["c"], ["a", "b"])
    assert soft_deletion_taints(nodes, ["c", "d"], [], 2) == ([], ["a", "b"])
    assert soft_deletion_taints(nodes, ["c", "d"], [], 10) == (["c", "d"], ["a", "b"])


def test_with_the_taints_off_every_one_left_is_lifted() -> None:
    """0 or less turns them off: CA calls UpdateSoftDeletionTaints only when MaxBulkSoftTaintCount != 0,
    and then lifts every soft taint when it starts (static_autoscaler.go cleanUpIfRequired,
    CleanAllDeletionCandidates); the loop lifts them from unneeded nodes too, OFF_LIFTS_MAX at a time."""
    nodes = [node("a", SOFT), node("b", SOFT), node("c"), node("d")]
    assert soft_deletion_taints(nodes, ["a", "c", "d"], [], 0) == ([], ["a", "b"])
    assert soft_deletion_taints(nodes, ["a", "c", "d"], [], -1) == ([], ["a", "b"])
    many = [node(f"n{i:03d}", SOFT) for i in range(OFF_LIFTS_MAX + 5)]
    assert soft_deletion_taints(many, [], [], 0) == ([], [n.name for n in many[:OFF_LIFTS_MAX]])


def test_with_the_taints_off_the_ones_younger_than_the_ttl_stay() -> None:
    """cluster-autoscaler/utils/taints/taints_test.go TestCleanStaleDeletionCandidates: with a
    5-minute TTL, taints put on 2 minutes ago stay, one 10 minutes old and one whose value is no
    time go, a node without one is not touched. Each stays until its TTL has passed."""
    now = 1_800_000_000.0

    def at(age_s: float) -> Taint:
        return SOFT.model_copy(update={"value": str(int(now - age_s))})

    nodes = [
        node("n1", at(120)),
        node("n2", at(600)),
        node("n3", at(120)),
        node("n4", SOFT.model_copy(update={"value": "INVALID_VALUE"})),
        node("n5"),
    ]
    young = young_soft_taints(nodes, 300, now)
    assert young == {"n1": now + 180, "n3": now + 180}
    assert soft_deletion_taints(nodes, ["n1"], [], 0, young) == ([], ["n2", "n4"])
    assert soft_deletion_taints(nodes, [], [], 0, young_soft_taints(nodes, 300, now + 181)) == (
        [],
        ["n1", "n2", "n3", "n4"],
    )
    assert young_soft_taints(nodes, 0, now) == {}  # CA's default TTL: every one goes
    # With the taints on, a young taint on a node needed again is lifted as any other.
    assert soft_deletion_taints(nodes, [], [], 10, young) == ([], ["n1", "n2", "n3", "n4"])


def test_nodes_being_removed_or_not_growths_are_left_alone() -> None:
    """A node tainted ToBeDeleted (CA skips those), a node a removal holds or soft-marked for its wait
    (its ScaleDownAt beside the taint: the removal's to lift), a command's disrupted node, and a node
    of no growth group (CA: of no node group it manages) are neither tainted nor untainted."""
    hard = Taint(key=TAINT_TO_BE_DELETED, value="1", effect="NoSchedule")
    disrupted = Taint(key=TAINT_DISRUPTED, effect="NoSchedule")
    waiting = node("waiting", SOFT, annotations={ANNOTATION_SCALE_DOWN_AT: "2030-01-01T00:00:00Z"})
    nodes = [
        node("hard", hard),
        node("hard-soft", hard, SOFT),
        node("held"),
        node("held-soft", SOFT),
        waiting,
        node("disrupted", disrupted),
        node("static", managed=False),
        node("static-soft", SOFT, managed=False),
    ]
    held = ["held", "held-soft"]
    names = [n.name for n in nodes]
    assert soft_deletion_taints(nodes, names, held, 100) == ([], [])
    assert soft_deletion_taints(nodes, [], held, 100) == ([], [])


def decision(name: str, state: NodeState, reason: str | None = None) -> NodeDecision:
    reasons = [Blocker(code=reason, message=reason)] if reason else []
    return NodeDecision(name=name, state=state, reasons=reasons)


def test_unneeded_are_the_nodes_whose_pods_fit_elsewhere_and_whose_timer_runs() -> None:
    """CA's unneeded list keeps a node whose removal something holds once its time is up (min size,
    here a budget too); not a node whose timer is multi-node consolidation's (Utilized), nor a
    replacement (its pods need a successor), nor one a paid billing period holds (kept untainted so
    that arriving pods use what is paid for), nor the last one holding its group's headroom."""
    decisions = {
        d.name: d
        for d in [
            decision("waiting", NodeState.UNNEEDED_WAITING),
            decision("empty", NodeState.EMPTY),
            decision("underused", NodeState.UNDERUSED),
            decision("budget", NodeState.BLOCKED, "DisruptionBudget"),
            decision("utilized", NodeState.UTILIZED),
            decision("drifted", NodeState.DRIFTED),
            decision("expired", NodeState.EXPIRED),
            decision("consolidated", NodeState.CONSOLIDATED),
            decision("paid", NodeState.UNNEEDED_WAITING, BILLING_PERIOD),
            decision("headroom", NodeState.BLOCKED, HEADROOM),
            decision("pdb", NodeState.BLOCKED, "NotEnoughPdb"),  # held before its timer: no timer
        ]
    }
    # Waiting out its timer while it alone holds the headroom (candidates: headroom_kept).
    holding = decision("holding", NodeState.UNNEEDED_WAITING, "UnneededTimeNotElapsed")
    holding.reasons.append(Blocker(code=HEADROOM, message=HEADROOM))
    decisions["holding"] = holding
    timers = [n for n in decisions if n != "pdb"] + ["gone"]
    assert unneeded_nodes(decisions, timers) == {"waiting", "empty", "underused", "budget"}


def test_timers_from_soft_taints_as_cluster_autoscaler_loads_them() -> None:
    """cluster-autoscaler/core/scaledown/unneeded/nodes_test.go TestNodeLoadFromExistingTaints: with a
    5-minute TTL, a taint put on 2 minutes ago says the node's timer, one 20 minutes old, no taint or
    a value that is no unix time do not; with the TTL at 0 (CA's default) nothing is loaded."""
    now = 1_800_000_000.0

    def at(age_s: float) -> Taint:
        return SOFT.model_copy(update={"value": str(int(now - age_s))})

    nodes = [
        node("n1", at(120)),
        node("n2"),
        node("n3", at(1200)),
        node("n4", SOFT.model_copy(update={"value": "INVALID_VALUE"})),
    ]
    assert timers_from_soft_taints(nodes[:2], 300, now) == {"n1": now - 120}
    assert timers_from_soft_taints(nodes[:3], 300, now) == {"n1": now - 120}
    assert timers_from_soft_taints(nodes, 300, now) == {"n1": now - 120}
    assert timers_from_soft_taints(nodes, 0, now) == {}
    # A time to come (another clock) starts now; Python's int() reading of "1_7" or " 17" is not Go's.
    ahead = node("n5", SOFT.model_copy(update={"value": str(int(now) + 60)}))
    recent = str(int(now) - 60)
    values = [f"{recent[:4]}_{recent[4:]}", f" {recent}", recent.translate(str.maketrans("0123456789", "٠١٢٣٤٥٦٧٨٩"))]
    odd = [node(f"o{i}", SOFT.model_copy(update={"value": v})) for i, v in enumerate(values)]
    assert timers_from_soft_taints([ahead, *odd], 300, now) == {"n5": now}
