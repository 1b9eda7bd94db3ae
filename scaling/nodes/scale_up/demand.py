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
from collections.abc import Callable, Mapping, Sequence

from pydantic import BaseModel, Field

from scaling.kube.affinity import spread_room
from scaling.kube.memo import ReprMemo
from scaling.kube.models import (
    LABEL_HOSTNAME,
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
from scaling.kube.pods import counts_as_demand, implied_score_requests
from scaling.kube.scheduling import framework
from scaling.kube.scheduling.cluster import Cluster, selector_keys
from scaling.kube.scheduling.framework import SchedulingState
from scaling.kube.scheduling.placed import self_limit, with_placed
from scaling.kube.scheduling.terms import HostPort, PodAffinityTerm, SpreadConstraint
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
    # The scheduler's score reads (PodInfo.score_requests); None: implied by `requests`.
    score_requests: tuple[int, int, int, int] | None = None
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
    # What the scheduler's other filters read (scaling.kube.scheduling), empty for most shapes:
    # the namespace, the labels some selector in play names, host ports, pod (anti-)affinity
    # terms, spread constraints, and the prefilter state against the observed cluster with the
    # hostname pairs left out (a new node runs no pods; bounded however large the cluster).
    namespace: str = ""
    labels: dict[str, str] = Field(default_factory=dict)
    host_ports: list[HostPort] = Field(default_factory=list)
    pod_affinity: list[PodAffinityTerm] = Field(default_factory=list)
    pod_anti_affinity: list[PodAffinityTerm] = Field(default_factory=list)
    spread_constraints: list[SpreadConstraint] = Field(default_factory=list)
    scheduling: SchedulingState | None = None
    # Other pending shapes this one's affinity waits for (they match all its affinity terms),
    # and pending shapes it may not share a node with (anti-affinity either way, host ports).
    affinity_targets: list[str] = Field(default_factory=list)
    conflicts: list[str] = Field(default_factory=list)
    # Pending shapes whose anti-affinity on a key wider than a node (zone) meets this one: it
    # waits until they are placed, so that both are never planned into one domain.
    zone_conflicts: list[str] = Field(default_factory=list)
    unmodelled: list[str] = Field(default_factory=list)  # PodInfo.unmodelled


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


def interpod(pod: PodInfo) -> bool:
    """The pod has terms that other pods' labels decide (pod affinity, anti-affinity, spread)."""
    return bool(pod.pod_affinity or pod.pod_anti_affinity or pod.spread_constraints)


def demand_key(pod: PodInfo, label_keys: frozenset[str] = frozenset(), volumes: object = None) -> str:
    """The shape a pending pod belongs to: a digest of everything the planner reads.

    What only some pods have (per-node limits, extended resources, host ports, pod affinity
    terms, volume topology, score requests other than their requests imply) joins the digest only when present, so every other pod keeps the key
    it had before it was read (keys live in recorded histories and in-flight requests). The
    namespace and labels join only when some selector in play could tell pods apart by them,
    and then only the labels such selectors name (`label_keys`): a pod-template-hash never
    splits a shape."""
    requests = pod.requests.model_dump()
    if not pod.requests.extended:
        del requests["extended"]
    parts: list = [
        requests,
        sorted(pod.node_selector.items()),
        [t.model_dump() for t in pod.tolerations],
        [t.model_dump() for t in pod.node_affinity],
    ]
    if pod.score_requests is not None and pod.score_requests != implied_score_requests(pod.requests):
        parts.append({"score": list(pod.score_requests)})  # pods the scheduler's scores tell apart
    if pod.spreads:
        parts.append([s.model_dump() for s in pod.spreads])
    if pod.topology_spreads:
        parts.append({"topology": [t.model_dump(exclude_none=True) for t in pod.topology_spreads]})
    if pod.host_ports:
        parts.append({"ports": [h.model_dump() for h in pod.host_ports]})
    terms = bool(pod.terms_key) or interpod(pod)
    if pod.terms_key:
        parts.append({"terms": pod.terms_key})
    elif terms:
        parts.append(
            {
                "affinity": [t.model_dump() for t in pod.pod_affinity],
                "anti": [t.model_dump() for t in pod.pod_anti_affinity],
                "spread": [c.model_dump() for c in pod.spread_constraints],
            }
        )
    if label_keys or terms:
        parts.append({"ns": pod.namespace, "labels": sorted(projected(pod, label_keys).items())})
    if volumes:
        parts.append({"volumes": volumes.model_dump()})
    if pod.unmodelled:
        parts.append({"unmodelled": pod.unmodelled})  # type: ignore[attr-defined]
    # Memoised by the parts' repr, which names them exactly: a burst's pods share a few shapes,
    # and json.dumps with sorted keys, once per pending pod and loop, was most of an
    # observation's CPU at 30,000 pods. The key stays the digest of the sorted JSON (keys live in
    # recorded histories).
    return _KEYS.get(parts, lambda: hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:16])


