"""What the replacing methods (Drifted, Expired) share: which re-check blockers cancel them."""

from __future__ import annotations

from scaling.kube.drain import MIN_NODES, Blocker
from scaling.nodes.scale_down.methods.underused import UTILIZED, WHEN_EMPTY
from scaling.nodes.scale_down.models import GROUP_SCALE_DOWN_DISABLED

# The re-check is the Underused one: what only holds a removal without a successor does not hold
# a replacement (its successor is Ready and in the same group), nor does consolidation being off.
NOT_FOR_REPLACEMENTS = frozenset({UTILIZED, WHEN_EMPTY, MIN_NODES, GROUP_SCALE_DOWN_DISABLED})


def replacement_cancels(blockers: list[Blocker]) -> list[Blocker]:
    return [b for b in blockers if b.code not in NOT_FOR_REPLACEMENTS]
