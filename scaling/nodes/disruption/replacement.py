"""What a replacement must buy: the scale-up planner (scaling.nodes.scale_up.planning.plan_scale_up, so every
scheduling rule it models holds) asked about the pods of the node to replace, as if they were pending,
with that node, every node leaving and the successors made for those taken away. Pods that fit the other nodes' free room need nothing
new (Karpenter's drift launches replacements only for the pods its scheduling simulation cannot place,
pkg/controllers/disruption/helpers.go SimulateScheduling); the rest get nodes of the node's own group,
from its current spec. A pod the planner cannot place anywhere is a problem: no replacement, the node
keeps serving, and the reason is reported.
"""

from __future__ import annotations

from scaling.kube.models import NodeInfo, PodInfo, Resources
from scaling.nodes.catalogue import catalogue_index
from scaling.nodes.contracts import ReplacementPlan, ScaleDownObservation
from scaling.nodes.disruption.arrival_orders import drain_order_of
from scaling.nodes.disruption.moves import Moves, pods_moving
from scaling.nodes.models import LABEL_GROUP, NodeGroup, ScaleUpPlan, ServerType
from scaling.nodes.scale_down.checks import pool_for
from scaling.nodes.scale_up.approvals import approval_gates
from scaling.nodes.scale_up.demand import memory_first
from scaling.nodes.scale_up.planning import plan_scale_up

PROBLEMS_KEPT = 10  # a report names a few of them, never every pod


def plan_replacement(
    obs: ScaleDownObservation,
    catalogue: list[ServerType],
    node: str,
    leaving: set[str],
    now: float,
    moves: Moves | None = None,
) -> ReplacementPlan:
    """The nodes to make Ready before ``node`` is drained (none when its pods fit elsewhere)."""
    return plan_for_nodes(obs, catalogue, [node], leaving, now, moves)


def plan_for_nodes(
    obs: ScaleDownObservation,
    catalogue: list[ServerType],
    nodes: list[str],
    leaving: set[str],
    now: float,
    moves: Moves | None = None,
) -> ReplacementPlan:
    """The nodes to make Ready before all of ``nodes`` (one group's) are drained: their pods planned
    together beside the rest of the cluster. ``price_before`` is their summed price (None when the
    catalogue does not price one of them). ``moves``: pods_moving's for the same nodes, when the caller
    has it (its nomination scores nodes: a command's plan and drain order read one)."""
    by_name = {n.name: n for n in obs.nodes}
    targets = [by_name[n] for n in nodes if n in by_name]
    if len(targets) != len(nodes) or not targets:
        return ReplacementPlan(found=False)
    group_name = targets[0].labels.get(LABEL_GROUP, "")
    groups = [g for g in obs.groups if g.name == group_name]
    moves = moves if moves is not None else pods_moving(obs, nodes, leaving, now)
    movers, others, staying = moves.movers, moves.others, moves.staying
    prices = catalogue_index(catalogue)
    plan = plan_scale_up([*movers, *staying], others, groups, prices, [])
    if plan.new_nodes and not plan.problems and _orders_differ(movers):
        # Settled largest first, a large-cpu pod may take the one room a large-memory pod fits, and the
        # latter needs a larger successor (the consolidation bench's seed 3: an api in a do-not-disrupt
        # node's 3.1 GiB, the cache a cx32 where a cx22 holds the api). Settled memory first, the plan
        # goes when cheaper and the scheduler follows it in some arrival order the drain can keep (without
        # that check it cycled on the bench: the api went first to the room kept for the cache).
        again = plan_scale_up([*movers, *staying], others, groups, prices, [], settle_order=memory_first)
        if (
            not again.problems
            and successors_price(again, prices) < successors_price(plan, prices)
            and not drain_order_of(obs, catalogue, again.new_nodes, nodes, moves).stranding
        ):
            plan = again
    known = [price_of(t, groups, prices) for t in targets]
    return ReplacementPlan(
        nodes=list(nodes) if len(nodes) > 1 else [],
        price_before=None if None in known else sum(k for k in known if k is not None),
        price_after=successors_price(plan, prices),
        group=group_name,
        group_labels=groups[0].registered_labels if groups else {},
        group_taints=groups[0].registered_taints if groups else [],
        new_nodes=plan.new_nodes,
        gates=approval_gates(plan.new_nodes, {g.name: g for g in groups}, prices),
        pods_fit_existing=plan.pods_fit_existing,
        problems=plan.problems[:PROBLEMS_KEPT],
    )


def _orders_differ(pods: list[PodInfo]) -> bool:
    """Whether settling memory first can place ``pods`` otherwise than largest first (one request
    shape, or shapes in the same order both ways: the same plan, not planned twice)."""
    shapes = {Resources(cpu_m=p.requests.cpu_m, memory=p.requests.memory) for p in pods}
    return sorted(shapes, key=lambda r: -r.size) != sorted(shapes, key=lambda r: (-r.memory, -r.cpu_m))


def successors_price(plan: ScaleUpPlan, prices: dict[tuple[str, str], ServerType]) -> float:
    """What the plan's new nodes cost per hour, each at its first choice's price."""
    return sum(
        t.price_hourly
        for n in plan.new_nodes
        if n.candidates and (t := prices.get((n.candidates[0].provider, n.candidates[0].server_type.lower())))
    )


def price_of(node: NodeInfo, groups: list[NodeGroup], prices: dict[tuple[str, str], ServerType]) -> float | None:
    """A node's catalogue price per hour, from its pool's server type (None: unknown)."""
    pool = pool_for(node, groups)
    known = prices.get((pool.provider, pool.server_type.lower())) if pool is not None else None
    return known.price_hourly if known is not None else None


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
