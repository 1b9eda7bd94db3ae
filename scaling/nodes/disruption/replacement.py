"""What a replacement must buy: the scale-up planner (scaling.nodes.scale_up.planning.plan_scale_up, so every
scheduling rule it models holds) asked about the pods of the node to replace, as if they were pending,
with that node, every node leaving and the successors made for those taken away. Pods that fit the other nodes' free room need nothing
new (Karpenter's drift launches replacements only for the pods its scheduling simulation cannot place,
pkg/controllers/disruption/helpers.go SimulateScheduling); the rest get nodes of the node's own group,
from its current spec. A pod the planner cannot place anywhere is a problem: no replacement, the node
keeps serving, and the reason is reported.
"""

from __future__ import annotations

from dataclasses import dataclass

from scaling.kube.drain import marked_for_deletion, pod_key, pods_by_node, pods_to_evict, without_long_terminating
from scaling.kube.labels import label_value
from scaling.kube.models import NodeInfo, PodInfo
from scaling.nodes.catalogue import catalogue_index
from scaling.nodes.contracts import ReplacementPlan, ScaleDownObservation
from scaling.nodes.disruption.drift import LABEL_REPLACES
from scaling.nodes.models import LABEL_GROUP, NodeGroup, ServerType
from scaling.nodes.scale_down.checks import needs_room, pool_for, used_by_node
from scaling.nodes.scale_down.landing import awaiting_scheduler, nominated, pods_of_removals
from scaling.nodes.scale_up.approvals import approval_gates
from scaling.nodes.scale_up.planning import plan_scale_up

PROBLEMS_KEPT = 10  # a report names a few of them, never every pod


def plan_replacement(
    obs: ScaleDownObservation, catalogue: list[ServerType], node: str, leaving: set[str], now: float
) -> ReplacementPlan:
    """The nodes to make Ready before ``node`` is drained (none when its pods fit elsewhere)."""
    return plan_for_nodes(obs, catalogue, [node], leaving, now)


def plan_for_nodes(
    obs: ScaleDownObservation, catalogue: list[ServerType], nodes: list[str], leaving: set[str], now: float
) -> ReplacementPlan:
    """The nodes to make Ready before all of ``nodes`` (one group's) are drained: their pods planned
    together beside the rest of the cluster. ``price_before`` is their summed price (None when the
    catalogue does not price one of them)."""
    by_name = {n.name: n for n in obs.nodes}
    targets = [by_name[n] for n in nodes if n in by_name]
    if len(targets) != len(nodes) or not targets:
        return ReplacementPlan(found=False)
    group_name = targets[0].labels.get(LABEL_GROUP, "")
    groups = [g for g in obs.groups if g.name == group_name]
    moves = pods_moving(obs, nodes, leaving, now)
    movers, others, staying = moves.movers, moves.others, moves.staying
    prices = catalogue_index(catalogue)
    plan = plan_scale_up([*movers, *staying], others, groups, prices, [])
    known = [price_of(t, groups, prices) for t in targets]
    return ReplacementPlan(
        nodes=list(nodes) if len(nodes) > 1 else [],
        price_before=None if None in known else sum(k for k in known if k is not None),
        price_after=sum(
            t.price_hourly
            for n in plan.new_nodes
            if n.candidates and (t := prices.get((n.candidates[0].provider, n.candidates[0].server_type.lower())))
        ),
        group=group_name,
        group_labels=groups[0].labels if groups else {},
        group_taints=groups[0].taints if groups else [],
        new_nodes=plan.new_nodes,
        gates=approval_gates(plan.new_nodes, {g.name: g for g in groups}, prices),
        pods_fit_existing=plan.pods_fit_existing,
        problems=plan.problems[:PROBLEMS_KEPT],
    )


@dataclass
class Moves:
    """What draining ``nodes`` moves, and where to: their pods that come back (``movers``), the nodes
    that may take them (``others``), and the pods that stay (``staying``, those about to land bound
    where they land; ``others``' ``requested`` counts them)."""

    movers: list[PodInfo]
    others: list[NodeInfo]
    staying: list[PodInfo]


def pods_moving(obs: ScaleDownObservation, nodes: list[str], leaving: set[str], now: float) -> Moves:
    pods = without_long_terminating(obs.pods, now)
    gone = leaving | set(nodes)
    marked = {n.name for n in obs.nodes if marked_for_deletion(n) and n.name not in gone}
    movers = [
        p.model_copy(update={"node_name": None, "phase": "Pending"})
        for n in nodes
        for p in pods_to_evict(n, pods)
        if needs_room(p)
    ]
    # Another replacement's successors are room for that node's pods, not for these.
    away = leaving | marked
    others = [n for n in obs.nodes if n.name not in gone and not marked_for_deletion(n) and not taken(n, away)]
    staying = [p for p in pods if p.node_name and p.node_name not in gone]
    # Pods the scheduler is about to bind (a replacement just before this one evicted them) take their
    # room first: the empty successor they are meant for is no room for this node's pods. So do the
    # pods still on nodes being drained, but for those whose successors are there (the room left out
    # above is theirs): Karpenter schedules the pods of deleting nodes with a command's own
    # (pkg/controllers/disruption/helpers.go SimulateScheduling), and buys no node for them alone.
    served = {n.labels.get(LABEL_REPLACES) for n in obs.nodes}
    served_by_successor = {n for n in away if label_value(n) in served}
    waiting = [
        *pods_of_removals(obs.nodes, pods_by_node(pods), excluded={*nodes, *served_by_successor}),
        *awaiting_scheduler(pods),
    ]
    if landing := nominated(waiting, others, used_by_node(staying)):
        bound = [p.model_copy(update={"node_name": landing[k]}) for p in waiting if (k := pod_key(p)) in landing]
        taken_by = used_by_node(bound)  # the planner reads a node's room from its `requested`
        others = [
            n.model_copy(update={"requested": n.requested + taken_by[n.name]}) if n.name in taken_by else n
            for n in others
        ]
        staying = [p for p in staying if pod_key(p) not in landing] + bound  # a drained pod moves
    return Moves(movers, others, staying)


def price_of(node: NodeInfo, groups: list[NodeGroup], prices: dict[tuple[str, str], ServerType]) -> float | None:
    """A node's catalogue price per hour, from its pool's server type (None: unknown)."""
    pool = pool_for(node, groups)
    known = prices.get((pool.provider, pool.server_type.lower())) if pool is not None else None
    return known.price_hourly if known is not None else None


def taken(node: NodeInfo, leaving: set[str]) -> bool:
    """Whether ``node`` is a successor made for a node still leaving (its replacement under way)."""
    replaces = node.labels.get(LABEL_REPLACES)
    return replaces is not None and replaces in {label_value(n) for n in leaving}


def saving_refused(plan: ReplacementPlan, min_saving: float) -> str | None:
    """Why a consolidation's successors are not worth buying (None: they save at least ``min_saving``
    of the node's price per hour), or why the scheduler may not follow its plan (``stranding``). A node
    whose price the catalogue does not know is never replaced."""
    if plan.price_before is None:
        return "the node's server type has no price in the catalogue"
    if plan.stranding:
        return plan.stranding
    if plan.price_after <= plan.price_before * (1 - min_saving):
        return None
    return (
        f"successors cost {plan.price_after:.4f}/h against {plan.price_before:.4f}/h: less than {min_saving:.0%} saved"
    )
