"""Consolidations found not worth it are remembered until the cluster changes
(scaling.nodes.disruption.refusals): the loop no longer re-proposes the same command every
consolidateAfter (20-70 NotWorthIt NodeReplacements per chaos or bench run before). Karpenter's
rule: pkg/controllers/state/cluster.go ConsolidationState (changed by node and pod events,
forgotten after five minutes)."""

from __future__ import annotations

from scaling.nodes.catalogue import hourly_prices
from scaling.nodes.contracts import ReplacementPlanInput
from scaling.nodes.disruption.multi_node import plan_for_input
from scaling.nodes.disruption.refusals import (
    NOT_WORTH_IT,
    REFUSAL_KEPT_S,
    REFUSALS_KEPT,
    RefusedConsolidation,
    cluster_digest,
    prices_digest,
    refusal_digest,
    remember,
    standing_refusals,
)
from scaling.nodes.scale_down.models import NodeState
from scaling.nodes.scale_down.removals import ScaleDownPhase, ScaleDownStatus
from scaling.nodes.state import NodeAutoscalerState, record_scale_down_update
from tests.scaling.nodes.disruption.test_multi_node import CATALOGUE, NOW, cx, flexible, obs, utilized
from tests.scaling.nodes.scale_down.test_candidates import plan, pod

EXPIRED = {n: NOW - 60 for n in "ab"}  # both nodes' consolidateAfter (60 s) ran out


def refused_by_the_loop() -> tuple[list, list, NodeAutoscalerState]:
    """Two cx22 at 1550m: the loop proposes them together, the command's plan refuses (one cx32 saves
    under 10 %), and its final report for each node reaches the loop."""
    nodes, pods = utilized(["a", "b"])
    proposed = plan(nodes, pods, groups=[flexible()], now=NOW, since=EXPIRED)
    assert [r.name for r in proposed.consolidation] == ["a", "b"]
    inp = ReplacementPlanInput(cluster="c", node="a", now=NOW, others=["b"], allowed=2)
    answer = plan_for_input(obs(nodes, pods), CATALOGUE, inp)
    priced = prices_digest([flexible()], hourly_prices(CATALOGUE))
    assert answer.refused and answer.cluster_digest == refusal_digest(
        cluster_digest(obs(nodes, pods).nodes, pods), priced
    )
    state = NodeAutoscalerState()
    for n in ("a", "b"):
        state.scale_downs[n] = ScaleDownStatus(node=n, workflow_id="nodes/c/replace/a")
        report = ScaleDownStatus(
            node=n,
            workflow_id="nodes/c/replace/a",
            kind="Consolidated",
            phase=ScaleDownPhase.CANCELLED,
            reason=NOT_WORTH_IT,
            message=f"nodes kept: {answer.refused}",
            cluster_digest=answer.cluster_digest,
        )
        record_scale_down_update(state, report, NOW)
    assert [r.node for r in state.refused_consolidations] == ["a", "b"]
    return obs(nodes, pods).nodes, pods, state


def test_a_refused_command_is_not_proposed_again_while_nothing_changed() -> None:
    nodes, pods, state = refused_by_the_loop()
    again = plan(nodes, pods, groups=[flexible()], now=NOW + 60, since=EXPIRED, refused=state.refused_consolidations)
    assert again.consolidation == [] and again.to_remove == [] and again.refusals_ended == []
    a = again.decisions["a"]
    assert a.reason == NOT_WORTH_IT and a.removable_at == NOW + REFUSAL_KEPT_S
    # Five minutes on, it is asked again whatever the digest says (prices are not in it).
    late = plan(
        nodes, pods, groups=[flexible()], now=NOW + REFUSAL_KEPT_S, since=EXPIRED, refused=state.refused_consolidations
    )
    assert [r.name for r in late.consolidation] == ["a", "b"] and late.refusals_ended == ["a", "b"]


def test_a_change_in_nodes_or_pods_asks_again_and_status_churn_does_not() -> None:
    nodes, pods, state = refused_by_the_loop()
    refused = state.refused_consolidations
    churn = [p.model_copy(update={"phase": "Pending"}) for p in pods]  # same placement and requests
    assert plan(nodes, churn, groups=[flexible()], now=NOW, since=EXPIRED, refused=refused).refusals_ended == []
    left = plan(nodes, [*pods, pod("new", "b", cpu=100)], groups=[flexible()], now=NOW, since=EXPIRED, refused=refused)
    assert left.refusals_ended == ["a", "b"] and left.decisions["a"].reason != NOT_WORTH_IT
    bigger = [nodes[0], cx("b", "cx32")]
    assert plan(bigger, pods, groups=[flexible()], now=NOW, since=EXPIRED, refused=refused).refusals_ended == ["a", "b"]


