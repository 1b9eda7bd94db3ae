"""The re-check before a drain (still_removable) and its verdict (which blockers cancel a removal;
what an operator's remove-now overrides)."""

from __future__ import annotations

from scaling.kube.drain import LOCAL_STORAGE, MIN_NODES, NO_PLACE_TO_MOVE, PROTECTED, TAINT_TO_BE_DELETED, Blocker
from scaling.kube.models import Taint
from scaling.nodes.scale_down.methods.empty import CANCELLED_BY_PODS, NOT_EMPTY
from scaling.nodes.scale_down.methods.manual import MANUAL, data_loss_blockers
from scaling.nodes.scale_down.methods.underused import UTILIZED
from scaling.nodes.scale_down.recheck import blocking, cancel_code, still_removable
from scaling.nodes.scale_down.storage import VOLUME_ATTACHED, LonghornState, LonghornVolume
from tests.scaling.nodes.scale_down.test_candidates import DELETED_AT, ds, group, node, pod, terminating


def test_still_removable() -> None:
    tainted = node("n1", taints=[Taint(key=TAINT_TO_BE_DELETED, value="1")])
    nodes = [tainted, node("n2")]
    assert still_removable(
        tainted, nodes=nodes, pods=[ds("p", "n1")], pdbs=[], storage=None, in_progress={"n1"}, require_empty=True
    ).ok
    landed = still_removable(tainted, nodes=nodes, pods=[pod("web", "n1")], pdbs=[], storage=None, require_empty=True)
    assert not landed.ok and landed.blockers[0].code == NOT_EMPTY and "default/web" in landed.blockers[0].message
    # Without require_empty a movable pod is fine; a protected node is not.
    assert still_removable(tainted, [pod("web", "n1")], [], None, nodes).ok
    prot = still_removable(tainted, [pod("web", "n1")], [], None, nodes, protected={"n1"})
    assert [b.code for b in prot.blockers] == [PROTECTED]
    # The only other node is leaving too: nowhere to go.
    gone = still_removable(tainted, [pod("web", "n1")], [], None, nodes, in_progress={"n1", "n2"})
    assert [b.code for b in gone.blockers] == [NO_PLACE_TO_MOVE]
    storage = LonghornState(volumes=[LonghornVolume(name="v", state="attached", node="n1")])
    assert [b.code for b in still_removable(tainted, [], [], storage, nodes).blockers] == [VOLUME_ATTACHED]
    g = [group(min_nodes=2)]
    assert [b.code for b in still_removable(tainted, [], [], None, nodes, groups=g).blockers] == [MIN_NODES]


def test_still_removable_treats_long_terminating_pods_as_gone_when_given_now() -> None:
    tainted = node("n1", taints=[Taint(key=TAINT_TO_BE_DELETED, value="1")])
    pods = [terminating("web", "n1")]
    kw = {"nodes": [tainted, node("n2")], "pdbs": [], "storage": None, "in_progress": {"n1"}, "require_empty": True}
    assert still_removable(tainted, pods=pods, now=DELETED_AT + 61, **kw).ok
    early = still_removable(tainted, pods=pods, now=DELETED_AT + 30, **kw)
    assert [b.code for b in early.blockers] == [NOT_EMPTY]


def test_remove_now_is_refused_only_for_data_loss() -> None:
    volume = Blocker(code=VOLUME_ATTACHED, message="v")
    local = Blocker(code=LOCAL_STORAGE, message="l")
    busy = Blocker(code=UTILIZED, message="u")
    assert data_loss_blockers([busy, volume, local]) == [volume, local]
    assert blocking(MANUAL, [busy]) == []
    assert blocking("Empty", [busy]) == [busy]
    assert cancel_code(Blocker(code=NOT_EMPTY, message="pods")) == CANCELLED_BY_PODS
    assert cancel_code(volume) == VOLUME_ATTACHED


def test_a_command_is_rechecked_as_a_whole() -> None:
    """a and b of one command drain together onto the successor s, which has room for one of their
    pods since a pod landed on it after the plan: each node checked alone fits s's whole room, and both
    drained, one pod would have nowhere to go (Karpenter validates a command as a whole)."""
    a, b = (node(n, taints=[Taint(key=TAINT_TO_BE_DELETED, value="1")]) for n in ("a", "b"))
    s = node("s", cpu=2000)
    pods = [pod("a-web", "a", cpu=1200), pod("b-web", "b", cpu=1200), pod("late", "s", cpu=500)]
    kw = {"pods": pods, "pdbs": [], "storage": None, "nodes": [a, b, s], "in_progress": {"a", "b"}}
    serving_b = [a, node("b"), s]
    assert still_removable(a, **{**kw, "nodes": serving_b}).ok  # alone: s's 1500m hold a's 1200m
    whole = still_removable(a, moving_with=["b"], **kw)
    assert [x.code for x in whole.blockers] == [NO_PLACE_TO_MOVE]
    # b's pod took s's room first: a's has none left
    assert (
        whole.blockers[0].message
        == "pod default/a-web fits on no other node once the pods of b, drained with it, are placed"
    )
    # with room for both, the command passes; a peer not yet marked is leaving all the same
    roomy = [a, node("b"), node("s", cpu=4000)]
    assert still_removable(a, **{**kw, "nodes": roomy, "in_progress": {"a"}}, moving_with=["b"]).ok
    # ... and its room is not a's, nor b's pods': with b alone beside a, neither has a place
    only_b = still_removable(a, **{**kw, "nodes": [a, node("b", cpu=8000)], "in_progress": {"a"}}, moving_with=["b"])
    assert [x.code for x in only_b.blockers] == [NO_PLACE_TO_MOVE, NO_PLACE_TO_MOVE]
    assert only_b.blockers[1].message == "the pods of b, drained with node a, have no place to go"


def test_the_pods_of_another_removal_in_progress_take_their_room_first() -> None:
    """b, tainted by another removal, still holds a pod that needs a place: it takes s's room before
    a's pods are fitted (Cluster Autoscaler's planner injects the pods of nodes being drained,
    core/scaledown/planner/planner.go injectOngoingActuation). Once b's pod is evicted (terminating),
    its replacement waits for the scheduler and the room is a's again; an untainted b holds none."""
    a, b = (node(n, taints=[Taint(key=TAINT_TO_BE_DELETED, value="1")]) for n in ("a", "b"))
    s = node("s", cpu=2000)
    pods = [pod("a-web", "a", cpu=1200), pod("b-web", "b", cpu=1200)]
    kw = {"pdbs": [], "storage": None, "nodes": [a, b, s], "in_progress": {"a"}}
    held = still_removable(a, pods=pods, **kw)
    assert [(x.code, x.message) for x in held.blockers] == [
        (NO_PLACE_TO_MOVE, "pod default/a-web fits on no other node")
    ]
    evicted = [pods[0], terminating("b-web", "b", cpu=1200)]
    assert still_removable(a, pods=evicted, **kw).ok
    assert still_removable(a, pods=pods, **{**kw, "nodes": [a, node("b"), s]}).ok
