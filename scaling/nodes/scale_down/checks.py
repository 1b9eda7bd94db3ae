"""Per-node checks that choosing, selecting and re-checking a removal share: emptiness,
utilization, where evicted pods would land, a node's pool and minimum, its billing hold, and the
blockers that hold one node on its own.
"""

from __future__ import annotations

from collections import ChainMap
from collections.abc import Mapping

from scaling.kube.drain import (
    NO_PLACE_TO_MOVE,
    REPLICATED_KINDS,
    Blocker,
    PdbInfo,
    drain_blockers,
    is_terminal,
    marked_for_deletion,
    node_blockers,
    pod_key,
    pods_on_node,
    pods_to_evict,
    stays_with_node,
)
from scaling.kube.models import LABEL_INSTANCE_TYPE, NodeInfo, PodInfo, Resources
from scaling.nodes.billing import BILLING_PERIOD, removable_from
from scaling.nodes.disruption.do_not_disrupt import do_not_disrupt_blockers
from scaling.nodes.headroom import headroom_blocker
from scaling.nodes.matching import pod_fits_node_shape
from scaling.nodes.models import LABEL_GROUP, LABEL_POOL, NodeGroup, Pool, ScaleDownSettings
from scaling.nodes.nodegroups import flatten_pools
from scaling.nodes.scale_down.models import FitResult, Landing, ScaleDownLoopSettings
from scaling.nodes.scale_down.storage import LonghornState, storage_blockers
from scaling.text import when

NOTHING = Resources()


def is_managed(node: NodeInfo) -> bool:
    return LABEL_GROUP in node.labels


def is_empty(node: NodeInfo, pods: list[PodInfo]) -> bool:
    """Seed 004 step 8: a growth node whose pods are only DaemonSet, mirror or finished ones."""
    return is_managed(node) and all(stays_with_node(p) for p in pods_on_node(node.name, pods))


def requested_on(node_name: str, pods: list[PodInfo]) -> Resources:
    return Resources.total(p.requests for p in pods if p.node_name == node_name and not is_terminal(p))


def _ratio(used: int, alloc: int) -> float:
    if alloc <= 0:
        return 0.0 if used <= 0 else 1.0
    return used / alloc


def utilization(node: NodeInfo, pods: list[PodInfo]) -> float:
    """The larger of the cpu and memory request ratios (DaemonSet pods included, as CA does)."""
    used = requested_on(node.name, pods)
    return max(_ratio(used.cpu_m, node.allocatable.cpu_m), _ratio(used.memory, node.allocatable.memory))


def can_land(pod: PodInfo, node: NodeInfo) -> bool:
    """nodeSelector, required node affinity and hard taints; resources are checked by the caller."""
    return pod_fits_node_shape(pod, node.labels, node.taints, node.name)


def needs_room(pod: PodInfo, replicated_kinds: frozenset[str] = REPLICATED_KINDS) -> bool:
    """Whether an evicted pod comes back and must be placed elsewhere (see the candidates module doc)."""
    return pod.controller_kind in replicated_kinds


def is_target(node: NodeInfo, excluded: set[str] | frozenset[str] = frozenset()) -> bool:
    """A node pods may move to: ready, not cordoned, not tainted or chosen for deletion."""
    return node.ready and not node.unschedulable and not marked_for_deletion(node) and node.name not in excluded


def need_of(pod: PodInfo) -> tuple[int, int, int]:
    """What a pod takes of a node's room in the scale-down fits: cpu, memory and one pod slot at least."""
    return pod.requests.cpu_m, pod.requests.memory, max(pod.requests.pods, 1)


def free_room(node: NodeInfo, used: Mapping[str, Resources] | None) -> list[int]:
    """A node's free cpu, memory and pod slots, from what ``used`` says it holds (without it, its
    ``requested``): plain numbers, which the fits take from."""
    taken = used.get(node.name, NOTHING) if used is not None else node.requested
    a = node.allocatable
    return [a.cpu_m - taken.cpu_m, a.memory - taken.memory, a.pods - taken.pods]