def test_refused_nodes_rejoin_a_command_once_another_nodes_timer_runs_out() -> None:
    """The consolidation bench (seed 11, a budget of three) ended with three cx32 one cx42 would hold:
    a and b were refused as a pair while c's consolidateAfter had not run out, and the refusal held
    them for five minutes after it had. The three together are another question, which Karpenter asks
    (a node turning consolidatable changes its cluster state); alone, a refused pair stays held."""
    nodes, pods = utilized(["a", "b", "c"])
    nodes = obs(nodes, pods).nodes
    refused = [RefusedConsolidation(node=n, digest=cluster_digest(nodes, pods), at=NOW) for n in "ab"]
    waiting = plan(nodes, pods, groups=[flexible()], now=NOW + 1, since={**EXPIRED, "c": NOW}, refused=refused)
    assert waiting.consolidation == [] and waiting.decisions["a"].reason == NOT_WORTH_IT
    assert waiting.decisions["c"].removable_at == NOW + 60  # c's timer
    out = plan(nodes, pods, groups=[flexible()], now=NOW + 60, since={**EXPIRED, "c": NOW}, refused=refused)
    assert sorted(r.name for r in out.consolidation) == ["a", "b", "c"]
    assert out.decisions["a"].state == NodeState.CONSOLIDATED and out.decisions["a"].reasons == []
    assert out.refusals_ended == []  # what a and b were refused for still stands: only the question changed
    # A refused node beside one fresh candidate: a command of the two, not a single replacement of b.
    alone = [RefusedConsolidation(node="a", digest=cluster_digest(nodes[:2], pods[:2]), at=NOW)]
    two = plan(nodes[:2], pods[:2], groups=[flexible()], now=NOW + 60, since={"b": NOW}, refused=alone)
    assert two.refusals_ended == [] and sorted(r.name for r in two.consolidation) == ["a", "b"]


def test_a_price_change_asks_again_and_an_evaluation_without_prices_reads_the_cluster_alone() -> None:
    """The refusal's digest covers every group's prices (the evaluation reads the providers' catalogues):
    a saving the old prices did not make may be made at the new ones."""
    nodes, pods, state = refused_by_the_loop()
    refused = state.refused_consolidations
    prices = hourly_prices(CATALOGUE)
    same = plan(nodes, pods, groups=[flexible()], now=NOW, since=EXPIRED, refused=refused, prices=prices)
    assert same.refusals_ended == [] and same.consolidation == []
    cheaper = prices | {"kwok/cx32": 0.0099}  # one cx32 now saves 17.5 % of two cx22
    again = plan(nodes, pods, groups=[flexible()], now=NOW, since=EXPIRED, refused=refused, prices=cheaper)
    assert again.refusals_ended == ["a", "b"] and [r.name for r in again.consolidation] == ["a", "b"]
    unpriced = plan(nodes, pods, groups=[flexible()], now=NOW, since=EXPIRED, refused=refused)
    assert unpriced.refusals_ended == []  # a provider that could not answer asks nothing again
    partly = {k: v for k, v in prices.items() if k != "kwok/cx42"}  # one type of the group unpriced
    assert (
        plan(nodes, pods, groups=[flexible()], now=NOW, since=EXPIRED, refused=refused, prices=partly).refusals_ended
        == []
    )


def test_a_single_node_refusal_holds_that_node_only_from_consolidation() -> None:
    nodes = [cx("a"), cx("full", group=None)]
    pods = [pod("w", "a", cpu=1000), pod("x", "full", cpu=7900)]
    refused = [RefusedConsolidation(node="a", digest=cluster_digest(nodes, pods), at=NOW, message="saves 0 %")]
    p = plan(nodes, pods, groups=[flexible()], now=NOW, since={"a": 0.0}, refused=refused)
    assert p.to_remove == [] and p.decisions["a"].state == NodeState.BLOCKED
    assert "nothing changed since (saves 0 %)" in p.decisions["a"].reasons[0].message
    # Emptied, the node goes as an Empty node: only consolidation is held (and its digest changed anyway).
    empty = plan(nodes, pods[1:], groups=[flexible()], now=NOW, since={"a": 0.0}, refused=refused)
    assert [(r.name, r.kind) for r in empty.to_remove] == [("a", NodeState.EMPTY)]


def test_the_memory_is_one_refusal_per_node_the_most_recent_kept() -> None:
    kept: list[RefusedConsolidation] = []
    for i in range(REFUSALS_KEPT + 5):
        kept = remember(kept, RefusedConsolidation(node=f"n{i}", digest="d", at=float(i)))
    kept = remember(kept, RefusedConsolidation(node=f"n{REFUSALS_KEPT}", digest="e", at=1e6))
    assert len(kept) == REFUSALS_KEPT and kept[-1].digest == "e" and kept[0].node == "n5"
    standing, ended = standing_refusals(kept, "d", float(REFUSALS_KEPT), {"n5", "n6"})
    assert set(standing) == {"n5", "n6"} and "n7" in ended and "n5" not in ended
    # A NotWorthIt report without a digest (recorded before refusals were) is not remembered.
    state = NodeAutoscalerState()
    record_scale_down_update(state, ScaleDownStatus(node="a", phase=ScaleDownPhase.CANCELLED, reason=NOT_WORTH_IT))
    assert state.refused_consolidations == []


