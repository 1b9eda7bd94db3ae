"""A consolidation goes only where the kube-scheduler will follow it, in the order the drain brings the pods.

The plan (scaling.nodes.disruption.replacement) packs the drained nodes' pods into the other nodes'
room and its successors first fit. The scheduler binds each recreated pod to the emptiest node that
admits it (scaling.kube.scheduling.arrivals), in the order the drain's evictions bring them: a pod
the plan put on a successor may take room on a kept node that another pod was planned into, and
that one waits. Consolidation is optional, so a command some order strands is not made: the pod
would go pending, a scale-up would buy for it, and the next evaluation would consolidate again
(the consolidation bench cycled so for 600 s with a first-fit plan). When every order places them,
the drain evicts as it always does; when only some do, the plan names one (``DrainOrder.order``)
and the NodeReplacement evicts in it, each pod once the one before is bound again
(workflows/nodes/replacement.py); when none does, a consolidation is not made. Drift and expiry are
not optional; their plans are made whatever the order (a stranded pod is a scale-up's).

The successors' room is their pool's allocatable less the DaemonSet pods the first drained node
runs (a new node of the group runs the same ones).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from scaling.kube.drain import is_terminal, pod_key, stays_with_node
from scaling.kube.models import PodInfo
from scaling.kube.scheduling.arrivals import placing_order, stranded
from scaling.nodes.catalogue import catalogue_index
from scaling.nodes.contracts import ReplacementPlan, ScaleDownObservation
from scaling.nodes.disruption.moves import Moves, pods_moving
from scaling.nodes.matching import node_allocatable
from scaling.nodes.models import PlannedNode, ServerType
from scaling.nodes.scale_down.arrivals import target
from scaling.nodes.scale_down.checks import can_land, is_target
from scaling.nodes.scale_up.claims import claim_node


@dataclass(frozen=True)
class DrainOrder:
    """``stranding``: why the scheduler may leave a moved pod without a node in every order ("" when
    some order places them all, or the play could not finish); ``order``: the pods' keys in the
    order that places them all when some other order does not ([]: any order does)."""

    stranding: str = ""
    order: list[str] = field(default_factory=list)


def drain_order(
    obs: ScaleDownObservation,
    catalogue: list[ServerType],
    plan: ReplacementPlan,
    nodes: list[str],
    leaving: set[str],
    now: float,
    moves: Moves | None = None,
) -> DrainOrder:
    """The order to drain the pods ``plan`` moves from ``nodes`` in, or why none will do (``moves``:
    pods_moving's for them, when the caller has it)."""
    return drain_order_of(
        obs, catalogue, plan.new_nodes, nodes, moves if moves is not None else pods_moving(obs, nodes, leaving, now)
    )


def drain_order_of(
    obs: ScaleDownObservation, catalogue: list[ServerType], new_nodes: list[PlannedNode], nodes: list[str], moves: Moves
) -> DrainOrder:
    """``drain_order`` for successors ``new_nodes`` and what draining ``nodes`` moves (``moves``)."""
    if moves.displaced:  # the pods of a removal under way (or pending ones) need these nodes' room first
        pod = moves.displaced[0]
        return DrainOrder(
            f"pod {pod_key(pod)}, about to land, has room on no node but {pod.node_name}, which it would "
            "take while this command makes its successors: the command waits until the pod is bound"
        )
    if not moves.movers:
        return DrainOrder()
    on: dict[str, list[PodInfo]] = {}
    for p in moves.staying:
        if not is_terminal(p) and p.node_name:
            on.setdefault(p.node_name, []).append(p)
    targets = [target(n, on.get(n.name, [])) for n in moves.others if is_target(n)]
    prices = catalogue_index(catalogue)
    groups = {g.name: g for g in obs.groups}
    daemons = [p for p in obs.pods if p.node_name == nodes[0] and p.is_daemonset and stays_with_node(p)]
    for i, new in enumerate(new_nodes):
        group = groups.get(new.group)
        pool = next((c for c in new.candidates if c.name == new.pool), new.candidates[0] if new.candidates else None)
        if group is None or pool is None:
            return DrainOrder()
        stype = prices.get((pool.provider, pool.server_type.lower()))
        if stype is None:
            return DrainOrder()
        node = claim_node(group, pool, stype, node_allocatable(pool, stype)).model_copy(
            update={"name": f"{nodes[0]}-successor-{i}"}
        )
        targets.append(target(node, daemons))
    play = stranded(moves.movers, targets, can_land)
    if play.stranded is None:
        return DrainOrder()
    if (order := placing_order(moves.movers, targets, can_land)) is not None:
        return DrainOrder(order=[pod_key(p) for p in order])
    pod = pod_key(play.stranded)
    before = ", ".join(pod_key(p) for p in play.order[:-1])
    if not before:  # the plan counted room the scheduler does not see (a node not Ready or cordoned)
        return DrainOrder(f"the scheduler finds no node for pod {pod}")
    return DrainOrder(
        f"the scheduler may leave pod {pod} without a node, and no order of evictions places every pod: "
        f"should {before} arrive first, each goes to the emptiest node that holds it (LeastAllocated), "
        f"taking the room planned for {pod}"
    )


def with_stranding(
    obs: ScaleDownObservation,
    catalogue: list[ServerType],
    plan: ReplacementPlan,
    node: str,
    leaving: set[str],
    now: float,
    moves: Moves | None = None,
) -> ReplacementPlan:
    """A single node's plan with its ``stranding`` (which only a consolidation reads: saving_refused) and
    the order to drain it in."""
    if not plan.found or plan.problems:
        return plan
    d = drain_order(obs, catalogue, plan, [node], leaving, now, moves)
    return plan.model_copy(update={"stranding": d.stranding, "drain_order": d.order})
