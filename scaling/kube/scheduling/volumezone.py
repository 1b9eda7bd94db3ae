"""VolumeZone: a bound PV labelled with a zone or region admits only nodes in one of its
values; a node with none of those labels is not constrained (as the scheduler reads it)."""

from __future__ import annotations

from scaling.kube.models import NodeInfo
from scaling.kube.scheduling.refusal import Refusal
from scaling.kube.scheduling.volumes import GA, TOPOLOGY_LABELS, VolumeTopology

NAME = "VolumeZone"
REASON = "node(s) had no available volume zone"


def filter(topology: VolumeTopology, node: NodeInfo) -> Refusal | None:
    if not topology.zones or not any(k in node.labels for k in TOPOLOGY_LABELS):
        return None
    for key, values in topology.zones:
        have = node.labels.get(key, node.labels.get(GA.get(key, key)))
        if have is None or have not in values:
            return Refusal(NAME, REASON, unresolvable=True)
    return None
