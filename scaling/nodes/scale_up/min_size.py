"""Pools below their minNodes get nodes (Cluster Autoscaler's --enforce-node-group-min-size).

A pool's size is its nodes, the in-flight requests on it and the nodes this loop already
planned for it. Each missing node is one PlannedNode pinned to that pool, with no pods and no
requirements: a node of another pool would not raise this pool's count, so there is no
fallback. Pending pods use the new node's room like any node's (the planner counts an
in-flight request's spare room).

Limits hold: the group's maxNodes and the cluster's max nodes. A banned pool or one backing
off is skipped (Cluster Autoscaler skips node groups in backoff too); the next loop tries again.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Sequence

from scaling.kube.models import NodeInfo, Resources
from scaling.nodes.models import InFlightRequest, NodeGroup, PlannedNode, Pool, is_unavailable
from scaling.nodes.nodegroups import flatten_pools
from scaling.nodes.scale_up.demand import NodeCount, NodeTally, tally_nodes


def node_pool(node: NodeCount, pools: Sequence[Pool]) -> str | None:
    """The pool nodes of the group belong to: their pool label, else the first pool whose
    server type is their instance type (how scale-down counts a pool's nodes too)."""
    if node.pool:
        return node.pool
    itype = node.instance_type.lower()
    return next((p.name for p in pools if itype and p.server_type.lower() == itype), None)


def requests_to_reach_min_nodes(
    groups: Sequence[NodeGroup],
    nodes: NodeTally | Sequence[NodeInfo],
    in_flight: Sequence[InFlightRequest],
    planned: Sequence[PlannedNode] = (),
    *,
    unavailable: Collection[tuple[str, str]] = (),
    max_nodes_total: int | None = None,
) -> list[PlannedNode]:
    """The nodes to request so that every pool has at least its minNodes (see module doc)."""
    tally = nodes if isinstance(nodes, NodeTally) else tally_nodes(nodes)
    flat = {g.name: flatten_pools(g) for g in groups}
    per_pool, per_group = _sizes(flat, tally, [*in_flight, *planned])
    total_left = None if max_nodes_total is None else max_nodes_total - tally.total - len(in_flight) - len(planned)

    out: list[PlannedNode] = []
    for group in sorted(groups, key=lambda g: g.name):
        group_left = None if group.max_nodes is None else group.max_nodes - per_group[group.name]
        for pool in flat[group.name]:
            missing = pool.min_nodes - per_pool[(group.name, pool.name)]
            if missing <= 0 or is_unavailable(pool, unavailable):
                continue
            for limit in (group_left, total_left):
                if limit is not None:
                    missing = min(missing, max(limit, 0))
            out.extend(
                PlannedNode(group=group.name, pool=pool.name, candidates=[pool], requirements=Resources(), pod_uids=[])
                for _ in range(missing)
            )
            if group_left is not None:
                group_left -= missing
            if total_left is not None:
                total_left -= missing
    return out


def below_min_nodes(groups: Sequence[NodeGroup], tally: NodeTally, in_flight: Sequence[InFlightRequest]) -> bool:
    """Whether any pool has fewer nodes (in flight counted) than its minNodes: when the loop
    asks the planner even without pending pods. A pool that cannot grow now (banned, at its
    limits) still counts: the planner says so."""
    flat = {g.name: flatten_pools(g) for g in groups}
    per_pool, _ = _sizes(flat, tally, in_flight)
    return any(p.min_nodes > per_pool[(g, p.name)] for g, pools in flat.items() for p in pools)


def _sizes(
    flat: dict[str, list[Pool]], tally: NodeTally, items: Sequence[InFlightRequest | PlannedNode]
) -> tuple[Counter[tuple[str, str]], Counter[str]]:
    """Nodes per (group, pool) and per group: the tally's, plus one per request or planned node."""
    per_pool: Counter[tuple[str, str]] = Counter()
    per_group: Counter[str] = Counter()
    for c in tally.groups:
        per_group[c.group] += c.count
        pool = node_pool(c, flat.get(c.group, []))
        if pool:
            per_pool[(c.group, pool)] += c.count
    for item in items:
        per_group[item.group] += 1
        per_pool[(item.group, item.pool)] += 1
    return per_pool, per_group
