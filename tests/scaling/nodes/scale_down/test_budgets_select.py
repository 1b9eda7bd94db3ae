"""Scale-down selection within the groups' disruption budgets (Karpenter's NodePool budgets:
kubernetes-sigs/karpenter pkg/controllers/disruption/helpers.go BuildDisruptionBudgetMapping counts the
nodes being disrupted against the most restrictive active budget)."""

from __future__ import annotations

from datetime import UTC, datetime

from scaling.kube.drain import TAINT_TO_BE_DELETED
from scaling.kube.models import Taint
from scaling.nodes.disruption.budgets import BUDGET_EXHAUSTED
from scaling.nodes.disruption.ledger import DECISION_LEAD_S
from scaling.nodes.disruption.models import Budget, ConsolidationPolicy, Disruption, DisruptionReason
from scaling.nodes.models import NodeGroup, PoolSpec, ScaleDownSettings
from scaling.nodes.scale_down.models import NodeState
from scaling.nodes.scale_down.select import LIMIT_REACHED
from tests.scaling.nodes.scale_down.test_candidates import BUSY, GI, node, plan, pod, removed, state

MONDAY_10 = datetime(2024, 1, 8, 10, 0, tzinfo=UTC).timestamp()
SATURDAY_10 = datetime(2024, 1, 13, 10, 0, tzinfo=UTC).timestamp()


def group(*budgets: Budget, **scale_down: object) -> NodeGroup:
    return NodeGroup(
        name="g",
        pools=[PoolSpec(provider="kwok", serverType=["small"], priority=10)],
        disruption=Disruption(budgets=list(budgets)),
        scaleDown=ScaleDownSettings(**scale_down),
    )


def empties(n: int) -> list:
    return [node(f"e{i:02}") for i in range(n)] + [node("big", group=None, cpu=64000, mem=64 * GI)]


def test_a_count_budget_caps_removals_in_one_loop() -> None:
    p = plan(empties(6), [*BUSY], groups=[group(Budget(nodes="2"))])
    assert removed(p) == ["e00", "e01"]
    assert state(p, "e02") == (NodeState.BLOCKED, BUDGET_EXHAUSTED)
    assert p.unneeded_since["e02"] == 10_000.0  # held by the budget, its timer keeps running


def test_a_percentage_budget_rounds_up_over_the_groups_nodes() -> None:
    # 10 % of 6 nodes allows 1 (rounded up, as Karpenter does).
    assert removed(plan(empties(6), [*BUSY], groups=[group(Budget(nodes="10%"))])) == ["e00"]


def test_removals_in_flight_and_tainted_nodes_count_against_the_budget() -> None:
    nodes = empties(6)
    nodes[5] = nodes[5].model_copy(update={"taints": [Taint(key=TAINT_TO_BE_DELETED, effect="NoSchedule")]})
    p = plan(nodes, [*BUSY], groups=[group(Budget(nodes="3"))], in_progress={"e00"})
    assert removed(p) == ["e01"]  # e00 in progress and e05 tainted: one left
    assert state(p, "e02") == (NodeState.BLOCKED, BUDGET_EXHAUSTED)
    assert removed(plan(nodes, [*BUSY], groups=[group(Budget(nodes="2"))], in_progress={"e00"})) == []


def test_a_business_hours_window_holds_underused_nodes_but_not_empty_ones() -> None:
    window = Budget(
        nodes="0", schedule="0 9 * * mon-fri", duration_s=8 * 3600.0, reasons=(DisruptionReason.UNDERUTILIZED,)
    )
    nodes = [node("e1"), node("u1"), node("big", group=None, cpu=64000, mem=64 * GI)]
    pods = [*BUSY, pod("w", "u1", cpu=200)]
    since = {"u1": 0.0}
    monday = plan(nodes, pods, groups=[group(window)], now=MONDAY_10, since=since, last_up=0.0)
    assert removed(monday) == ["e1"]
    assert state(monday, "u1") == (NodeState.BLOCKED, BUDGET_EXHAUSTED)
    saturday = plan(nodes, pods, groups=[group(window)], now=SATURDAY_10, since=since, last_up=0.0)
    assert removed(saturday) == ["e1", "u1"]


def test_the_most_restrictive_active_budget_wins() -> None:
    g = group(Budget(nodes="50%"), Budget(nodes="1", reasons=(DisruptionReason.EMPTY,)), Budget(nodes="5"))
    assert removed(plan(empties(6), [*BUSY], groups=[g])) == ["e00"]


def test_the_per_loop_limit_still_applies_under_a_larger_budget() -> None:
    p = plan(empties(6), [*BUSY], groups=[group(Budget(nodes="100%"))], max_removals_per_loop=2)
    assert removed(p) == ["e00", "e01"] and state(p, "e02") == (NodeState.EMPTY, LIMIT_REACHED)


def test_when_empty_leaves_underused_nodes_alone() -> None:
    nodes = [node("e1"), node("u1"), node("big", group=None, cpu=64000, mem=64 * GI)]
    g = group(policy=ConsolidationPolicy.WHEN_EMPTY)
    p = plan(nodes, [*BUSY, pod("w", "u1", cpu=200)], groups=[g], since={"u1": 0.0})
    assert removed(p) == ["e1"]
    assert state(p, "u1")[0] == NodeState.UTILIZED


def test_a_window_about_to_open_holds_what_it_would_hold() -> None:
    """The loop starts what it chose a workflow task later: a window opening within DECISION_LEAD_S
    already holds (the consolidation bench started a replacement 70 ms into a window it chose 10 ms
    before)."""
    window = Budget(nodes="0", schedule="*/3 * * * *", duration_s=60.0, reasons=(DisruptionReason.UNDERUTILIZED,))
    nodes = [node("e1"), node("u1"), node("big", group=None, cpu=64000, mem=64 * GI)]
    pods = [*BUSY, pod("w", "u1", cpu=200)]
    opens = datetime(2024, 1, 8, 10, 3, tzinfo=UTC).timestamp()
    for before, held in ((0.01, True), (DECISION_LEAD_S, True), (DECISION_LEAD_S + 1, False), (119.0, False)):
        p = plan(nodes, pods, groups=[group(window)], now=opens - before, since={"u1": 0.0}, last_up=0.0)
        assert removed(p) == (["e1"] if held else ["e1", "u1"]), before