_KEYS: ReprMemo[str] = ReprMemo(4096)  # a pod's parts -> its key (demand_key)


def own_keys(pod: PodInfo) -> set[str]:
    """Label keys the pod's own selectors name."""
    out = {k for t in (*pod.pod_affinity, *pod.pod_anti_affinity) for k in selector_keys(t)}
    for c in pod.spread_constraints:
        if c.selector is not None:
            out.update(k for k, _ in c.selector.match_labels)
            out.update(r.key for r in c.selector.match_expressions)
    return out


def projected(pod: PodInfo, label_keys: frozenset[str]) -> dict[str, str]:
    """The pod's labels that a selector in play names (`label_keys`: label_keys_in_play, which
    holds every pending pod's own selectors' keys)."""
    return {k: v for k, v in pod.labels.items() if k in label_keys}


def label_keys_in_play(pods: Sequence[PodInfo], cluster: Cluster | None) -> frozenset[str]:
    """Label keys any pending pod's selectors or any running pod's anti-affinity names."""
    keys: set[str] = set(cluster.label_keys) if cluster is not None else set()
    seen: set[tuple[int, ...]] = set()
    for p in pods:
        if not (p.pod_affinity or p.pod_anti_affinity or p.spread_constraints):
            continue
        # Pods of one template share their term lists' items: each distinct one is read once.
        # (A term tuple is built once per distinct raw list, so its first item names it.)
        sig = tuple(id(ts[0]) if ts else 0 for ts in (p.pod_affinity, p.pod_anti_affinity, p.spread_constraints))
        if sig not in seen:
            seen.add(sig)
            keys |= own_keys(p)
    return frozenset(keys)


def _size(shape: PodShape) -> tuple[float, str]:
    # Largest first (first-fit decreasing): cpu and memory on a common scale of 4 GiB per core.
    return (-shape.requests.size, shape.key)


def memory_first(shape: PodShape) -> tuple[float, float, str]:
    """Largest memory first: the other order a replacement's plan settles pods in (as the drain's
    re-check, scale_down.checks.pods_fit_elsewhere, tries it) where a large-cpu pod took the one room
    a large-memory pod fits."""
    return (-float(shape.requests.memory), -float(shape.requests.cpu_m), shape.key)


def aggregate_demand(pods: Sequence[PodInfo], cluster: Cluster | None = None) -> list[PodShape]:
    """Unbound pods that count as demand, grouped into shapes (largest first), pods in order.

    With `cluster`, each shape that the scheduler's other filters concern gets their prefilter
    state (PodShape.scheduling) and its relations to the other pending shapes."""
    demand = [p for p in pods if counts_as_demand(p) and not p.node_name]
    keys = label_keys_in_play(demand, cluster)
    by_key: dict[str, PodShape] = {}
    first: dict[str, PodInfo] = {}
    for p in demand:
        vols = None
        if p.pvc_names and cluster is not None:
            vols = framework.volume_topology(p.namespace, p.pvc_names, cluster.volumes) or None
        key = demand_key(p, keys, vols)
        s = by_key.get(key)
        if s is None:
            first[key] = p
            special = interpod(p) or bool(keys)
            s = by_key[key] = PodShape(
                key=key,
                requests=p.requests,
                score_requests=p.score_requests,
                node_selector=p.node_selector,
                tolerations=p.tolerations,
                node_affinity=p.node_affinity,
                spreads=p.spreads,
                topology_spreads=p.topology_spreads,
                count=0,
                namespace=p.namespace if special else "",
                labels=projected(p, keys) if special else {},
                host_ports=p.host_ports,
                pod_affinity=p.pod_affinity,
                pod_anti_affinity=p.pod_anti_affinity,
                spread_constraints=p.spread_constraints,
                unmodelled=p.unmodelled,
            )
        s.count += 1
        s.pods.append(PodRef(namespace=p.namespace, name=p.name, uid=p.uid))
    if cluster is not None:
        for key, s in by_key.items():
            state = framework.prefilter(first[key], cluster)
            s.scheduling = state if state else None
        relate(list(by_key.values()), cluster.namespaces)
    return sorted(by_key.values(), key=_size)


