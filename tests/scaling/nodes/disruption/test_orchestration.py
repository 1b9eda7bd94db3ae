"""The loop's side of a command's karpenter.sh/disrupted taint: a node still carrying it that no removal
of the loop holds is named for the taint to be lifted (Karpenter's disruption controller lifts it
from every node its orchestration queue does not hold, pkg/controllers/disruption/controller.go)."""

from __future__ import annotations

from scaling.kube.drain import ANNOTATION_SCALE_DOWN_AT, TAINT_DELETION_CANDIDATE, TAINT_DISRUPTED, TAINT_TO_BE_DELETED
from scaling.kube.models import Taint
from scaling.nodes.contracts import ScaleDownEvaluationInput, ScaleDownObservation
from scaling.nodes.disruption.orchestration import UNTRACKED_DISRUPTED_MAX, untracked_disrupted
from scaling.nodes.scale_down.evaluation import evaluation_of
from scaling.nodes.scale_down.models import ScaleDownLoopSettings
from tests.workflows.nodes.test_node_scale_down import GROUP, app_pod, node

DISRUPTED = Taint(key=TAINT_DISRUPTED, effect="NoSchedule")


def tainted(name: str, managed: bool = True):  # noqa: ANN201
    return node(name, managed=managed).model_copy(update={"taints": [DISRUPTED]})


def test_a_disrupted_node_no_removal_holds_is_named() -> None:
    nodes = [tainted("a"), tainted("b"), tainted("static", managed=False), node("c")]
    # b is being replaced (the loop holds it): its command lifts the taint or deletes the node itself.
    assert untracked_disrupted(nodes, in_progress=["b"]) == ["a"]
    assert untracked_disrupted(nodes, in_progress=["a", "b"]) == []
    many = [tainted(f"n{i:03d}") for i in range(UNTRACKED_DISRUPTED_MAX + 5)]
    assert len(untracked_disrupted(many, in_progress=[])) == UNTRACKED_DISRUPTED_MAX


def test_a_deletion_mark_no_removal_holds_is_named() -> None:
    """Cluster Autoscaler's hard mark left behind on a node it was deleting, or growth's own of a
    removal ended from outside (its soft taint with its ScaleDownAt, or the hard one): named like the
    disrupted taint. A node a removal holds keeps its mark; a node growth does not manage is not
    growth's to clean; the soft taint alone (CA's or the loop's on an unneeded node) is left to
    scale_down.soft_taints, which keeps it while the node is unneeded."""
    soft = Taint(key=TAINT_DELETION_CANDIDATE, value="1", effect="PreferNoSchedule")
    hard = Taint(key=TAINT_TO_BE_DELETED, value="1", effect="NoSchedule")
    at = {ANNOTATION_SCALE_DOWN_AT: "2030-01-01T00:00:00Z"}
    nodes = [
        node("waited").model_copy(update={"taints": [soft], "annotations": at}),
        node("hard").model_copy(update={"taints": [hard]}),
        node("held").model_copy(update={"taints": [soft], "annotations": at}),
        node("unneeded").model_copy(update={"taints": [soft]}),
        node("static", managed=False).model_copy(update={"taints": [hard]}),
        node("user").model_copy(update={"taints": [Taint(key="dedicated", value="db", effect="PreferNoSchedule")]}),
    ]
    assert untracked_disrupted(nodes, in_progress=["held"]) == ["hard", "waited"]


def test_the_evaluation_names_them() -> None:
    obs = ScaleDownObservation(
        nodes=[tainted("a"), tainted("b"), node("c")],
        pods=[app_pod("web-1", "a"), app_pod("web-2", "b"), app_pod("web-3", "c")],
        groups=[GROUP],
    )
    inp = ScaleDownEvaluationInput(cluster="c", now=1000.0, in_progress=["b"], settings=ScaleDownLoopSettings())
    assert evaluation_of(obs, inp).disrupted_untracked == ["a"]


def test_the_evaluation_names_waiting_nodes_gone_from_the_cluster() -> None:
    """A node whose Empty removal waits on its timer, deleted meanwhile by another command: its removal
    is told to end (else it waited out its timer: 20 min for an unready node)."""
    obs = ScaleDownObservation(nodes=[node("b")], pods=[app_pod("web-1", "b")], groups=[GROUP])
    inp = ScaleDownEvaluationInput(
        cluster="c", now=1000.0, in_progress=["a", "b"], watch_empty=["a", "b"], settings=ScaleDownLoopSettings()
    )
    ev = evaluation_of(obs, inp)
    assert ev.gone == ["a"] and ev.not_empty == ["b"]
