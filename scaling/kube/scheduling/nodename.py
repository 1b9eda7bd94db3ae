"""NodeName: a pod that names its node (spec.nodeName) fits that node only."""

from __future__ import annotations

from scaling.kube.models import NodeInfo
from scaling.kube.scheduling.refusal import Refusal

NAME = "NodeName"
REASON = "node(s) didn't match the requested node name"


def filter(node_name: str | None, node: NodeInfo) -> Refusal | None:
    if node_name and node_name != node.name:
        return Refusal(NAME, REASON, unresolvable=True)
    return None
