"""TaintToleration: every NoSchedule and NoExecute taint of the node must be tolerated
(PreferNoSchedule never blocks). An empty key with operator Exists tolerates every taint; an
empty effect matches every effect.

Its score (the default profile's weight 3) counts a node's PreferNoSchedule taints the pod's
tolerations with an empty or PreferNoSchedule effect do not cover, and normalizes the counts over
the feasible nodes, fewest best: 100 - 100 * count // the most (every node 100 when none has one)
(pkg/scheduler/framework/plugins/tainttoleration/taint_toleration.go Score and NormalizeScore,
helper.DefaultNormalizeScore with reverse). A node soft-tainted for deletion thus loses to any
untainted node the pod fits: 300 points against at most 200 from the resource scores."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from scaling.kube.models import NodeInfo, Taint, Toleration
from scaling.kube.scheduling.refusal import Refusal

NAME = "TaintToleration"
BLOCKING = ("NoSchedule", "NoExecute")
PREFERRED = "PreferNoSchedule"
WEIGHT = 3
MAX_NODE_SCORE = 100


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


def preferred_untolerated(tolerations: Sequence[Toleration], taints: Iterable[Taint]) -> int:
    """How many PreferNoSchedule taints the pod does not tolerate (what the plugin's Score counts)."""
    own = [t for t in tolerations if t.effect in ("", PREFERRED)]
    return sum(1 for taint in taints if taint.effect == PREFERRED and not any(tolerates_taint(t, taint) for t in own))


def weighted_scores(counts: Sequence[int]) -> list[int]:
    """The plugin's normalized scores times its weight, for the feasible nodes' ``counts``."""
    most = max(counts, default=0)
    if most == 0:
        return [WEIGHT * MAX_NODE_SCORE] * len(counts)
    return [WEIGHT * (MAX_NODE_SCORE - MAX_NODE_SCORE * c // most) for c in counts]