def relate(shapes: Sequence[PodShape], ns_labels: Mapping[str, Mapping[str, str]]) -> None:
    """Each shape's pending affinity targets and the shapes it may not share a node (or, for
    terms on a wider key, a domain) with."""
    # Shapes with labels in play (namespace set) or host ports: the others meet no selector.
    special = [s for s in shapes if s.namespace or s.host_ports]
    for s in special:
        for t in special:
            if t is s:
                continue
            if not (s.namespace and t.namespace):
                if _ports_clash(s, t):
                    s.conflicts.append(t.key)
                continue
            if s.pod_affinity and all(a.selects(t.namespace, t.labels, ns_labels) for a in s.pod_affinity):
                s.affinity_targets.append(t.key)
            repel = [a for a in s.pod_anti_affinity if a.selects(t.namespace, t.labels, ns_labels)]
            repel += [a for a in t.pod_anti_affinity if a.selects(s.namespace, s.labels, ns_labels)]
            if any(a.topology_key == LABEL_HOSTNAME for a in repel) or _ports_clash(s, t):
                s.conflicts.append(t.key)
            if any(a.topology_key != LABEL_HOSTNAME for a in repel):
                s.zone_conflicts.append(t.key)


def _ports_clash(a: PodShape, b: PodShape) -> bool:
    from scaling.kube.scheduling.nodeports import any_conflict

    return bool(a.host_ports and b.host_ports) and any_conflict(a.host_ports, b.host_ports)


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
    shapes: list[PodShape], nodes: Sequence[NodeInfo], node_pods: NodePods | None = None, cluster: Cluster | None = None
) -> list[PodRef]:
    """Pods that fit the free room of Ready, schedulable nodes are left to the scheduler:
    their shapes' counts drop (largest shapes first); returns the pods settled.

    A node takes a shape's pods only where every scheduler filter admits it (taints, node
    affinity, host ports, volumes, spread, pod affinity and anti-affinity: `cluster` holds what
    they read) and as many as its room, extended resources included, holds; pods the shape
    places itself count against its own spread and (anti-)affinity as they are placed, as the
    scheduler's AddPod does. Per-node limits (PodSpread) and zone spreads keep their own counts
    too, and a zone-spread shape gets its domains' counts (PodShape.domain_counts) and the room
    its domains' nodes still hold for it (PodShape.domain_room). Without `node_pods` such shapes
    never settle (conservative: a new node is planned rather than a pod left pending)."""
    free: list[tuple[NodeInfo, list[int]]] = []
    for n in nodes:
        room = list(vec(n.allocatable - n.requested))
        # Every pod needs some cpu, memory and a slot: a node out of any has no room at all.
        if n.ready and not n.unschedulable and min(room) > 0:
            free.append((n, room))
    # Pods settled in this pass that count against a per-node limit: node -> limit -> pods.
    placed: dict[str, Counter[PodSpread]] = {}
    views: dict[str, NodeInfo] = {}  # nodes whose requested or host ports changed in this pass
    settled: list[PodRef] = []
    for s in shapes:
        if s.topology_spreads and node_pods is not None:
            s.domain_counts = [
                domain_counts(t, s.node_selector, s.node_affinity, nodes, node_pods) for t in s.topology_spreads
            ]
        if (s.spreads or s.topology_spreads) and node_pods is None:
            continue
        if (needs_cluster(s) and cluster is None) or s.unmodelled:
            continue  # unmodelled: whether a node takes it is not growth's to say (reported)
        state = s.scheduling or SchedulingState()
        req = vec(s.requests)
        for node, room in free:
            if s.count == 0:
                break
            n = min(fit_count(req, room), s.count)
            if n <= 0:
                continue
            view = views.get(node.name, node)
            if s.requests.extended:
                n = min(n, extended_fit(s.requests, view.allocatable - view.requested))
            if n <= 0 or framework.filter(s, state, view, resources=False) is not None:
                continue
            limit = self_limit(s, state, view)
            n = n if limit is None else min(n, limit)
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
            if s.requests.extended or s.host_ports:
                views[node.name] = view.model_copy(
                    update={
                        "requested": view.requested
                        + Resources(extended=tuple((k, q * n) for k, q in s.requests.extended)),
                        "host_ports": [*view.host_ports, *s.host_ports],
                    }
                )
            if s.scheduling:
                state = with_placed(s, state, view, n)
            s.count -= n
            settled.extend(s.pods[:n])
            del s.pods[:n]
        if s.scheduling is not None:
            # The pods settled here are placed as far as the rest are concerned (the scheduler's
            # AddPod, before they are bound): a zone anti-affine pod's new node avoids their zones.
            s.scheduling = state
        if s.topology_spreads and node_pods is not None and s.count > 0:
            s.domain_room = [_room_by_domain(s, t, free, node_pods, placed) for t in s.topology_spreads]
    return settled


