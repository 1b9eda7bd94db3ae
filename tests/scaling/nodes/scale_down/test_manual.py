"""The Manual removal method (an operator's remove-now): goes at once, only data loss cancels it."""

from __future__ import annotations

from scaling.kube.drain import LOCAL_STORAGE, MIN_NODES, NOT_SAFE_TO_EVICT, PROTECTED, Blocker
from scaling.nodes.models import ScaleDownSettings
from scaling.nodes.scale_down.methods import Candidate, Wait, method_for
from scaling.nodes.scale_down.methods.manual import MANUAL, MANUAL_REMOVAL
from scaling.nodes.scale_down.methods.underused import UTILIZED
from scaling.nodes.scale_down.storage import LAST_HEALTHY_REPLICA, SHARE_MANAGER, VOLUME_ATTACHED
from tests.scaling.nodes.scale_down.test_candidates import node, pod


def test_manual_is_found_by_its_kind_and_goes_at_once() -> None:
    assert method_for(MANUAL) is MANUAL_REMOVAL
    assert (MANUAL_REMOVAL.kind, MANUAL_REMOVAL.wait, MANUAL_REMOVAL.require_empty) == ("Manual", Wait.NONE, False)


def test_manual_is_checked_as_underused() -> None:
    gs = ScaleDownSettings(utilization_threshold=0.5)
    busy = Candidate(node("n1", cpu=4000), [pod("web", "n1", cpu=3000)])
    assert not MANUAL_REMOVAL.is_candidate(busy, gs) and MANUAL_REMOVAL.why_not(busy, gs).code == UTILIZED


def test_manual_is_cancelled_only_by_data_loss() -> None:
    overridden = [Blocker(code=c, message=c) for c in (UTILIZED, MIN_NODES, PROTECTED, "UnneededTimeNotElapsed")]
    losing = [Blocker(code=c, message=c) for c in (VOLUME_ATTACHED, LAST_HEALTHY_REPLICA, SHARE_MANAGER)]
    losing += [Blocker(code=LOCAL_STORAGE, message="l"), Blocker(code=NOT_SAFE_TO_EVICT, message="s")]
    assert MANUAL_REMOVAL.cancels(overridden) == []
    assert MANUAL_REMOVAL.cancels(overridden + losing) == losing