def pods_fit_elsewhere(
    pods: list[PodInfo],
    target_nodes: list[NodeInfo],
    used: dict[str, Resources] | None = None,
    ceiling: tuple[int, int, int] | None = None,
    leaving: str | None = None,
) -> FitResult:
    """First-fit-decreasing of ``pods`` onto ``target_nodes`` over cpu, memory and pod slots (by cpu,
    then by memory when that fails), honouring nodeSelector and NoSchedule/NoExecute taints.

    ``used`` is what each target already holds; without it, NodeInfo.requested is used.
    Targets are tried in the order given (callers pass them sorted by name for determinism).
    ``ceiling``: at least the most free cpu, memory and pod slots any target has (each on its own):
    a pod that needs more fails without a scan (Landing.ceiling). ``leaving``: a target to pass over
    (the node the pods leave: a copy of the target list per candidate cost more than its fit).
    """
    # Largest cpu first, then, when that fails, largest memory first: a cache (500m, 3 GiB) that fits
    # only the one node with 3 GiB left lost it to an api (1 CPU, 2 GiB) placed there first, while the
    # scale-up planner, planning the consolidation, placed both; the re-check cancelled the drain the
    # plan chose, the next loop asked again, every 6 s (the consolidation bench's seed 3).
    by_cpu = sorted(pods, key=lambda p: (-p.requests.cpu_m, -p.requests.memory, p.namespace, p.name))
    fit = _first_fit(by_cpu, target_nodes, used, ceiling, leaving)
    if fit.ok or len(pods) < 2:
        return fit
    by_memory = sorted(pods, key=lambda p: (-p.requests.memory, -p.requests.cpu_m, p.namespace, p.name))
    if by_memory == by_cpu:
        return fit
    again = _first_fit(by_memory, target_nodes, used, ceiling, leaving)
    return again if again.ok else fit


def _first_fit(
    order: list[PodInfo],
    target_nodes: list[NodeInfo],
    used: dict[str, Resources] | None,
    ceiling: tuple[int, int, int] | None,
    leaving: str | None,
) -> FitResult:
    # Free room is worked out for a target when a pod first tries it: a large cluster has
    # thousands of targets and a few pods to place. As plain numbers, and checked before the
    # node's labels and taints: a fit that fails visits every target (pods waiting for the
    # scheduler fill the first ones; scale_down.landing), and most have no room.
    free: dict[str, list[int]] = {}
    placements: dict[str, str] = {}
    for pod in order:
        cpu, mem, slots = need_of(pod)
        some = ceiling is None or (cpu <= ceiling[0] and mem <= ceiling[1] and slots <= ceiling[2])
        for node in target_nodes if some else ():
            if node.name == leaving:
                continue
            room = free.get(node.name)
            if room is None:
                room = free[node.name] = free_room(node, used)
            if cpu <= room[0] and mem <= room[1] and slots <= room[2] and can_land(pod, node):
                room[0], room[1], room[2] = room[0] - cpu, room[1] - mem, room[2] - slots
                placements[pod_key(pod)] = node.name
                break
        else:
            return FitResult(
                ok=False,
                blocker=Blocker(
                    code=NO_PLACE_TO_MOVE,
                    message=f"pod {pod_key(pod)} fits on no other node",
                    pod=pod_key(pod),
                ),
            )
    return FitResult(ok=True, placements=placements)


def pool_of(node: NodeInfo) -> str | None:
    return node.labels.get(LABEL_POOL) or node.labels.get(LABEL_INSTANCE_TYPE)


def pool_for(node: NodeInfo, groups: list[NodeGroup]) -> Pool | None:
    """The pool a node belongs to: its LABEL_POOL value, the flattened pool name; failing that,
    the first pool of its group whose server type is the node's instance-type label."""
    group = next((g for g in groups if g.name == node.labels.get(LABEL_GROUP)), None)
    if group is None:
        return None
    pools = flatten_pools(group)
    name = node.labels.get(LABEL_POOL)
    for pool in pools:
        if name and pool.name == name:
            return pool
    itype = (node.labels.get(LABEL_INSTANCE_TYPE) or "").lower()
    return next((p for p in pools if itype and p.server_type.lower() == itype), None)


def min_nodes_for(node: NodeInfo, groups: list[NodeGroup]) -> int:
    """The minNodes of the pool a node belongs to (0 if unknown)."""
    pool = pool_for(node, groups)
    return pool.min_nodes if pool is not None else 0


def billing_hold(node: NodeInfo, pool: Pool | None, now: float) -> tuple[float, Blocker] | None:
    """When a node of a pool billed per started period is worth removing, and why it waits
    until then (scaling.nodes.billing); None when removing it now saves money."""
    billing = pool.billing if pool is not None else None
    created = node.created_at.timestamp() if node.created_at is not None else None
    opens = removable_from(created, now, billing)
    if opens is None or billing is None:
        return None
    ends = opens + billing.margin_s
    return opens, Blocker(
        code=BILLING_PERIOD,
        message=f"node {node.name}'s paid period ends at {when(ends)}: kept for pods until {when(opens)}",
    )


