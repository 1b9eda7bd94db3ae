"""karpenter.sh/do-not-disrupt (Karpenter's pod- and node-level disruption controls): it holds the
voluntary removals (Empty, Underused), not an operator's remove-now, and is ignored on pods that leave
with the node or are already terminating. Cluster Autoscaler's annotations still apply beside it."""

from __future__ import annotations

from datetime import UTC, datetime

from scaling.kube.drain import ANNOTATION_SAFE_TO_EVICT, NOT_SAFE_TO_EVICT, SCALE_DOWN_DISABLED
from scaling.nodes.disruption.do_not_disrupt import (
    ANNOTATION_DO_NOT_DISRUPT,
    DO_NOT_DISRUPT,
    EVENT_REASON,
    do_not_disrupt_blockers,
)
from scaling.nodes.disruption.events import newly_blocked
from scaling.nodes.explain import ExplainNodeInput, explain_node
from scaling.nodes.scale_down.evaluation import candidate_of
from scaling.nodes.scale_down.models import NodeState
from scaling.nodes.scale_down.recheck import blocking, still_removable
from scaling.nodes.scale_down.removals import CandidateState
from scaling.nodes.settings import AutoscalerSettings
from scaling.nodes.state import NodeAutoscalerState
from tests.scaling.nodes.scale_down.test_candidates import BUSY, GI, ds, node, plan, pod, removed, state

DND = {ANNOTATION_DO_NOT_DISRUPT: "true"}


def cluster(**node_kw: object) -> list:
    return [node("n1", **node_kw), node("big", group=None, cpu=64000, mem=64 * GI)]


def test_a_node_annotation_holds_an_empty_node() -> None:
    p = plan(cluster(annotations=DND), [*BUSY])
    assert removed(p) == [] and state(p, "n1") == (NodeState.BLOCKED, DO_NOT_DISRUPT)
    assert "node n1 has annotation karpenter.sh/do-not-disrupt=true" in p.decisions["n1"].reasons[0].message


def test_a_pod_annotation_holds_an_underused_node() -> None:
    pods = [*BUSY, pod("web", "n1", cpu=200, annotations=DND)]
    p = plan(cluster(), pods, since={"n1": 0.0})
    assert removed(p) == [] and state(p, "n1") == (NodeState.BLOCKED, DO_NOT_DISRUPT)
    assert p.decisions["n1"].reasons[0].pod == "default/web"


def test_only_the_value_true_counts_and_pods_leaving_with_the_node_are_ignored() -> None:
    terminating = pod("old", "n1", annotations=DND, deletion_timestamp=datetime(2030, 1, 1, tzinfo=UTC))
    daemon = ds("agent", "n1").model_copy(update={"annotations": DND})
    finished = pod("job", "n1", controller_kind="Job", annotations=DND).model_copy(update={"phase": "Succeeded"})
    maybe = pod("web", "n1", annotations={ANNOTATION_DO_NOT_DISRUPT: "false"})
    assert do_not_disrupt_blockers(node("n1"), [terminating, daemon, finished, maybe]) == []
    assert do_not_disrupt_blockers(node("n1", annotations={ANNOTATION_DO_NOT_DISRUPT: "yes"}), []) == []


def test_cluster_autoscaler_annotations_still_hold_beside_it() -> None:
    pods = [*BUSY, pod("web", "n1", cpu=200, annotations={ANNOTATION_SAFE_TO_EVICT: "false", **DND})]
    p = plan(
        cluster(annotations={"cluster-autoscaler.kubernetes.io/scale-down-disabled": "true"}), pods, since={"n1": 0.0}
    )
    codes = [b.code for b in p.decisions["n1"].reasons]
    assert codes[0] == SCALE_DOWN_DISABLED and DO_NOT_DISRUPT in codes and NOT_SAFE_TO_EVICT in codes


def test_the_recheck_cancels_a_voluntary_removal_but_not_a_manual_one() -> None:
    nodes = cluster()
    pods = [*BUSY, pod("web", "n1", cpu=200, annotations=DND)]
    check = still_removable(nodes[0], pods, [], None, nodes)
    assert not check.ok and check.blockers[0].code == DO_NOT_DISRUPT
    assert blocking("Underused", check.blockers) and blocking("Empty", check.blockers)
    assert blocking("Manual", check.blockers) == []  # Karpenter's manual delete is not held either


def test_explain_node_names_the_annotation() -> None:
    pods = [*BUSY, pod("web", "n1", cpu=200, annotations=DND)]
    dec = plan(cluster(), pods, since={"n1": 0.0}).decisions["n1"]
    s = NodeAutoscalerState(candidates={"n1": candidate_of(dec)}, scale_down_evaluated_at=1.0)
    answer = explain_node(AutoscalerSettings(cluster="c"), s, ExplainNodeInput(name="n1"))
    assert (
        answer.outcome == "Kept"
        and "DoNotDisrupt: pod default/web has annotation karpenter.sh/do-not-disrupt" in answer.summary
    )


def test_an_event_once_per_change() -> None:
    held = CandidateState(node="n1", state="Blocked", reason=DO_NOT_DISRUPT, message="pod default/web has ...")
    other = CandidateState(node="n2", state="Blocked", reason="NotEnoughPdb", message="pdb")
    events = newly_blocked({}, {"n1": held, "n2": other})
    assert [(e.node, e.reason) for e in events] == [("n1", EVENT_REASON)]
    assert newly_blocked({"n1": held}, {"n1": held}) == []
