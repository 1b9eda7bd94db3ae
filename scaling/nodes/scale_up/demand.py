"""Pending demand, aggregated so that what crosses history does not grow with the cluster.

The observer groups unschedulable pods into shapes (identical requests, nodeSelector,
tolerations, required node affinity and per-node limits from hostname anti-affinity or spread:
everything the planner reads, never the pods' labels), settles the pods that fit the free room
of Ready nodes (the scheduler will place them), and counts nodes per
(group, pool, instance type). A shape keeps its count and a bounded sample of its pods (for
events, problems and explanations); 30,000 replicas of one Deployment cost one shape.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Sequence

from pydantic import BaseModel, Field

from scaling.kube.affinity import spread_room
from scaling.kube.memo import ReprMemo
from scaling.kube.models import (
    LABEL_INSTANCE_TYPE,
    NodeInfo,
    NodeSelectorTerm,
    PodInfo,
    PodSpread,
    Resources,
    Toleration,
    TopologySpread,
    fit_count,
    vec,
)
from scaling.kube.pods import counts_as_demand
from scaling.nodes.matching import labels_admit, tolerates
from scaling.nodes.models import LABEL_GROUP, LABEL_POOL
from scaling.nodes.scale_up.topology import NodePods, domain_counts, room_in_domain

# Pods named per shape by the observer: enough for events and `explain`, bounded per shape.
SHAPE_SAMPLE = 5
# Shapes returned per loop; the smallest beyond this wait for a later loop (pods_deferred).
MAX_SHAPES = 200


class PodRef(BaseModel):
    namespace: str
    name: str
    uid: str


class PodShape(BaseModel):
    """Pending pods the planner cannot tell apart."""

    key: str
    requests: Resources
    node_selector: dict[str, str] = Field(default_factory=dict)
    tolerations: list[Toleration] = Field(default_factory=list)
    node_affinity: list[NodeSelectorTerm] = Field(default_factory=list)
    spreads: list[PodSpread] = Field(default_factory=list)  # per-node limits (PodInfo.spreads)
    topology_spreads: list[TopologySpread] = Field(default_factory=list)  # zone/region (PodInfo.topology_spreads)
    # Per topology spread: matching pods per domain after settling (scaling.nodes.scale_up.topology).
    domain_counts: list[dict[str, int]] = Field(default_factory=list)
    # Per topology spread: more pods of the shape that Ready nodes' free room in each domain
    # holds, which the skew keeps off it for now (they land once the other domains catch up).
    domain_room: list[dict[str, int]] = Field(default_factory=list)
    count: int
    pods: list[PodRef] = Field(default_factory=list)  # the first `count` pods, or a sample of them


class NodeCount(BaseModel):
    """Nodes of one node group with the same pool and instance-type labels."""

    group: str
    pool: str = ""
    instance_type: str = ""
    count: int = 0


class NodeTally(BaseModel):
    total: int = 0
    groups: list[NodeCount] = Field(default_factory=list)  # growth's nodes only (group label)


class PendingDemand(BaseModel):
    shapes: list[PodShape] = Field(default_factory=list)  # largest first
    unschedulable: int = 0  # pods pending as demand, before settling
    fits_existing: int = 0  # of them, pods that fit the free room of Ready nodes
    fits_existing_pods: list[PodRef] = Field(default_factory=list)  # a sample when observed
    pods_deferred: int = 0  # pods of shapes beyond MAX_SHAPES, planned in a later loop
    nodes: NodeTally = Field(default_factory=NodeTally)
    daemonsets: list[PodShape] = Field(default_factory=list)  # templates: room they take on a new node


def demand_key(pod: PodInfo) -> str:
    """The shape a pending pod belongs to: a digest of everything the planner reads.

    Per-node limits join the digest only when the pod has some, so every other pod keeps the
    key it had before they were read (keys live in recorded histories and in-flight requests)."""
    parts: list = [
        pod.requests.model_dump(),
        sorted(pod.node_selector.items()),
        [t.model_dump() for t in pod.tolerations],
        [t.model_dump() for t in pod.node_affinity],
    ]
    if pod.spreads:
        parts.append([s.model_dump() for s in pod.spreads])
    if pod.topology_spreads:
        parts.append({"topology": [t.model_dump() for t in pod.topology_spreads]})
    # Memoised by the parts' repr, which names them exactly: a burst's pods share a few shapes,
    # and json.dumps with sorted keys, once per pending pod and loop, was most of an
    # observation's CPU at 30,000 pods. The key stays the digest of the sorted JSON (keys live in
    # recorded histories).
    return _KEYS.get(parts, lambda: hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:16])


_KEYS: ReprMemo[str] = ReprMemo(4096)  # a pod's parts -> its key (demand_key)


def _size(shape: PodShape) -> tuple[float, str]:
    # Largest first (first-fit decreasing): cpu and memory on a common scale of 4 GiB per core.
    return (-(shape.requests.cpu_m / 1000 + shape.requests.memory / 2**32), shape.key)


def aggregate_demand(pods: Sequence[PodInfo]) -> list[PodShape]:
    """Unbound pods that count as demand, grouped into shapes (largest first), pods in order."""
    by_key: dict[str, PodShape] = {}
    for p in pods:
        if not counts_as_demand(p) or p.node_name:
            continue  # never demand, or already bound
        key = demand_key(p)
        s = by_key.get(key)
        if s is None:
            s = by_key[key] = PodShape(
                key=key,
                requests=p.requests,
                node_selector=p.node_selector,
                tolerations=p.tolerations,
                node_affinity=p.node_affinity,
                spreads=p.spreads,
                topology_spreads=p.topology_spreads,
                count=0,
            )
        s.count += 1
        s.pods.append(PodRef(namespace=p.namespace, name=p.name, uid=p.uid))
    return sorted(by_key.values(), key=_size)


def tally_nodes(nodes: Sequence[NodeInfo]) -> NodeTally:
    counts: Counter[tuple[str, str, str]] = Counter()
    for n in nodes:
        group = n.labels.get(LABEL_GROUP)
        if group:
            counts[(group, n.labels.get(LABEL_POOL, ""), n.labels.get(LABEL_INSTANCE_TYPE, ""))] += 1
    return NodeTally(
        total=len(nodes),
        groups=[NodeCount(group=g, pool=p, instance_type=t, count=c) for (g, p, t), c in sorted(counts.items())],
    )


def settle_on_existing(
    shapes: list[PodShape], nodes: Sequence[NodeInfo], node_pods: NodePods | None = None
) -> list[PodRef]:
    """Pods that fit the free room of Ready, schedulable nodes are left to the scheduler:
    their shapes' counts drop (largest shapes first); returns the pods settled.

    A shape with per-node limits (hostname anti-affinity, spread) settles on a node only as far
    as the pods already running there allow, which needs `node_pods`; a shape with zone or
    region spread only as far as its domain's skew allows, and gets its domains' counts
    (PodShape.domain_counts) and the room its domains' nodes still hold for it
    (PodShape.domain_room). Without `node_pods` such shapes never settle (conservative: a
    new node is planned rather than a pod left pending)."""
    free: list[tuple[NodeInfo, list[int]]] = []
    for n in nodes:
        room = list(vec(n.allocatable - n.requested))
        # Every pod needs some cpu, memory and a slot: a node out of any has no room at all.
        if n.ready and not n.unschedulable and min(room) > 0:
            free.append((n, room))
    # Pods settled in this pass that count against a per-node limit: node -> limit -> pods.
    placed: dict[str, Counter[PodSpread]] = {}
    settled: list[PodRef] = []
    for s in shapes:
        if s.topology_spreads and node_pods is not None:
            s.domain_counts = [
                domain_counts(t, s.node_selector, s.node_affinity, nodes, node_pods) for t in s.topology_spreads
            ]
        if (s.spreads or s.topology_spreads) and node_pods is None:
            continue
        req = vec(s.requests)
        for node, room in free:
            if s.count == 0:
                break
            n = min(fit_count(req, room), s.count)
            if n <= 0:
                continue
            if not (
                labels_admit(s.node_selector, s.node_affinity, node.labels, node.name)
                and tolerates(s.tolerations, node.taints)
            ):
                continue
            if s.spreads:
                assert node_pods is not None
                extra = placed.setdefault(node.name, Counter())
                limit = spread_room(s.spreads, node_pods.get(node.name, ()), extra)
                n = n if limit is None else min(n, limit)
                if n <= 0:
                    continue
                for t in s.spreads:
                    if t.counts_self:
                        extra[t] += n
            for t, counts in zip(s.topology_spreads, s.domain_counts):
                domain = node.labels.get(t.key)
                limit = None if domain is None else room_in_domain(t, counts, domain)
                n = 0 if domain is None else n if limit is None else min(n, limit)
            if n <= 0:
                continue
            for t, counts in zip(s.topology_spreads, s.domain_counts):
                if t.counts_self:
                    counts[node.labels[t.key]] += n
            for r in range(3):
                room[r] -= req[r] * n
            s.count -= n
            settled.extend(s.pods[:n])
            del s.pods[:n]
        if s.topology_spreads and node_pods is not None and s.count > 0:
            s.domain_room = [_room_by_domain(s, t, free, node_pods, placed) for t in s.topology_spreads]
    return settled


def _room_by_domain(
    s: PodShape,
    spread: TopologySpread,
    free: Sequence[tuple[NodeInfo, list[int]]],
    node_pods: NodePods,
    placed: dict[str, Counter[PodSpread]],
) -> dict[str, int]:
    """Pods of `s` that the free room left on Ready nodes holds, per domain of `spread`: room
    the skew keeps them off now, not room a new node must add (an e2e test saw a 5th node for 4
    spread pods when a Ready node waited for the other zone's nodes). Not reserved: another
    shape may settle there first, and then the next loop plans this one's node."""
    req = vec(s.requests)
    out: dict[str, int] = {}
    for node, room in free:
        domain = node.labels.get(spread.key)
        if domain is None or not (
            labels_admit(s.node_selector, s.node_affinity, node.labels, node.name)
            and tolerates(s.tolerations, node.taints)
        ):
            continue
        n = fit_count(req, room)
        if s.spreads:
            limit = spread_room(s.spreads, node_pods.get(node.name, ()), placed.get(node.name))
            n = n if limit is None else min(n, limit)
        if n > 0:
            out[domain] = out.get(domain, 0) + n
    return out


def observe_demand(
    pods: Sequence[PodInfo],
    nodes: Sequence[NodeInfo],
    *,
    virtual: Sequence[PodInfo] = (),
    sample: int | None = None,
    max_shapes: int | None = None,
    node_pods: NodePods | None = None,
) -> PendingDemand:
    """What the planner needs of the pods and nodes: shapes after settling, counts of nodes.

    `virtual` pods (a group's headroom) are planned like pending pods but are not pods: each is
    a shape of its own keyed by its uid, always named, never deferred, and left out of the
    counts. `sample` bounds the pods named per shape, `max_shapes` the shapes (the observer's
    bounds; in-process callers pass neither and keep every pod). `node_pods`: the pods running
    on each node, for per-node limits (settle_on_existing)."""
    shapes = aggregate_demand(pods)
    unschedulable = sum(s.count for s in shapes)
    virtual_keys = {p.uid for p in virtual}
    for p in virtual:
        shapes.append(
            PodShape(
                key=p.uid,
                requests=p.requests,
                node_selector=p.node_selector,
                tolerations=p.tolerations,
                node_affinity=p.node_affinity,
                count=1,
                pods=[PodRef(namespace=p.namespace, name=p.name, uid=p.uid)],
            )
        )
    shapes.sort(key=_size)  # stable: virtual shapes after real ones of the same size
    settled = [p for p in settle_on_existing(shapes, nodes, node_pods) if p.uid not in virtual_keys]
    shapes = [s for s in shapes if s.count > 0]
    real = [s for s in shapes if s.key not in virtual_keys]
    deferred = 0
    if max_shapes is not None and len(real) > max_shapes:
        keep = {s.key for s in sorted(real, key=lambda s: (-s.count, s.key))[:max_shapes]} | virtual_keys
        deferred = sum(s.count for s in real if s.key not in keep)
        shapes = [s for s in shapes if s.key in keep]
    if sample is not None:
        for s in shapes:
            del s.pods[sample:]
        del settled[sample:]
    return PendingDemand(
        shapes=shapes,
        unschedulable=unschedulable,
        fits_existing=unschedulable - sum(s.count for s in shapes if s.key not in virtual_keys) - deferred,
        fits_existing_pods=settled,
        pods_deferred=deferred,
        nodes=tally_nodes(nodes),
    )