def needs_cluster(s: PodShape) -> bool:
    """The shape's filters read other pods or volumes: it settles only against a Cluster."""
    return bool(s.pod_affinity or s.pod_anti_affinity or s.spread_constraints)


def extended_fit(requests: Resources, free: Resources) -> int:
    """How many pods requesting `requests` the extended resources of `free` hold."""
    have = dict(free.extended)
    return min((have.get(k, 0) // q for k, q in requests.extended if q > 0), default=1 << 30)


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
    # Every filter but the spread: its skew is what keeps them off for now.
    unskewed = s.scheduling.model_copy(update={"spread": None}) if s.scheduling else None
    for node, room in free:
        domain = node.labels.get(spread.key)
        if domain is None or not (
            labels_admit(s.node_selector, s.node_affinity, node.labels, node.name)
            and tolerates(s.tolerations, node.taints)
        ):
            continue
        if unskewed is not None and framework.filter(s, unskewed, node, resources=False) is not None:
            continue
        n = fit_count(req, room)
        if s.spreads:
            limit = spread_room(s.spreads, node_pods.get(node.name, ()), placed.get(node.name))
            n = n if limit is None else min(n, limit)
        if n > 0:
            out[domain] = out.get(domain, 0) + n
    return out


def for_new_nodes(state: SchedulingState) -> SchedulingState:
    """The state without the hostname pairs: a new node runs no pods, so they never decide for
    one, and they would grow with the cluster."""
    update: dict = {}
    if state.affinity is not None:
        update["affinity"] = state.affinity.without(LABEL_HOSTNAME)
    if state.spread is not None:
        update["spread"] = state.spread.without(LABEL_HOSTNAME)
    return state.model_copy(update=update)


def observe_demand(
    pods: Sequence[PodInfo],
    nodes: Sequence[NodeInfo],
    *,
    virtual: Sequence[PodInfo] = (),
    sample: int | None = None,
    max_shapes: int | None = None,
    node_pods: NodePods | None = None,
    cluster: Cluster | None = None,
    order: Callable[[PodShape], tuple[float | str, ...]] = _size,
) -> PendingDemand:
    """What the planner needs of the pods and nodes: shapes after settling, counts of nodes.

    `virtual` pods (a group's headroom) are planned like pending pods but are not pods: each is
    a shape of its own keyed by its uid, always named, never deferred, and left out of the
    counts. `sample` bounds the pods named per shape, `max_shapes` the shapes (the observer's
    bounds; in-process callers pass neither and keep every pod). `node_pods`: the pods running
    on each node, for per-node limits (settle_on_existing); `cluster`: nodes, running pods,
    namespaces and volumes for the scheduler's filters (derived node_pods when those are not
    given); `order`: the order shapes settle in (largest first; memory_first)."""
    if cluster is not None and node_pods is None:
        node_pods = {n: [(p.namespace, p.labels) for p in ps] for n, ps in cluster.pods.items()}
    shapes = aggregate_demand(pods, cluster)
    unschedulable = sum(s.count for s in shapes)
    virtual_keys = {p.uid for p in virtual}
    for p in virtual:
        shapes.append(
            PodShape(
                key=p.uid,
                requests=p.requests,
                score_requests=p.score_requests,
                node_selector=p.node_selector,
                tolerations=p.tolerations,
                node_affinity=p.node_affinity,
                count=1,
                pods=[PodRef(namespace=p.namespace, name=p.name, uid=p.uid)],
            )
        )
    shapes.sort(key=order)  # stable: virtual shapes after real ones of the same size
    settled = [p for p in settle_on_existing(shapes, nodes, node_pods, cluster) if p.uid not in virtual_keys]
    for sh in shapes:
        if sh.scheduling is not None:
            sh.scheduling = for_new_nodes(sh.scheduling)
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