def group_settings(node: NodeInfo, groups: dict[str, NodeGroup], settings: ScaleDownLoopSettings) -> ScaleDownSettings:
    g = groups.get(node.labels.get(LABEL_GROUP, ""))
    return g.scale_down if g is not None else settings.default


def removal_wait_s(node: NodeInfo, gs: ScaleDownSettings, settings: ScaleDownLoopSettings) -> float:
    """How long a node must stay unneeded before it goes: its group's unneeded time when
    Ready, the loop's unready time when NotReady (Cluster Autoscaler keeps the two apart)."""
    return gs.unneeded_time_s if node.ready else settings.unready_time_s


def used_by_node(pods: list[PodInfo]) -> dict[str, Resources]:
    requests: dict[str, list[Resources]] = {}
    for p in pods:
        if p.node_name and not is_terminal(p):
            requests.setdefault(p.node_name, []).append(p.requests)
    return {name: Resources.total(rs) for name, rs in requests.items()}


def after_moves(used: dict[str, Resources], placements: dict[str, str], pods: list[PodInfo]) -> dict[str, Resources]:
    """What each node holds once the placed pods moved to their targets."""
    by_key = {pod_key(p): p for p in pods}
    out = dict(used)
    for pk, dest in placements.items():
        out[dest] = out.get(dest, Resources()) + by_key[pk].requests
    return out


def headroom_kept(
    node: NodeInfo,
    groups: Mapping[str, NodeGroup],
    targets: list[NodeInfo],
    landing: Landing,
    fit: FitResult,
    pods: list[PodInfo],
) -> Blocker | None:
    """The `Headroom` blocker of ``node`` on its own: no other node of its group would hold the
    headroom once ``node``'s ``pods`` (and those about to land on it) moved as ``fit`` placed them."""
    group = groups.get(node.labels.get(LABEL_GROUP, ""))
    if group is None or group.headroom is None:
        return None
    movers = [*pods, *landing.arriving.get(node.name, [])]
    # Only the destinations change: over the cluster's room, not a copy of it for each waiting node.
    destinations = {d: landing.used.get(d, NOTHING) for d in fit.placements.values()}
    return headroom_blocker(
        node, groups, targets, ChainMap(after_moves(destinations, fit.placements, movers), landing.used)
    )


def individual_blockers(
    node: NodeInfo,
    pods: list[PodInfo],
    pdbs: list[PdbInfo],
    storage: LonghornState | None,
    targets: list[NodeInfo],
    used: dict[str, Resources],
    protected: set[str],
    kinds: frozenset[str],
    check_fit: bool = True,
    one_at_a_time: bool = False,
    landing: Landing | None = None,
) -> tuple[list[Blocker], FitResult | None]:
    """What holds ``node`` on its own; with ``check_fit``, also whether its pods fit on ``targets``
    (a replacement brings its own room). ``one_at_a_time``: PDBs as Karpenter reads them
    (PdbBudget.check), for groups that consolidate as it does. With ``landing``, the pods waiting
    for the scheduler took their room first (its ``used``), and the ones about to land on ``node``
    move with it (scale_down.landing)."""
    blockers = node_blockers(node, protected) + do_not_disrupt_blockers(node, pods)
    if storage is not None and storage.present:  # (storage_blockers is empty otherwise)
        blockers += storage_blockers(node.name, storage, {t.name for t in targets if t.name != node.name})
    blockers += drain_blockers(node.name, pods, pdbs, replicated_kinds=kinds, one_at_a_time=one_at_a_time)
    if blockers or not check_fit:
        return blockers, None
    movers = [p for p in pods_to_evict(node.name, pods) if needs_room(p, kinds)]
    arriving = landing.arriving.get(node.name, []) if landing is not None else []
    if not movers and not arriving:  # nothing to place
        return [], FitResult(ok=True)
    if landing is not None:
        fit = pods_fit_elsewhere(movers + arriving, targets, landing.used, landing.ceiling, leaving=node.name)
    else:
        fit = pods_fit_elsewhere(movers, targets, used, leaving=node.name)
    if not fit.ok:
        assert fit.blocker is not None
        if (
            landing is not None
            and landing.placed
            and pods_fit_elsewhere(movers, targets, landing.before, leaving=node.name).ok
        ):
            return [landing.room_taken(fit.blocker)], fit
        return [fit.blocker], fit
    return [], fit
