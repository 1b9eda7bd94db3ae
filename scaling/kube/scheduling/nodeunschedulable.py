"""NodeUnschedulable: a cordoned node (spec.unschedulable) takes only pods that tolerate the
node.kubernetes.io/unschedulable:NoSchedule taint."""

from __future__ import annotations

from collections.abc import Sequence

from scaling.kube.models import NodeInfo, Taint, Toleration
from scaling.kube.scheduling.refusal import Refusal
from scaling.kube.scheduling.tainttoleration import tolerates_taint

NAME = "NodeUnschedulable"
REASON = "node(s) were unschedulable"
TAINT = Taint(key="node.kubernetes.io/unschedulable", effect="NoSchedule")


def filter(tolerations: Sequence[Toleration], node: NodeInfo) -> Refusal | None:
    if node.unschedulable and not any(tolerates_taint(t, TAINT) for t in tolerations):
        return Refusal(NAME, REASON, unresolvable=True)
    return None
