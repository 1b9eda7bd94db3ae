"""The Empty removal method: only DaemonSet, mirror or finished pods; waits tainted after selection."""

from __future__ import annotations

from scaling.kube.drain import Blocker
from scaling.nodes.models import ScaleDownSettings
from scaling.nodes.scale_down.methods import Candidate, Wait
from scaling.nodes.scale_down.methods.empty import EMPTY, NOT_EMPTY
from scaling.nodes.scale_down.models import NodeState
from tests.scaling.nodes.scale_down.test_candidates import ds, node, pod

GS = ScaleDownSettings()


def test_empty_is_a_candidate_with_only_node_bound_pods() -> None:
    n1 = node("n1")
    assert EMPTY.is_candidate(Candidate(n1, [ds("agent", "n1", cpu=3900)]), GS)  # DaemonSets stay with it
    finished = pod("job", "n1").model_copy(update={"phase": "Succeeded"})
    assert EMPTY.is_candidate(Candidate(n1, [finished, pod("web", "n2")]), GS)  # other nodes' pods do not count
    assert not EMPTY.is_candidate(Candidate(n1, [pod("web", "n1")]), GS)
    assert not EMPTY.is_candidate(Candidate(node("mine", group=None), []), GS)  # not growth's


def test_empty_names_the_pods_that_landed() -> None:
    blocker = EMPTY.why_not(Candidate(node("n1"), [pod("web", "n1"), ds("agent", "n1"), pod("api", "n1")]), GS)
    assert blocker.code == NOT_EMPTY
    assert blocker.message == "node n1 now runs pod default/web, default/api"


def test_empty_waits_tainted_after_selection_and_every_blocker_cancels_it() -> None:
    assert (EMPTY.kind, EMPTY.wait, EMPTY.require_empty) == (NodeState.EMPTY, Wait.AFTER_SELECTION, True)
    blockers = [Blocker(code="NodeUtilized", message="u"), Blocker(code="VolumeAttached", message="v")]
    assert EMPTY.cancels(blockers) == blockers