def test_a_later_runs_refusal_in_the_same_words_is_remembered_again() -> None:
    """Five minutes on, the refusal forgotten, the loop asks the command again (its id is its first
    node's) and it refuses in the same words for b, a node it did not hold (the budget let one go).
    Read as the first run's report, b had no refusal again, and the consolidation bench's loop re-asked
    the command every 0.6 s for 30 s. The same signal delivered twice is still one report."""
    state = NodeAutoscalerState()
    first = ScaleDownStatus(
        node="b",
        workflow_id="nodes/c/replace/a",
        run="run-one1",
        kind="Consolidated",
        phase=ScaleDownPhase.CANCELLED,
        reason=NOT_WORTH_IT,
        message="nodes kept: a: no successor type costs at most 90 % of 0.0113/h",
        cluster_digest="d:p",
    )
    record_scale_down_update(state, first, NOW)
    state.refused_consolidations = []  # forgotten (REFUSAL_KEPT_S)
    record_scale_down_update(state, first, NOW + REFUSAL_KEPT_S)  # delivered twice
    assert state.refused_consolidations == []
    later = first.model_copy(update={"run": "run-two2"})
    record_scale_down_update(state, later, NOW + REFUSAL_KEPT_S)
    assert [(r.node, r.at) for r in state.refused_consolidations] == [("b", NOW + REFUSAL_KEPT_S)]


def test_a_consolidation_its_recheck_cancelled_is_held_for_the_refusal_time() -> None:
    """The consolidation bench's seed 3: a command's plan placed a node's pods, the drain's re-check did
    not, and the loop asked again every 6 s. The cancel is now held as a refusal with no digest (the
    re-check read no digest), for REFUSAL_KEPT_S whatever changed; a fresh candidate still reopens it."""
    nodes, pods = utilized(["a", "b"])
    nodes = obs(nodes, pods).nodes
    state = NodeAutoscalerState()
    state.scale_downs["a"] = ScaleDownStatus(node="a", workflow_id="nodes/c/scale-down/a", kind="Consolidated")
    cancel = ScaleDownStatus(
        node="a",
        workflow_id="nodes/c/scale-down/a",
        kind="Consolidated",
        phase=ScaleDownPhase.CANCELLED,
        reason="NoPlaceToMovePods",
        message="pod default/a-p fits on no other node",
    )
    record_scale_down_update(state, cancel, NOW)
    assert [(r.node, r.digest) for r in state.refused_consolidations] == [("a", "")]
    held = plan(nodes, pods, groups=[flexible()], now=NOW + 1, since={"a": 0.0}, refused=state.refused_consolidations)
    assert held.decisions["a"].reason == NOT_WORTH_IT and held.refusals_ended == []
    late = plan(
        nodes,
        pods,
        groups=[flexible()],
        now=NOW + REFUSAL_KEPT_S,
        since={"a": 0.0},
        refused=state.refused_consolidations,
    )
    assert late.refusals_ended == ["a"]
    # An Underused removal's cancel (Cluster Autoscaler's rules) is no refusal.
    other = NodeAutoscalerState()
    record_scale_down_update(other, cancel.model_copy(update={"kind": "Underused", "node": "b"}), NOW)
    assert other.refused_consolidations == []


def test_a_later_run_of_a_commands_id_is_heard_for_the_nodes_the_loop_did_not_hold() -> None:
    """A command's id is its first node's: a second command with the same first node reports under the
    same id for candidates the loop did not hold (beyond the budget). Its refusal, read as a duplicate of
    the first run's, was dropped; the node kept the first refusal's digest, which no longer matched, and
    the bench's loop re-asked the command every 0.6 s (seed 11)."""
    state = NodeAutoscalerState()
    wid = "nodes/c/replace/a"

    def refused(digest: str) -> ScaleDownStatus:
        return ScaleDownStatus(
            node="b",
            workflow_id=wid,
            kind="Consolidated",
            phase=ScaleDownPhase.CANCELLED,
            reason=NOT_WORTH_IT,
            message="nodes kept: b",
            cluster_digest=digest,
        )

    record_scale_down_update(state, refused("d1:p"), NOW)
    record_scale_down_update(state, refused("d1:p"), NOW + 1)  # the same report again: a duplicate
    assert [(r.node, r.digest, r.at) for r in state.refused_consolidations] == [("b", "d1:p", NOW)]
    record_scale_down_update(state, refused("d2:p"), NOW + 60)  # a later run, the cluster changed since
    assert [(r.node, r.digest, r.at) for r in state.refused_consolidations] == [("b", "d2:p", NOW + 60)]
