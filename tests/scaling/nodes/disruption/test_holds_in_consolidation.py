"""What holds a node out of consolidation, and out of a replacement, beyond do-not-disrupt and PDBs
(issue 32: consolidation honours Longhorn, budgets and Hetzner's billing-aware timing; drifted and
expired nodes are replaced within budgets). Longhorn and billing go through the evaluation
(scale_down.candidates.plan_scale_down, scale_down.consolidation.select_consolidation); expiry through
the same plan with test_drift's groups."""

from __future__ import annotations

from datetime import UTC, datetime

from scaling.kube.models import NodeInfo, PodInfo
from scaling.nodes.disruption.budgets import BUDGET_EXHAUSTED
from scaling.nodes.disruption.models import Budget, ConsolidationPolicy, DisruptionReason
from scaling.nodes.models import Billing, NodeGroup, PoolSpec, ScaleDownSettings
from scaling.nodes.scale_down.evaluation import stable_until
from scaling.nodes.scale_down.models import NodeState, ScaleDownPlan
from scaling.nodes.scale_down.storage import (
    LAST_HEALTHY_REPLICA,
    VOLUME_ATTACHED,
    LonghornReplica,
    LonghornState,
    LonghornVolume,
)
from tests.scaling.nodes.disruption import test_drift as drift
from tests.scaling.nodes.disruption.test_multi_node import NOW, cx, flexible, obs, utilized
from tests.scaling.nodes.scale_down.test_candidates import plan, pod, removed, state

HOUR = 3600.0


def timers_out(names: str, now: float = NOW) -> dict[str, float]:
    """Each node unneeded for flexible()'s 60 s already: free to join a command."""
    return {n: now - 60 for n in names}


def command(p: ScaleDownPlan) -> list[str]:
    return [r.name for r in p.consolidation]


def single(p: ScaleDownPlan) -> list[tuple[str, NodeState]]:
    return [(r.name, r.kind) for r in p.to_remove]


# --- Longhorn ------------------------------------------------------------------------------------


def attached(*on: str) -> LonghornState:
    return LonghornState(volumes=[LonghornVolume(name=f"vol-{n}", state="attached", node=n) for n in on])


def only_replica(on: str) -> LonghornState:
    return LonghornState(
        volumes=[LonghornVolume(name="vol")],
        replicas=[LonghornReplica(name="vol-r1", volume="vol", node=on, healthy=True)],
    )


def test_longhorn_holds_an_attached_or_last_replica_node_out_of_a_multi_node_command() -> None:
    """A command drains its nodes together: a node whose volume is attached, or which holds a volume's
    only healthy replica, would lose the data or the workload's disk."""
    nodes, pods = utilized(["a", "b", "c", "d"])
    storage = LonghornState(
        volumes=[LonghornVolume(name="vol-a", state="attached", node="a"), LonghornVolume(name="vol-b")],
        replicas=[LonghornReplica(name="vol-b-r1", volume="vol-b", node="b", healthy=True)],
    )
    p = plan(nodes, pods, groups=[flexible()], now=NOW, since=timers_out("abcd"), storage=storage)
    assert command(p) == ["c", "d"] and p.to_remove == []
    for held in ("a", "b"):
        assert p.decisions[held].state == NodeState.UTILIZED and not p.decisions[held].selected
    # The same cluster without Longhorn: all four go together (what the hold above changes).
    assert command(plan(nodes, pods, groups=[flexible()], now=NOW, since=timers_out("abcd"))) == ["a", "b", "c", "d"]


def test_longhorn_holds_a_utilized_node_out_of_single_node_consolidation() -> None:
    """Left the only candidate of its group, a node goes to single-node consolidation; the node Longhorn
    holds must not be the one."""
    nodes, pods = utilized(["a", "b"])
    for storage in (attached("a"), only_replica("a")):
        p = plan(nodes, pods, groups=[flexible()], now=NOW, since=timers_out("ab"), storage=storage)
        assert single(p) == [("b", NodeState.CONSOLIDATED)] and command(p) == []
        assert not p.decisions["a"].selected
    # Both held: nothing at all.
    p = plan(nodes, pods, groups=[flexible()], now=NOW, since=timers_out("ab"), storage=attached("a", "b"))
    assert single(p) == [] and command(p) == []


