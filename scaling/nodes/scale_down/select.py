"""Selection: of the nodes removable on their own, which to remove in this loop, checked together
(empty first, then least utilised; shared PDB budgets, the groups' disruption budgets, pods of
earlier nodes taking room, minNodes, headroom and the per-loop limit).
"""

from __future__ import annotations

from collections.abc import Mapping

from scaling.kube.drain import MIN_NODES, Blocker, PdbBudget, PdbInfo, pod_key, pods_to_evict
from scaling.kube.models import NodeInfo, PodInfo, Resources
from scaling.nodes.disruption.ledger import BudgetLedger
from scaling.nodes.headroom import headroom_blocker
from scaling.nodes.models import LABEL_GROUP, NodeGroup, ScaleDownSettings
from scaling.nodes.scale_down.checks import (
    after_moves,
    is_managed,
    min_nodes_for,
    needs_room,
    pods_fit_elsewhere,
    pool_of,
    removal_wait_s,
)
from scaling.nodes.scale_down.consolidation import consolidating, select_consolidation
from scaling.nodes.scale_down.methods import PLANNED, RemovalMethod, Wait
from scaling.nodes.scale_down.methods.consolidated import CONSOLIDATED
from scaling.nodes.scale_down.models import (
    FitResult,
    Landing,
    NodeDecision,
    NodeRemoval,
    NodeState,
    ScaleDownLoopSettings,
    ScaleDownPlan,
)
from scaling.nodes.scale_down.storage import LonghornState, storage_blockers

LIMIT_REACHED = "ScaleDownLimitReached"
DESTINATION = "DestinationOfRemovedNode"


def limit_reached(settings: ScaleDownLoopSettings) -> Blocker:
    return Blocker(code=LIMIT_REACHED, message=f"at most {settings.max_removals_per_loop} removals per loop")


