"""Nodes pods are about to land on (scaling.nodes.scale_down.landing): the chaos run's
node-replacement/kill-worker-during-cordon found a replacement's successor tainted as an Empty
node between its predecessor's delete and the scheduler binding the evicted pods' replacements to
it; the successor then stood cordoned while the node it replaced was gone."""

from __future__ import annotations

from datetime import UTC, datetime

from scaling.kube.models import Resources
from scaling.kube.pods import pod_info
from scaling.nodes.disruption.drift import LABEL_REPLACES
from scaling.nodes.scale_down.landing import PODS_ABOUT_TO_LAND, about_to_land, awaiting_scheduler
from scaling.nodes.scale_down.models import NodeState
from tests.scaling.nodes.scale_down.test_candidates import node, plan, pod, removed, state


def recreated(name: str, cpu: int = 500, **kw: object):  # noqa: ANN201
    """A ReplicaSet's new pod: pending, unbound, not yet judged by the scheduler."""
    return pod(name, None, cpu=cpu, **kw).model_copy(update={"phase": "Pending"})


SUCCESSOR = node("n1-successor", cpu=2000, labels={LABEL_REPLACES: "n1"})
STAYING = node("n2", cpu=2000)
ON_N2 = [pod(f"b{i}", "n2", cpu=500) for i in range(3)]


def test_the_successor_of_a_removed_node_is_not_emptied_while_its_pods_wait_for_the_scheduler() -> None:
    # n1 is gone and its removal reported; its three pods were recreated and are not bound yet.
    pods = [*ON_N2, *(recreated(f"a{i}") for i in range(3))]
    p = plan([SUCCESSOR, STAYING], pods, last_up=0.0)
    assert state(p, "n1-successor") == (NodeState.BLOCKED, PODS_ABOUT_TO_LAND) and removed(p) == []
    # Bound: it is no longer empty. Nothing waiting: a plain empty node again.
    bound = [*ON_N2, *(pod(f"a{i}", "n1-successor", cpu=500) for i in range(3))]
    assert state(plan([SUCCESSOR, STAYING], bound, last_up=0.0), "n1-successor")[0] == NodeState.UTILIZED
    assert removed(plan([SUCCESSOR, STAYING], ON_N2, last_up=0.0)) == ["n1-successor"]


def test_only_a_pod_the_node_would_take_holds_it() -> None:
    empty = node("e", cpu=2000)
    other = node("o", cpu=2000, labels={"zone": "b"})
    too_big = recreated("big", cpu=4000)
    elsewhere = recreated("sel", node_selector={"zone": "b"})
    deleted = recreated("gone").model_copy(update={"deletion_timestamp": datetime(2030, 1, 1, tzinfo=UTC)})
    judged = recreated("judged").model_copy(update={"unschedulable": True})  # the scale-up planner's
    daemon = recreated("ds", is_daemonset=True)
    waiting = awaiting_scheduler([too_big, elsewhere, deleted, judged, daemon, pod("bound", "o")])
    assert [p.name for p in waiting] == ["big", "sel"]
    assert about_to_land(empty, Resources(), waiting) is None
    assert about_to_land(other, Resources(), waiting) is not None  # selector matches, fits
    # Room already taken counts: 1600m used leaves no room for a 500m pod.
    assert about_to_land(empty, Resources(cpu_m=1600), [recreated("p")]) is None
    held = about_to_land(empty, Resources(cpu_m=1000), [recreated("p")])
    assert held is not None and held.pod == "default/p" and held.code == PODS_ABOUT_TO_LAND
    p = plan([empty, other], [too_big, elsewhere, deleted, judged], last_up=0.0)
    assert "e" in removed(p) and state(p, "o") == (NodeState.BLOCKED, PODS_ABOUT_TO_LAND)


def test_a_pod_for_another_scheduler_holds_no_node() -> None:
    """The kube-scheduler never judges a pod whose spec.schedulerName names another scheduler: one
    waiting for a scheduler that is not running held an empty node for good. Read from the pod as
    the API server stores it (the default name is the kube-scheduler's)."""
    empty = node("e", cpu=2000)
    ours, theirs = (
        pod_info({"metadata": {"name": n, "namespace": "default"}, "spec": {"schedulerName": s, "containers": []}})
        for n, s in (("ours", "default-scheduler"), ("theirs", "volcano"))
    )
    assert (ours.scheduler_name, theirs.scheduler_name) == (None, "volcano")
    assert [p.name for p in awaiting_scheduler([ours, theirs])] == ["ours"]
    assert removed(plan([empty], [theirs], last_up=0.0)) == ["e"]
    assert state(plan([empty], [ours, theirs], last_up=0.0), "e") == (NodeState.BLOCKED, PODS_ABOUT_TO_LAND)