def test_longhorn_blocks_an_underused_node_whose_pods_fit_nowhere_else() -> None:
    """The Consolidated path (underused, replaced by a cheaper node) checks Longhorn on its own and says
    so: explain node names the volume."""
    nodes = [cx("a"), cx("full", group=None)]
    pods = [pod("w", "a", cpu=1000), pod("x", "full", cpu=7900)]
    assert single(plan(nodes, pods, groups=[flexible()], now=NOW, since={"a": 0.0})) == [("a", NodeState.CONSOLIDATED)]
    for storage, code in ((attached("a"), VOLUME_ATTACHED), (only_replica("a"), LAST_HEALTHY_REPLICA)):
        p = plan(nodes, pods, groups=[flexible()], now=NOW, since={"a": 0.0}, storage=storage)
        assert state(p, "a") == (NodeState.BLOCKED, code) and single(p) == [] and command(p) == []


def test_a_replica_whose_peer_is_removed_in_the_same_evaluation_holds_its_node_out_of_the_command() -> None:
    """c's replica has a healthy peer on e when c is looked at alone; e, empty, is removed in this very
    evaluation, so by the command's turn c holds the volume's last healthy replica."""
    nodes, pods = utilized(["a", "b", "c"])
    nodes.append(cx("e", "cx22"))
    storage = LonghornState(
        volumes=[LonghornVolume(name="vol")],
        replicas=[
            LonghornReplica(name="vol-r1", volume="vol", node="c", healthy=True),
            LonghornReplica(name="vol-r2", volume="vol", node="e", healthy=True),
        ],
    )
    p = plan(nodes, pods, groups=[flexible()], now=NOW, since=timers_out("abce"), storage=storage)
    assert single(p) == [("e", NodeState.EMPTY)]
    assert command(p) == ["a", "b"] and state(p, "c") == (NodeState.BLOCKED, LAST_HEALTHY_REPLICA)


def test_two_nodes_holding_every_healthy_replica_of_a_volume_never_go_in_one_command() -> None:
    """Each node's replicas are checked against the nodes that stay, those already chosen for the same
    command gone too. Until 1 Dec a and b (every healthy replica of vol) went together: the drains'
    re-checks cancelled both on LonghornLastHealthyReplica after the successor was bought."""
    nodes, pods = utilized(["a", "b", "c"])
    storage = LonghornState(
        volumes=[LonghornVolume(name="vol", replicas_wanted=2)],
        replicas=[
            LonghornReplica(name="vol-r1", volume="vol", node="a", healthy=True),
            LonghornReplica(name="vol-r2", volume="vol", node="b", healthy=True),
        ],
    )
    p = plan(nodes, pods, groups=[flexible()], now=NOW, since=timers_out("abc"), storage=storage)
    assert command(p) == ["a", "c"] and state(p, "b") == (NodeState.BLOCKED, LAST_HEALTHY_REPLICA)


# --- Hetzner's billing-aware timing ------------------------------------------------------------


def billed() -> NodeGroup:
    """flexible() with pools paid per started hour, kept until 5 minutes before the paid hour ends."""
    return NodeGroup(
        name="g",
        pools=[
            PoolSpec(
                provider="kwok",
                serverType=["cx22", "cx32", "cx42"],
                priority=10,
                billing=Billing(period_s=HOUR, margin_s=300),
            )
        ],
        scaleDown=ScaleDownSettings(policy=ConsolidationPolicy.WHEN_EMPTY_OR_UNDERUTILIZED, unneeded_time_s=60),
    )


def made_at(created: dict[str, float]) -> tuple[list[NodeInfo], list[PodInfo]]:
    nodes, pods = utilized(list(created))
    return [n.model_copy(update={"created_at": datetime.fromtimestamp(created[n.name], UTC)}) for n in nodes], pods


def test_a_utilized_node_whose_paid_hour_is_not_ending_stays_out_of_the_command() -> None:
    """Removing a node early in its paid hour saves nothing: it keeps serving until the hour is ending,
    while the ones whose hour ends now go; its decision says when it may join."""
    fresh = NOW - HOUR + 420  # its window opens at NOW + 120
    nodes, pods = made_at({"a": fresh, "b": NOW - HOUR + 200, "c": NOW - HOUR + 250})
    p = plan(nodes, pods, groups=[billed()], now=NOW, since=timers_out("abc"))
    assert command(p) == ["b", "c"] and p.to_remove == []
    a = p.decisions["a"]
    assert a.state == NodeState.UTILIZED and not a.selected
    assert a.removable_at == fresh + HOUR - 300 == NOW + 120
    assert p.unneeded_since["a"] == NOW - 60  # its unneeded timer keeps running meanwhile
    # Alone beside a node whose hour is ending, it is not single-node consolidation's either.
    two = plan(nodes[:2], pods[:2], groups=[billed()], now=NOW, since=timers_out("ab"))
    assert single(two) == [("b", NodeState.CONSOLIDATED)] and command(two) == []
    assert two.decisions["a"].removable_at == NOW + 120