def select_removals(
    plan: ScaleDownPlan,
    ready: list[tuple[NodeDecision, ScaleDownSettings, bool, RemovalMethod]],
    nodes: list[NodeInfo],
    on_node: dict[str, list[PodInfo]],
    pdbs: list[PdbInfo],
    groups: list[NodeGroup],
    storage: LonghornState | None,
    now: float,
    targets: list[NodeInfo],
    used: dict[str, Resources],
    in_progress: set[str],
    settings: ScaleDownLoopSettings,
    kinds: frozenset[str],
    spare: list[NodeDecision] | None = None,
    prices: Mapping[str, float] | None = None,
    refused: list[NodeDecision] | None = None,
    landing: Landing | None = None,
) -> None:
    """Pick nodes in order (by method as PLANNED walks them, then least utilised), checking them together;
    then a multi-node consolidation over the Consolidated nodes and ``spare``, which nodes a standing
    refusal holds (``refused``) rejoin (scale_down.consolidation). With ``landing``, ``used`` is its own
    (the room pods waiting for the scheduler take) and the ones about to land on a node move with it
    (scale_down.landing)."""
    by_name = {n.name: n for n in nodes}
    by_group = {g.name: g for g in groups}
    order = {m.kind: i for i, m in enumerate(PLANNED)}
    ready.sort(key=lambda d: (order[d[3].kind], d[0].utilization, d[0].name))
    pool_size: dict[tuple[str | None, str | None], int] = {}
    for n in nodes:
        if is_managed(n) and n.name not in in_progress:
            key = (n.labels.get(LABEL_GROUP), pool_of(n))
            pool_size[key] = pool_size.get(key, 0) + 1
    budget = PdbBudget(pdbs)
    ledger = BudgetLedger(nodes, groups, in_progress, now)
    used = dict(used)
    moved_in: dict[str, list[PodInfo]] = {}
    removed: set[str] = set()
    deferred: list[NodeDecision] = []  # Consolidated: multi-node consolidation first, as Karpenter orders them

    for dec, gs, billed, method in ready:
        node = by_name[dec.name]
        if method is CONSOLIDATED:
            deferred.append(dec)
            continue
        if len(plan.to_remove) >= settings.max_removals_per_loop:
            dec.reasons = [limit_reached(settings)]
            continue
        key = (dec.group, dec.pool)
        minimum = min_nodes_for(node, groups)
        if not method.replaces and pool_size.get(key, 0) - 1 < minimum:
            dec.state = NodeState.BLOCKED
            dec.reasons = [
                Blocker(
                    code=MIN_NODES, message=f"pool {dec.pool} of group {dec.group} is at its minimum of {minimum} nodes"
                )
            ]
            continue
        if (held := ledger.blocker(dec.group or "", method.reason)) is not None:
            # Alone it was removable: its unneeded timer keeps running until the budget allows it.
            dec.state = NodeState.BLOCKED
            dec.reasons = [held]
            continue
        if moved_in.get(node.name):
            # Pods of a node chosen before it are planned to land here: removing it in the
            # same loop would send them somewhere the plan never checked. Next loop.
            dec.reasons = [
                Blocker(code=DESTINATION, message=f"node {node.name} receives pods of a node removed in this loop")
            ]
            continue
        left = [t for t in targets if t.name not in removed and t.name != node.name]
        blockers = storage_blockers(node.name, storage, {t.name for t in left})
        evict = pods_to_evict(node.name, on_node.get(node.name, []))
        pdb_block = budget.check(evict, one_at_a_time=consolidating(gs))
        if pdb_block is not None:
            blockers.append(pdb_block)
        fit: FitResult | None = FitResult(ok=True) if method.replaces else None  # its successor holds the pods
        # An empty node is held while waiting pods would land on it (candidates: about_to_land), so only
        # the pods of removals in progress placed on it move with it.
        coming = (
            []
            if landing is None
            else landing.from_removals(node.name)
            if method.require_empty
            else landing.arriving.get(node.name, [])
        )
        if not blockers and fit is None:
            movers = [p for p in evict if needs_room(p, kinds)] + coming
            fit = pods_fit_elsewhere(movers, left, used, landing.ceiling if landing is not None else None)
            if not fit.ok:
                assert fit.blocker is not None
                blockers.append(fit.blocker)
            elif (
                room := headroom_blocker(node, by_group, left, after_moves(used, fit.placements, movers))
            ) is not None:
                blockers.append(room)
        if blockers:
            # Held by what the nodes chosen before it take; alone it was removable, so its
            # unneeded timer keeps running.
            dec.state = NodeState.BLOCKED
            dec.reasons = blockers
            continue
        assert fit is not None
        budget.consume(evict)
        ledger.count(dec.group or "")
        movers_by_key = {pod_key(p): p for p in [*evict, *coming]}
        for pk, dest in fit.placements.items():
            pod = movers_by_key[pk]
            used[dest] = used.get(dest, Resources()) + pod.requests
            moved_in.setdefault(dest, []).append(pod)
        removed.add(node.name)
        if not method.replaces:
            pool_size[key] = pool_size.get(key, 0) - 1
        dec.selected = True
        # A billed node's wait happened untainted, and its paid period ends within the margin.
        delay = removal_wait_s(node, gs, settings) if method.wait is Wait.AFTER_SELECTION and not billed else 0.0
        evicted = {pod_key(p) for p in evict}  # (the waiting pods are not evicted: not its destinations)
        destinations = {k: d for k, d in fit.placements.items() if k in evicted}
        plan.to_remove.append(NodeRemoval.of(dec, now + delay, evict, destinations))

    singles = select_consolidation(
        plan,
        [*deferred, *(spare or [])],
        by_name,
        on_node,
        by_group,
        storage,
        targets,
        removed | set(moved_in),
        budget,
        ledger,
        now,
        prices,
        refused,
    )
    for dec in singles:  # alone in its group: replaced by itself, as before multi-node consolidation
        if len(plan.to_remove) >= settings.max_removals_per_loop:
            dec.reasons = [limit_reached(settings)]
            continue
        dec.selected = True
        plan.to_remove.append(NodeRemoval.of(dec, now, pods_to_evict(dec.name, on_node.get(dec.name, []))))
