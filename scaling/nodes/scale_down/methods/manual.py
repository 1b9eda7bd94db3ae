"""Manual: an operator's remove-now (the loop's remove_node update). It is checked as an Underused
removal, goes at once, and only a blocker that would lose data (or a service Longhorn cannot move)
cancels it: utilisation, timers and the rest are the operator's call."""

from __future__ import annotations

from scaling.kube.drain import LOCAL_STORAGE, NOT_SAFE_TO_EVICT, Blocker
from scaling.nodes.scale_down.methods.base import Wait
from scaling.nodes.scale_down.methods.underused import Underused
from scaling.nodes.scale_down.storage import BACKING_IMAGE_MANAGER, LAST_HEALTHY_REPLICA, SHARE_MANAGER, VOLUME_ATTACHED

MANUAL = "Manual"
DATA_LOSS_CODES = frozenset(
    {VOLUME_ATTACHED, LAST_HEALTHY_REPLICA, BACKING_IMAGE_MANAGER, SHARE_MANAGER, LOCAL_STORAGE, NOT_SAFE_TO_EVICT}
)


def data_loss_blockers(blockers: list[Blocker]) -> list[Blocker]:
    """The blockers that refuse even an operator's remove-now."""
    return [b for b in blockers if b.code in DATA_LOSS_CODES]


class Manual(Underused):
    kind = MANUAL
    wait = Wait.NONE
    reason = None  # an operator's call: budgets and do-not-disrupt do not hold it (as Karpenter's manual delete)

    def cancels(self, blockers: list[Blocker]) -> list[Blocker]:
        return data_loss_blockers(blockers)


MANUAL_REMOVAL = Manual()
