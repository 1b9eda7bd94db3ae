"""A pool's next node as the scheduler's filters see it, before it exists (Karpenter's
NodeClaim template): the labels node_labels_for gives it, a hostname no node has yet, the
group's taints, and the room for pods after its DaemonSets, extended resources included. A
shape is planned only on pools whose next node every filter admits; the first refusal per
pool is kept, so a pod no pool admits is reported in the scheduler's own words."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

from scaling.kube.models import LABEL_HOSTNAME, NodeInfo, Resources
from scaling.kube.scheduling import framework
from scaling.kube.scheduling.framework import SchedulingState
from scaling.kube.scheduling.noderesources import insufficient
from scaling.nodes.matching import node_labels_for
from scaling.nodes.models import NodeGroup, Pool, ServerType
from scaling.nodes.scale_up.demand import PodShape

# A planned node's hostname: unique, so no running pod is on it (kubernetes.io/hostname is the
# node's name, set when it registers).
NEW_NODE = "<new node>"


def claim_node(group: NodeGroup, pool: Pool, stype: ServerType | None, room: Resources) -> NodeInfo:
    labels = {**node_labels_for(group, pool, stype), LABEL_HOSTNAME: NEW_NODE}
    return NodeInfo(name="", labels=labels, taints=group.template_taints, allocatable=room, ready=True)


def filtered(shape: PodShape) -> bool:
    """The shape needs more than labels and taints to pick a pool (filters beyond those two)."""
    return bool(shape.scheduling or shape.host_ports or shape.requests.extended)


def admitting(shape: PodShape, pools: Sequence[Pool], nodes: Mapping[str, NodeInfo]) -> tuple[list[Pool], Counter[str]]:
    """The pools whose next node every filter admits the shape on (resources: only the extended
    ones; cpu and memory are the packer's), and the first refusal of each other pool."""
    ok: list[Pool] = []
    refused: Counter[str] = Counter()
    for p in pools:
        node = nodes.get(p.name)
        if node is None:
            continue
        reason = refusal(shape, node)
        if reason is None:
            ok.append(p)
        else:
            refused[reason] += 1
    return ok, refused


def refusal(shape: PodShape, node: NodeInfo) -> str | None:
    """The first filter's reason for not admitting the shape on a planned node (None: admitted)."""
    r = framework.filter(shape, shape.scheduling or SchedulingState(), node, resources=False)
    if r is not None:
        return r.reason
    if shape.requests.extended:
        return insufficient(Resources(extended=shape.requests.extended), node.allocatable)
    return None


def extended_per_node(requests: Resources, room: Resources) -> int | None:
    """Pods one node of `room` holds by their extended resources (None: they request none)."""
    if not requests.extended:
        return None
    have = dict(room.extended)
    return min(have.get(k, 0) // q for k, q in requests.extended if q > 0)


def describe_refusals(refused: Counter[str]) -> str:
    """The scheduler's reasons, most pools first, as its "0/N nodes are available" sums them."""
    total = sum(refused.values())
    parts = [f"{n} {reason}" for reason, n in sorted(refused.items(), key=lambda kv: (-kv[1], kv[0]))]
    return f"0/{total} new nodes of the matching pools are available: " + ", ".join(parts)
