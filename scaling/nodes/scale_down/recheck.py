"""The re-check when a NodeScaleDown's timer fires (still removable?), and its verdict: which blockers
cancel a removal, and what an operator's remove-now may override.
"""

from __future__ import annotations

from scaling.kube.drain import (
    MIN_NODES,
    NO_PLACE_TO_MOVE,
    Blocker,
    PdbInfo,
    pods_by_node,
    pods_to_evict,
    without_long_terminating,
)
from scaling.kube.models import NodeInfo, PodInfo
from scaling.nodes.headroom import headroom_blocker
from scaling.nodes.models import LABEL_GROUP, NodeGroup
from scaling.nodes.scale_down.checks import (
    after_moves,
    group_settings,
    individual_blockers,
    is_managed,
    is_target,
    min_nodes_for,
    needs_room,
    pods_fit_elsewhere,
    pool_of,
    used_by_node,
)
from scaling.nodes.scale_down.consolidation import consolidating
from scaling.nodes.scale_down.landing import land_removals_first, pods_of_removals
from scaling.nodes.scale_down.methods import Candidate, method_for, rechecked_as
from scaling.nodes.scale_down.methods.empty import CANCELLED_BY_PODS, NOT_EMPTY
from scaling.nodes.scale_down.models import GROUP_SCALE_DOWN_DISABLED, RemovalCheck, ScaleDownLoopSettings
from scaling.nodes.scale_down.storage import LonghornState


def still_removable(
    node: NodeInfo,
    pods: list[PodInfo],
    pdbs: list[PdbInfo],
    storage: LonghornState | None,
    nodes: list[NodeInfo],
    groups: list[NodeGroup] | None = None,
    protected: set[str] | frozenset[str] = frozenset(),
    in_progress: set[str] | frozenset[str] = frozenset(),
    require_empty: bool = False,
    settings: ScaleDownLoopSettings | None = None,
    now: float | None = None,
    moving_with: list[str] | None = None,
) -> RemovalCheck:
    """Re-check one node right before draining it (the NodeScaleDown timer fired).

    ``in_progress`` are the other nodes being removed (the node itself may be in it). With
    ``require_empty`` (seed 004's empty-node path) the node is re-checked as Empty, any pod that
    needs evicting blocking it; without, as Underused (see ``rechecked_as``).
    The node is expected to carry the deletion taint by now; that does not block it. With
    ``now``, long-terminating pods are treated as gone (see the candidates module doc).
    ``moving_with``: the other nodes of its command, drained with it (in ``in_progress`` too): their
    pods are placed first, so the command is checked as a whole, as Karpenter validates a command,
    not each node against the same free room (the successor's, when pods landed on it since the plan).
    The pods still on other nodes tainted for deletion take their room before either, as in the
    evaluation (scale_down.landing, "Removals in progress").
    """
    settings = settings or ScaleDownLoopSettings()
    used = used_by_node(pods)
    if now is not None:
        pods = without_long_terminating(pods, now)
    groups = groups or []
    kinds = frozenset(settings.replicated_kinds)
    others_leaving = (set(in_progress) | set(moving_with or ())) - {node.name}
    blockers: list[Blocker] = []
    if not is_managed(node):
        blockers.append(Blocker(code="NotManaged", message=f"node {node.name} has no {LABEL_GROUP} label"))
        return RemovalCheck(ok=False, blockers=blockers)
    gs = group_settings(node, {g.name: g for g in groups}, settings)
    if not gs.enabled:
        blockers.append(
            Blocker(
                code=GROUP_SCALE_DOWN_DISABLED, message=f"scale-down is disabled for group {node.labels[LABEL_GROUP]}"
            )
        )
    method, candidate = rechecked_as(require_empty), Candidate(node, pods)
    if not method.is_candidate(candidate, gs):
        blockers.append(method.why_not(candidate, gs))
    pool_key = (node.labels.get(LABEL_GROUP), pool_of(node))
    size = sum(
        1
        for n in nodes
        if is_managed(n) and n.name not in others_leaving and (n.labels.get(LABEL_GROUP), pool_of(n)) == pool_key
    )
    if all(n.name != node.name for n in nodes):
        size += 1
    minimum = min_nodes_for(node, groups)
    if size - 1 < minimum:
        blockers.append(Blocker(code=MIN_NODES, message=f"pool {pool_key[1]} is at its minimum of {minimum} nodes"))
    targets = sorted((n for n in nodes if is_target(n, others_leaving | {node.name})), key=lambda n: n.name)
    if removals := pods_of_removals(nodes, pods_by_node(pods), kinds, excluded={node.name, *(moving_with or ())}):
        used = land_removals_first(removals, [], targets, used).used
    command: Blocker | None = None
    if moving_with:
        ahead = [p for peer in moving_with for p in pods_to_evict(peer, pods) if needs_room(p, kinds)]
        placed = pods_fit_elsewhere(ahead, targets, used)
        if placed.ok:
            used = after_moves(used, placed.placements, ahead)
        else:
            command = Blocker(
                code=NO_PLACE_TO_MOVE,
                message=f"the pods of {', '.join(moving_with)}, drained with node {node.name}, have no place to go",
            )
    b, fit = individual_blockers(
        node, pods, pdbs, storage, targets, used, set(protected), kinds, one_at_a_time=consolidating(gs)
    )
    if moving_with and fit is not None and not fit.ok:
        peers = f" once the pods of {', '.join(moving_with)}, drained with it, are placed"
        b = [x.model_copy(update={"message": x.message + peers}) if x is fit.blocker else x for x in b]
    blockers += b
    if command is not None:
        blockers.append(command)
    if fit is not None and fit.ok:
        movers = [p for p in pods_to_evict(node.name, pods) if needs_room(p, kinds)]
        after = after_moves(used, fit.placements, movers)
        room = headroom_blocker(node, {g.name: g for g in groups}, targets, after)
        if room is not None:
            blockers.append(room)
    return RemovalCheck(ok=not blockers, blockers=blockers)


def blocking(kind: str, blockers: list[Blocker]) -> list[Blocker]:
    """The blockers that cancel a removal at its re-check: all of them for the loop's own
    removals, only the data-loss ones for a manual remove-now (its method's cancels)."""
    return method_for(kind).cancels(blockers)


def cancel_code(blocker: Blocker) -> str:
    """The reason a cancelled removal reports for its first blocker."""
    return CANCELLED_BY_PODS if blocker.code == NOT_EMPTY else blocker.code
