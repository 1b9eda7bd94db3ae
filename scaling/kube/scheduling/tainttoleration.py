"""TaintToleration: every NoSchedule and NoExecute taint of the node must be tolerated
(PreferNoSchedule never blocks). An empty key with operator Exists tolerates every taint; an
empty effect matches every effect."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from scaling.kube.models import NodeInfo, Taint, Toleration
from scaling.kube.scheduling.refusal import Refusal

NAME = "TaintToleration"
BLOCKING = ("NoSchedule", "NoExecute")


def tolerates_taint(t: Toleration, taint: Taint) -> bool:
    if t.effect and t.effect != taint.effect:
        return False
    if t.operator == "Exists":
        return not t.key or t.key == taint.key
    return t.key == taint.key and t.value == taint.value


def untolerated(tolerations: Sequence[Toleration], taints: Iterable[Taint]) -> Taint | None:
    """The first blocking taint no toleration covers (None: all tolerated)."""
    for taint in taints:
        if taint.effect in BLOCKING and not any(tolerates_taint(t, taint) for t in tolerations):
            return taint
    return None


def filter(tolerations: Sequence[Toleration], node: NodeInfo) -> Refusal | None:
    taint = untolerated(tolerations, node.taints)
    if taint is None:
        return None
    return Refusal(NAME, f"node(s) had untolerated taint {{{taint.key}: {taint.value}}}", unresolvable=True)
