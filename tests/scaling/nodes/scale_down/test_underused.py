"""The Underused removal method: below the group's threshold; waits untainted before selection."""

from __future__ import annotations

from scaling.kube.drain import Blocker
from scaling.nodes.models import ScaleDownSettings
from scaling.nodes.scale_down.methods import Candidate, Wait
from scaling.nodes.scale_down.methods.underused import UNDERUSED, UTILIZED
from scaling.nodes.scale_down.models import NodeState
from tests.scaling.nodes.scale_down.test_candidates import ds, node, pod

GS = ScaleDownSettings(utilization_threshold=0.5)


def test_underused_is_a_candidate_below_the_threshold() -> None:
    n1 = node("n1", cpu=4000)
    assert UNDERUSED.is_candidate(Candidate(n1, [pod("web", "n1", cpu=1900)]), GS)
    assert not UNDERUSED.is_candidate(Candidate(n1, [pod("web", "n1", cpu=2000)]), GS)  # at it is not below
    # Memory counts as much as cpu: the larger ratio decides.
    assert not UNDERUSED.is_candidate(Candidate(n1, [pod("web", "n1", cpu=100, mem=6 * 1024**3)]), GS)


def test_underused_takes_an_empty_node_whatever_its_daemonsets_use() -> None:
    busy_agents = Candidate(node("n1", cpu=4000), [ds("agent", "n1", cpu=3000)])
    assert busy_agents.utilization == 0.75
    assert UNDERUSED.is_candidate(busy_agents, GS)


def test_underused_reports_the_threshold_it_crossed() -> None:
    blocker = UNDERUSED.why_not(Candidate(node("n1"), [pod("web", "n1", cpu=3000)]), GS)
    assert (blocker.code, blocker.message) == (UTILIZED, "node n1 is at or above 50% utilization")


def test_underused_waits_untainted_before_selection_and_every_blocker_cancels_it() -> None:
    assert (UNDERUSED.kind, UNDERUSED.wait, UNDERUSED.require_empty) == (
        NodeState.UNDERUSED,
        Wait.BEFORE_SELECTION,
        False,
    )
    blockers = [Blocker(code=UTILIZED, message="u")]
    assert UNDERUSED.cancels(blockers) == blockers
