"""NodeAffinity: the pod's nodeSelector and required node affinity (terms ORed, a term's
expressions ANDed; scaling.kube.affinity reads them) admit the node's labels. A planned node
has no name yet, so a term on metadata.name never admits it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from scaling.kube.affinity import node_affinity_matches
from scaling.kube.models import NodeInfo, NodeSelectorTerm
from scaling.kube.scheduling.refusal import Refusal

NAME = "NodeAffinity"
REASON = "node(s) didn't match Pod's node affinity/selector"


def admits(
    node_selector: Mapping[str, str], terms: Sequence[NodeSelectorTerm], labels: Mapping[str, str], node_name: str = ""
) -> bool:
    return all(labels.get(k) == v for k, v in node_selector.items()) and node_affinity_matches(terms, labels, node_name)


def filter(node_selector: Mapping[str, str], terms: Sequence[NodeSelectorTerm], node: NodeInfo) -> Refusal | None:
    if admits(node_selector, terms, node.labels, node.name):
        return None
    return Refusal(NAME, REASON, unresolvable=True)