def test_a_command_waits_for_the_paid_hour_to_end_and_is_made_then() -> None:
    created = NOW - HOUR + 420
    nodes, pods = made_at(dict.fromkeys("abc", created))
    early = plan(nodes, pods, groups=[billed()], now=NOW, since=timers_out("abc"))
    assert command(early) == [] and early.to_remove == []
    assert {early.decisions[n].removable_at for n in "abc"} == {NOW + 120}
    # The loop reuses this evaluation until then, not past it: the command is not late.
    assert stable_until(early, obs(nodes, pods, billed()), NOW) == NOW + 120
    ending = plan(nodes, pods, groups=[billed()], now=NOW + 120, since=timers_out("abc"))
    assert command(ending) == ["a", "b", "c"]
    assert {r.kind for r in ending.consolidation} == {NodeState.CONSOLIDATED}
    # The next hour started (missed window): held again until that one is ending.
    missed = plan(nodes, pods, groups=[billed()], now=created + HOUR + 10, since=timers_out("abc"))
    assert command(missed) == [] and missed.decisions["a"].removable_at == created + 2 * HOUR - 300


# --- expiry within budgets -----------------------------------------------------------------------

R = DisruptionReason


def expired(*budgets: Budget, now: float = drift.NOW, in_progress: tuple[str, ...] = ()) -> ScaleDownPlan:
    """Three busy nodes of a group that expires nodes after an hour, all two hours old."""
    g = drift.group(expire_after_s=HOUR, budgets=list(budgets))
    nodes = [drift.made_from(g, f"n{i}", created_h_ago=2) for i in (1, 2, 3)]
    pods = [pod(f"p{i}", f"n{i}", cpu=3000) for i in (1, 2, 3)]
    return plan(nodes, pods, groups=[g], now=now, last_up=0.0, in_progress=set(in_progress))


def test_expired_nodes_are_replaced_within_a_budget_for_expired() -> None:
    """One at a time, as the budget says; the rest wait, and say which budget holds them."""
    p = expired(Budget(nodes="1", reasons=(R.EXPIRED,)))
    assert single(p) == [("n1", NodeState.EXPIRED)]
    for n in ("n2", "n3"):
        assert state(p, n) == (NodeState.BLOCKED, BUDGET_EXHAUSTED)
        assert "budget for Expired" in p.decisions[n].reasons[0].message
    # The one in flight (a NodeReplacement on any worker) still counts: nothing more starts.
    p = expired(Budget(nodes="1", reasons=(R.EXPIRED,)), in_progress=("n1",))
    assert removed(p) == [] and state(p, "n2") == (NodeState.BLOCKED, BUDGET_EXHAUSTED)
    p = expired(Budget(nodes="0", reasons=(R.EXPIRED,)))
    assert removed(p) == []
    assert expired(Budget(nodes="2", reasons=(R.EXPIRED,))).to_remove[1].name == "n2"


def test_a_budget_for_other_reasons_does_not_limit_expiry() -> None:
    other = Budget(nodes="0", reasons=(R.DRIFTED, R.UNDERUTILIZED, R.EMPTY))
    assert single(expired(other)) == [(n, NodeState.EXPIRED) for n in ("n1", "n2", "n3")]
    # A budget naming no reason limits every reason, expiry too.
    assert removed(expired(Budget(nodes="1"))) == ["n1"]


def test_an_expiry_budget_window_holds_expired_nodes_only_while_it_is_open() -> None:
    """No expiry replacements 09:00-17:00 UTC; drift.NOW is midnight."""
    office = Budget(nodes="0", schedule="0 9 * * *", duration=8 * HOUR, reasons=(R.EXPIRED,))
    assert removed(expired(office)) == ["n1", "n2", "n3"]
    during = expired(office, now=drift.NOW + 10 * HOUR)
    assert removed(during) == [] and state(during, "n1") == (NodeState.BLOCKED, BUDGET_EXHAUSTED)
    assert removed(expired(office, now=drift.NOW + 17 * HOUR + 60)) == ["n1", "n2", "n3"]
