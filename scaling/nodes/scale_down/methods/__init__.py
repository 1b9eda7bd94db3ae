"""The removal methods. plan_scale_down walks PLANNED in order and the first whose is_candidate holds
names the removal (as Karpenter's disruption controller walks its methods); a re-check and a running
removal find theirs by kind. A new kind is a new module here and a line below.
"""

from __future__ import annotations

from scaling.nodes.scale_down.methods.base import Candidate, RemovalMethod, Wait
from scaling.nodes.scale_down.methods.consolidated import CONSOLIDATED
from scaling.nodes.scale_down.methods.drifted import DRIFTED
from scaling.nodes.scale_down.methods.empty import EMPTY
from scaling.nodes.scale_down.methods.expired import EXPIRED
from scaling.nodes.scale_down.methods.manual import MANUAL_REMOVAL
from scaling.nodes.scale_down.methods.underused import UNDERUSED
from scaling.nodes.scale_down.models import NodeState

# Empty first: nothing to move, nothing to buy; then the replacements (Karpenter walks drift before
# consolidation); Underused, as it waits its unneeded time; Consolidated last: it buys a successor for
# an underused node only when its pods fit nowhere else.
PLANNED: tuple[RemovalMethod, ...] = (EMPTY, EXPIRED, DRIFTED, UNDERUSED, CONSOLIDATED)
BY_KIND: dict[str, RemovalMethod] = {m.kind: m for m in (*PLANNED, MANUAL_REMOVAL)}
REMOVABLE_NOW = tuple(NodeState(m.kind) for m in PLANNED)  # the plan's states of a node it may remove now

__all__ = ["BY_KIND", "PLANNED", "REMOVABLE_NOW", "Candidate", "RemovalMethod", "Wait", "method_for", "rechecked_as"]


def method_for(kind: str) -> RemovalMethod:
    """The method of a removal's kind; a kind this worker does not know is handled as the loop's
    Underused (re-checked for utilisation, cancelled by any blocker), as before there were methods."""
    return BY_KIND.get(kind, UNDERUSED)


def rechecked_as(require_empty: bool) -> RemovalMethod:
    """The method a re-check applies. Its input says only whether the node must be empty; a Manual
    removal is re-checked as Underused, and its own cancels() then drops what the operator overrides."""
    return EMPTY if require_empty else UNDERUSED
