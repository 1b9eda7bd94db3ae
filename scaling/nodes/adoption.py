"""Nodes Cluster Autoscaler made, adopted into the pool migrated from their CA node group.

A pool written by `growth nodes migrate-from-ca` names its CA group (`config.ca_node_group`).
CA's Hetzner provider makes a group's servers as hetzner_node_group.go createServer does: named
`<group>-<rand.Int63() in hex>` (newNodeName) and labelled `hcloud/node-group=<group>`; the Node
is the server's hostname with providerID `hcloud://<id>`, and CA's template labels carry
`hcloud/node-group` too (buildNodeGroupLabels), which users often put on the Node as well. A
Node without growth's group label that shows either mark is read as a node of that pool: counted
against its min/max, scaled down by its group's rules (its server deleted by provider id), and
never planned again. Machine GC never deletes such a server (scaling.nodes.gc.leaks). Pure.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from scaling.kube.models import NodeInfo
from scaling.nodes.models import LABEL_GROUP, LABEL_POOL, NodeGroup
from scaling.nodes.nodegroups import flatten_pools

CA_NODE_GROUP_LABEL = "hcloud/node-group"  # CA's nodeGroupLabel (hetzner_cloud_provider.go)
CA_PROVIDER_ID_PREFIX = "hcloud://"
_CA_SUFFIX = re.compile(r"-[0-9a-f]{1,16}")  # "-%x" of a non-negative int63


def ca_group_of(node: NodeInfo) -> str | None:
    """The CA node group a Node says it belongs to: its label, else its name when CA named it."""
    label = node.labels.get(CA_NODE_GROUP_LABEL)
    if label:
        return label
    if not node.provider_id.startswith(CA_PROVIDER_ID_PREFIX):
        return None
    head, dash, tail = node.name.rpartition("-")
    if dash and head and _CA_SUFFIX.fullmatch(f"-{tail}"):
        return head
    return None


def adopt_nodes(nodes: Sequence[NodeInfo], groups: Sequence[NodeGroup]) -> list[NodeInfo]:
    """`nodes`, those CA made for a migrated group labelled as the pool's own (a copy each)."""
    pools = {
        str(p.config["ca_node_group"]).lower(): p
        for g in groups
        for p in flatten_pools(g)
        if isinstance(p.config.get("ca_node_group"), str)
    }
    if not pools:
        return list(nodes)
    out = []
    for node in nodes:
        ca_group = None if LABEL_GROUP in node.labels else ca_group_of(node)
        pool = pools.get(ca_group.lower()) if ca_group else None
        if pool is None:
            out.append(node)
            continue
        out.append(node.model_copy(update={"labels": {**node.labels, LABEL_GROUP: pool.group, LABEL_POOL: pool.name}}))
    return out
