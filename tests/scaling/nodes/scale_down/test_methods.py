"""The removal methods as the callers walk them: the plan's order, lookup by kind, the re-check's method."""

from __future__ import annotations

from scaling.kube.drain import Blocker
from scaling.nodes.models import ScaleDownSettings
from scaling.nodes.scale_down.methods import BY_KIND, PLANNED, Candidate, method_for, rechecked_as
from scaling.nodes.scale_down.methods.consolidated import CONSOLIDATED
from scaling.nodes.scale_down.methods.drifted import DRIFTED
from scaling.nodes.scale_down.methods.empty import EMPTY
from scaling.nodes.scale_down.methods.expired import EXPIRED
from scaling.nodes.scale_down.methods.manual import MANUAL_REMOVAL
from scaling.nodes.scale_down.methods.underused import UNDERUSED
from scaling.nodes.scale_down.models import NodeState
from tests.scaling.nodes.scale_down.test_candidates import ds, group, node, plan, pod


def test_the_plan_walks_empty_first_and_the_first_that_qualifies_names_the_removal() -> None:
    assert PLANNED == (EMPTY, EXPIRED, DRIFTED, UNDERUSED, CONSOLIDATED)
    # n1 runs only a heavy DaemonSet (75 %): it qualifies as both, and Empty, walked first, names it.
    heavy = Candidate(node("n1"), [ds("agent", "n1", cpu=3000)])
    gs = ScaleDownSettings()
    assert [m.kind for m in PLANNED if m.is_candidate(heavy, gs)] == [NodeState.EMPTY, NodeState.UNDERUSED]
    nodes = [node("n1"), node("n2"), node("big", group=None)]
    pods = [ds("agent", "n1", cpu=3000), pod("web", "n2", cpu=100)]
    p = plan(nodes, pods, groups=[group(unneeded_time_s=300)], now=1000.0, since={"n2": 0.0}, max_removals_per_loop=1)
    # Selection takes the methods in the same order: the empty node before the far less used one.
    assert [(r.name, r.kind, r.scale_down_at) for r in p.to_remove] == [("n1", NodeState.EMPTY, 1300.0)]
    assert p.decisions["n2"].state == NodeState.UNDERUSED and not p.decisions["n2"].selected
    both = plan(nodes, pods, groups=[group(unneeded_time_s=300)], now=1000.0, since={"n2": 0.0})
    # Underused waited untainted before it was selected: it goes at once.
    assert [(r.name, r.kind, r.scale_down_at) for r in both.to_remove] == [
        ("n1", NodeState.EMPTY, 1300.0),
        ("n2", NodeState.UNDERUSED, 1000.0),
    ]


def test_kinds_find_their_method_and_an_unknown_kind_is_handled_as_underused() -> None:
    assert {k: m for k, m in BY_KIND.items()} == {
        "Empty": EMPTY,
        "Expired": EXPIRED,
        "Drifted": DRIFTED,
        "Underused": UNDERUSED,
        "Consolidated": CONSOLIDATED,
        "Manual": MANUAL_REMOVAL,
    }
    assert method_for("Empty") is EMPTY and method_for(NodeState.UNDERUSED) is UNDERUSED
    assert method_for("SomethingNewer") is UNDERUSED
    blockers = [Blocker(code="NodeUtilized", message="u")]
    assert method_for("SomethingNewer").cancels(blockers) == blockers


def test_a_recheck_applies_empty_or_underused() -> None:
    assert rechecked_as(True) is EMPTY and rechecked_as(False) is UNDERUSED
    for method in BY_KIND.values():  # what a running removal sends decides the method that re-checks it
        assert rechecked_as(method.require_empty).require_empty == method.require_empty
