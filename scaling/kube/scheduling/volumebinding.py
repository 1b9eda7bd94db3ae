"""VolumeBinding: a bound claim's PersistentVolume must admit the node by its required node
affinity; an unbound WaitForFirstConsumer claim can be provisioned only where its class's
allowedTopologies admit the node (dynamic provisioning; growth does not match unbound claims
to static PVs). A missing claim, an unbound Immediate claim or a bound PV that does not exist
refuses every node."""

from __future__ import annotations

from scaling.kube.affinity import node_affinity_matches
from scaling.kube.models import NodeInfo
from scaling.kube.scheduling.refusal import Refusal
from scaling.kube.scheduling.volumes import VolumeTopology

NAME = "VolumeBinding"
NODE_CONFLICT = "node(s) had volume node affinity conflict"
BIND_CONFLICT = "node(s) didn't find available persistent volumes to bind"


def filter(topology: VolumeTopology, node: NodeInfo) -> Refusal | None:
    if topology.problem:
        return Refusal(NAME, topology.problem, unresolvable=True)
    for terms in topology.node_affinity:
        if not node_affinity_matches(terms, node.labels, node.name):
            return Refusal(NAME, NODE_CONFLICT, unresolvable=True)
    for terms in topology.provisioning:
        if not node_affinity_matches(terms, node.labels, node.name):
            return Refusal(NAME, BIND_CONFLICT, unresolvable=True)
    return None
