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
