"""Topology spread over zones and regions: DoNotSchedule constraints on a key other than the
hostname (hostname spread is a per-node limit, scaling.kube.affinity.pod_spreads).

The scheduler lets a pod into a domain (a value of the key) only while that domain's matching
pods, plus this one, exceed the least loaded domain's by at most maxSkew; the domains are
those of the nodes the pod may use. growth shares a shape's pending pods out over the domains
its pools can add nodes in, each pod to the least loaded one (water-filling), and plans each
domain's share as a shape of its own restricted to that domain; a domain whose Ready nodes still
hold room for the shape takes a pod whenever the skew admits it there, before the least loaded
one (that room needs no node). Pods that no such domain may take (the least loaded domain is one
growth cannot add nodes to) are a problem.

Only a shape's first constraint of this kind shares pods out; a second one (zone and region
together) is not modelled.
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Collection, Mapping, Sequence

from scaling.kube.affinity import spread_selects
from scaling.kube.models import NodeInfo, TopologySpread
from scaling.nodes.matching import eligible_pools, labels_admit, node_labels_for
from scaling.nodes.models import NodeGroup, ServerType

SHARE_SEPARATOR = "@"  # a domain's share of a shape is keyed "<shape key>@<domain>"

NodePods = Mapping[str, Sequence[tuple[str, Mapping[str, str]]]]  # node -> (namespace, labels) of its pods


def domain_counts(
    spread: TopologySpread,
    node_selector: Mapping[str, str],
    node_affinity: Sequence,
    nodes: Sequence[NodeInfo],
    node_pods: NodePods,
) -> dict[str, int]:
    """Matching pods per domain, over the nodes that carry the key and that the pod may use
    (nodeAffinityPolicy Honor): every such node's domain is present, with 0 when it has none."""
    counts: dict[str, int] = {}
    for n in nodes:
        domain = n.labels.get(spread.key)
        if domain is None or not labels_admit(node_selector, node_affinity, n.labels, n.name):
            continue
        matching = sum(1 for ns, labels in node_pods.get(n.name, ()) if spread_selects(spread, ns, labels))
        counts[domain] = counts.get(domain, 0) + matching
    return counts


def room_in_domain(spread: TopologySpread, counts: Mapping[str, int], domain: str) -> int | None:
    """How many more pods of the shape the domain takes now (None: no limit)."""
    if not spread.counts_self:  # placing them changes no count: the domain admits all or none
        return None if counts.get(domain, 0) - min(counts.values(), default=0) <= spread.max_skew else 0
    least = min(counts.values(), default=0)
    return max(0, least + spread.max_skew - counts.get(domain, 0))


def share_out(
    counts: Mapping[str, int],
    reachable: Collection[str],
    pending: int,
    spread: TopologySpread,
    room: Mapping[str, int] | None = None,
) -> tuple[dict[str, int], int]:
    """Each pending pod to the least loaded domain growth can add nodes in (ties by name), as
    long as the scheduler would take it there. Returns pods per domain and the pods left over.

    `room`: pods of the shape that Ready nodes' free room holds per domain (PodShape.domain_room).
    A domain with such room takes the next pod whenever the skew admits it there, before the
    least loaded one: the scheduler puts a pod in any domain the skew admits (PodTopologySpread
    scores ScheduleAnyway constraints only; the resource scores choose the node), so once the
    share's earlier pods have lifted the minimum, that room is where it may go without a node
    bought for it (differential seed 12: a spread pod planned a new node in zone a while
    zone c's Ready node had room; the scheduler put it on that node, and the zone a node stayed
    empty)."""
    known = {**{d: 0 for d in reachable}, **counts}
    if not reachable or pending <= 0:
        return {}, max(pending, 0)
    if not spread.counts_self:
        allowed = sorted(d for d in reachable if room_in_domain(spread, known, d) is None)
        return ({allowed[0]: pending}, 0) if allowed else ({}, pending)
    out_of_reach = min((c for d, c in known.items() if d not in reachable), default=None)
    if spread.min_domains is not None and len(known) < spread.min_domains:
        out_of_reach = 0  # fewer domains than minDomains: the scheduler's global minimum is 0
    now = {d: known[d] for d in reachable}
    heap = [(now[d], d) for d in sorted(reachable)]
    heapq.heapify(heap)
    held = {d: n for d, n in sorted((room or {}).items()) if d in now and n > 0}
    share: Counter[str] = Counter()
    placed = 0
    while placed < pending:  # one pod at a time: a few ms for 30,000 pods
        while heap[0][0] != now[heap[0][1]]:
            heapq.heappop(heap)  # a domain a held pod went to: its new entry is further on
        count, domain = heap[0]
        least = count if out_of_reach is None else min(count, out_of_reach)
        if count + 1 - least > spread.max_skew:
            break
        admitted = [(now[d], d) for d in held if now[d] + 1 - least <= spread.max_skew]
        if admitted:
            _, domain = min(admitted)
            held[domain] -= 1
            if not held[domain]:
                del held[domain]
        now[domain] += 1
        if domain == heap[0][1]:
            heapq.heapreplace(heap, (now[domain], domain))
        else:
            heapq.heappush(heap, (now[domain], domain))
        share[domain] += 1
        placed += 1
    return dict(share), pending - placed


def reachable_domains(
    key: str,
    node_selector: Mapping[str, str],
    tolerations: Sequence,
    node_affinity: Sequence,
    groups: Sequence[NodeGroup],
    catalogue: Mapping[tuple[str, str], ServerType],
) -> set[str]:
    """The domains of `key` that pools admitting the pod can add nodes in."""
    out: set[str] = set()
    for g in groups:
        for pool in eligible_pools(node_selector, list(tolerations), g, catalogue, node_affinity=node_affinity):
            labels = node_labels_for(g, pool, catalogue.get((pool.provider, pool.server_type.lower())))
            if key in labels:
                out.add(labels[key])
    return out


def share_key(key: str, domain: str) -> str:
    return f"{key}{SHARE_SEPARATOR}{domain}"


def same_shape(share: str, key: str) -> bool:
    """`share` is the shape `key` or one domain's share of it."""
    return share == key or share.startswith(key + SHARE_SEPARATOR)


def base_key(share: str) -> str:
    """The shape a domain's share belongs to (the key itself when it is not a share)."""
    return share.split(SHARE_SEPARATOR, 1)[0]
