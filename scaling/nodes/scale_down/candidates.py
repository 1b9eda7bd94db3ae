"""Which nodes to remove, and when (seed 004 steps 8-9 with Cluster Autoscaler's safety rules).

Two kinds of removable node:
- Empty (seed 004): a growth-managed node running only DaemonSet, mirror or finished pods.
  It is selected at once and gets ``scale_down_at = now + unneeded_time_s``: the NodeScaleDown
  workflow taints it and waits on a durable timer, then calls ``still_removable``.
- Underused (Cluster Autoscaler): requested/allocatable (the larger of the cpu and memory
  ratios) below the group's threshold. It must stay unneeded (below the threshold, no blocker,
  its pods fit elsewhere) for ``unneeded_time_s`` before it is selected, with
  ``scale_down_at = now``: the waiting already happened untainted.

A NotReady node waits ``unready_time_s`` (loop-wide, Cluster Autoscaler's
scale-down-unready-time, 20 min) instead of its group's ``unneeded_time_s``, in either kind.

Pods deleted for longer than their grace period plus 30 s (``is_long_terminating``) are
treated as gone on the nodes considered for removal: they do not pin a node, are not moved and
do not count as utilization. On target nodes their requests still count: the scheduler keeps
counting a terminating pod's room until it is gone.

Both wait ``delay_after_add_s`` after the last scale-up, both obey the pool's minNodes, the
group's headroom (a node stays when no other node of its group would hold it once the node's
pods moved; scaling.nodes.headroom) and a per-loop removal limit. Several nodes removed in one
loop are checked together: pods of an earlier node take room on the targets, PDB budgets are
shared, a node being removed is never a target and never counts as the schedulable home of a
Longhorn replica.

Pods that need room elsewhere are those a workload controller recreates (ReplicaSet,
StatefulSet, ReplicationController, Job). A bare pod or a custom-controller pod may only be
evicted with ``safe-to-evict: "true"`` and then is not re-placed: a bare pod is gone after
eviction, and a per-node operator pod (Longhorn's instance-manager) is recreated by its
operator on the nodes that remain.
"""

from __future__ import annotations

from enum import Enum

from pydantic import BaseModel, Field

from scaling.kube.drain import (
    LOCAL_STORAGE,
    MIN_NODES,
    NO_PLACE_TO_MOVE,
    NOT_SAFE_TO_EVICT,
    REPLICATED_KINDS,
    Blocker,
    PdbBudget,
    PdbInfo,
    drain_blockers,
    is_terminal,
    marked_for_deletion,
    node_blockers,
    pod_key,
    pods_by_node,
    pods_on_node,
    pods_to_evict,
    stays_with_node,
    without_long_terminating,
)
from scaling.kube.models import LABEL_INSTANCE_TYPE, NodeInfo, PodInfo, Resources
from scaling.nodes.billing import BILLING_PERIOD, removable_from
from scaling.nodes.headroom import headroom_blocker
from scaling.nodes.matching import pod_fits_node_shape
from scaling.nodes.models import LABEL_GROUP, LABEL_POOL, NodeGroup, Pool, ScaleDownSettings
from scaling.nodes.nodegroups import flatten_pools
from scaling.nodes.scale_down.storage import (
    BACKING_IMAGE_MANAGER,
    LAST_HEALTHY_REPLICA,
    SHARE_MANAGER,
    VOLUME_ATTACHED,
    LonghornState,
    storage_blockers,
)

GROUP_SCALE_DOWN_DISABLED = "ScaleDownDisabledForGroup"
LIMIT_REACHED = "ScaleDownLimitReached"
DESTINATION = "DestinationOfRemovedNode"
UNNEEDED_TIME = "UnneededTimeNotElapsed"
UNREADY_TIME = "UnreadyTimeNotElapsed"
DELAY_AFTER_ADD = "ScaleDownDelayAfterAdd"
NOT_EMPTY = "NodeNotEmpty"
UTILIZED = "NodeUtilized"


class NodeState(str, Enum):
    NOT_MANAGED = "NotManaged"  # no growth group label: never removed by growth
    REMOVING = "Removing"  # a NodeScaleDown is already running for it
    UTILIZED = "Utilized"  # at or above the utilization threshold
    BLOCKED = "Blocked"  # a candidate that something holds; see reasons
    UNNEEDED_WAITING = "UnneededWaiting"  # removable, waiting for a timer; see reasons
    EMPTY = "Empty"  # removable now
    UNDERUSED = "Underused"  # removable now


class ScaleDownLoopSettings(BaseModel):
    """Loop-wide settings; per-group thresholds and timers come from NodeGroup.scale_down."""

    max_removals_per_loop: int = 10
    unready_time_s: float = 1200.0  # how long a NotReady node must be unneeded (CA: 20 min)
    default: ScaleDownSettings = Field(default_factory=ScaleDownSettings)  # unknown groups
    replicated_kinds: list[str] = Field(default_factory=lambda: sorted(REPLICATED_KINDS))


class NodeDecision(BaseModel):
    name: str
    state: NodeState
    group: str | None = None
    pool: str | None = None
    utilization: float = 0.0
    reasons: list[Blocker] = Field(default_factory=list)
    unneeded_since: float | None = None
    removable_at: float | None = None  # UNNEEDED_WAITING: when its timer runs out
    selected: bool = False

    @property
    def reason(self) -> str | None:
        return self.reasons[0].code if self.reasons else None


class NodeRemoval(BaseModel):
    """A node to start removing now (a NodeScaleDown child workflow)."""

    name: str
    group: str
    pool: str | None = None
    kind: NodeState  # EMPTY or UNDERUSED
    scale_down_at: float  # when to delete it (seed 004's ScaleDownAt)
    pods_to_evict: list[str] = Field(default_factory=list)  # "namespace/name"
    destinations: dict[str, str] = Field(default_factory=dict)  # pod -> node it should fit on


class ScaleDownPlan(BaseModel):
    decisions: dict[str, NodeDecision] = Field(default_factory=dict)
    to_remove: list[NodeRemoval] = Field(default_factory=list)
    unneeded_since: dict[str, float] = Field(default_factory=dict)


class ScaleDownInput(BaseModel):
    """Everything plan_scale_down needs, as one value that can cross a workflow boundary."""

    nodes: list[NodeInfo]
    pods: list[PodInfo]
    pdbs: list[PdbInfo] = Field(default_factory=list)
    groups: list[NodeGroup] = Field(default_factory=list)
    storage: LonghornState | None = None
    now: float
    unneeded_since: dict[str, float] = Field(default_factory=dict)
    last_scale_up_at: float | None = None
    protected: list[str] = Field(default_factory=list)
    in_progress: list[str] = Field(default_factory=list)
    settings: ScaleDownLoopSettings = Field(default_factory=ScaleDownLoopSettings)


class FitResult(BaseModel):
    ok: bool
    blocker: Blocker | None = None
    placements: dict[str, str] = Field(default_factory=dict)  # pod -> target node


class RemovalCheck(BaseModel):
    ok: bool
    blockers: list[Blocker] = Field(default_factory=list)


# --- small pure helpers -------------------------------------------------------------------


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
    """Whether an evicted pod comes back and must be placed elsewhere (see module doc)."""
    return pod.controller_kind in replicated_kinds


def is_target(node: NodeInfo, excluded: set[str] | frozenset[str] = frozenset()) -> bool:
    """A node pods may move to: ready, not cordoned, not tainted or chosen for deletion."""
    return node.ready and not node.unschedulable and not marked_for_deletion(node) and node.name not in excluded


def pods_fit_elsewhere(
    pods: list[PodInfo],
    target_nodes: list[NodeInfo],
    used: dict[str, Resources] | None = None,
) -> FitResult:
    """First-fit-decreasing of ``pods`` onto ``target_nodes`` over cpu, memory and pod slots,
    honouring nodeSelector and NoSchedule/NoExecute taints.

    ``used`` is what each target already holds; without it, NodeInfo.requested is used.
    Targets are tried in the order given (callers pass them sorted by name for determinism).
    """
    # Free room is worked out for a target when a pod first tries it: a large cluster has
    # thousands of targets and a few pods to place.
    free: dict[str, Resources] = {}

    def room(n: NodeInfo) -> Resources:
        r = free.get(n.name)
        if r is None:
            taken = used.get(n.name, Resources()) if used is not None else n.requested
            r = free[n.name] = n.allocatable - taken
        return r

    order = sorted(pods, key=lambda p: (-p.requests.cpu_m, -p.requests.memory, p.namespace, p.name))
    placements: dict[str, str] = {}
    for pod in order:
        need = Resources(cpu_m=pod.requests.cpu_m, memory=pod.requests.memory, pods=max(pod.requests.pods, 1))
        for node in target_nodes:
            if can_land(pod, node) and need.fits_in(room(node)):
                free[node.name] = free[node.name] - need
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
        message=f"node {node.name}'s paid period ends in {ends - now:.0f}s: kept for pods until {opens - now:.0f}s from now",
    )


def _group_settings(node: NodeInfo, groups: dict[str, NodeGroup], settings: ScaleDownLoopSettings) -> ScaleDownSettings:
    g = groups.get(node.labels.get(LABEL_GROUP, ""))
    return g.scale_down if g is not None else settings.default


def removal_wait_s(node: NodeInfo, gs: ScaleDownSettings, settings: ScaleDownLoopSettings) -> float:
    """How long a node must stay unneeded before it goes: its group's unneeded time when
    Ready, the loop's unready time when NotReady (Cluster Autoscaler keeps the two apart)."""
    return gs.unneeded_time_s if node.ready else settings.unready_time_s


def _used_by_node(pods: list[PodInfo]) -> dict[str, Resources]:
    requests: dict[str, list[Resources]] = {}
    for p in pods:
        if p.node_name and not is_terminal(p):
            requests.setdefault(p.node_name, []).append(p.requests)
    return {name: Resources.total(rs) for name, rs in requests.items()}


def _after_moves(used: dict[str, Resources], placements: dict[str, str], pods: list[PodInfo]) -> dict[str, Resources]:
    """What each node holds once the placed pods moved to their targets."""
    by_key = {pod_key(p): p for p in pods}
    out = dict(used)
    for pk, dest in placements.items():
        out[dest] = out.get(dest, Resources()) + by_key[pk].requests
    return out


def _individual_blockers(
    node: NodeInfo,
    pods: list[PodInfo],
    pdbs: list[PdbInfo],
    storage: LonghornState | None,
    targets: list[NodeInfo],
    used: dict[str, Resources],
    protected: set[str],
    kinds: frozenset[str],
) -> tuple[list[Blocker], FitResult | None]:
    blockers = node_blockers(node, protected)
    if storage is not None and storage.present:  # (storage_blockers is empty otherwise)
        blockers += storage_blockers(node.name, storage, {t.name for t in targets if t.name != node.name})
    blockers += drain_blockers(node.name, pods, pdbs, replicated_kinds=kinds)
    if blockers:
        return blockers, None
    movers = [p for p in pods_to_evict(node.name, pods) if needs_room(p, kinds)]
    if not movers:  # nothing to place (and no need to copy the target list)
        return [], FitResult(ok=True)
    fit = pods_fit_elsewhere(movers, [t for t in targets if t.name != node.name], used)
    if not fit.ok:
        assert fit.blocker is not None
        return [fit.blocker], fit
    return [], fit


# --- the plan -------------------------------------------------------------------------------


def plan_scale_down(
    nodes: list[NodeInfo],
    pods: list[PodInfo],
    pdbs: list[PdbInfo],
    groups: list[NodeGroup],
    storage: LonghornState | None,
    now: float,
    unneeded_since: dict[str, float],
    last_scale_up_at: float | None,
    protected: set[str],
    in_progress: set[str],
    settings: ScaleDownLoopSettings | None = None,
) -> ScaleDownPlan:
    """One scale-down evaluation: a state per node and the nodes to start removing now."""
    settings = settings or ScaleDownLoopSettings()
    kinds = frozenset(settings.replicated_kinds)
    by_group = {g.name: g for g in groups}
    used = _used_by_node(pods)  # what targets hold, long-terminating pods included
    pods = without_long_terminating(pods, now)
    on_node = pods_by_node(pods)  # each node's own pods: the per-node rules never scan them all
    targets = sorted((n for n in nodes if is_target(n, in_progress)), key=lambda n: n.name)
    plan = ScaleDownPlan()
    ready: list[tuple[NodeDecision, ScaleDownSettings, bool]] = []  # (decision, settings, billed)

    for node in sorted(nodes, key=lambda n: n.name):
        mine = on_node.get(node.name, [])
        dec = NodeDecision(
            name=node.name,
            state=NodeState.NOT_MANAGED,
            group=node.labels.get(LABEL_GROUP),
            pool=pool_of(node),
            utilization=utilization(node, mine),
        )
        plan.decisions[node.name] = dec
        if not is_managed(node):
            continue
        if node.name in in_progress:
            dec.state = NodeState.REMOVING
            continue
        gs = _group_settings(node, by_group, settings)
        if not gs.enabled:
            dec.state = NodeState.BLOCKED
            dec.reasons = [
                Blocker(code=GROUP_SCALE_DOWN_DISABLED, message=f"scale-down is disabled for group {dec.group}")
            ]
            continue
        empty = is_empty(node, mine)
        if not empty and dec.utilization >= gs.utilization_threshold:
            dec.state = NodeState.UTILIZED
            continue
        blockers, _ = _individual_blockers(node, mine, pdbs, storage, targets, used, protected, kinds)
        if blockers:
            dec.state = NodeState.BLOCKED
            dec.reasons = blockers
            continue
        # Unneeded from here on: the timer starts (or keeps running).
        since = unneeded_since.get(node.name, now)
        dec.unneeded_since = since
        plan.unneeded_since[node.name] = since
        wait_s = removal_wait_s(node, gs, settings)
        pool = pool_for(node, groups)
        hold = billing_hold(node, pool, now)
        if hold is not None:  # paid for a while yet: kept untainted, so arriving pods can use it
            dec.state = NodeState.UNNEEDED_WAITING
            dec.removable_at, blocker = hold
            dec.reasons = [blocker]
            continue
        billed = pool is not None and pool.billing is not None and node.created_at is not None
        if not empty and now - since < wait_s:
            left = wait_s - (now - since)
            dec.state = NodeState.UNNEEDED_WAITING
            dec.removable_at = since + wait_s
            code, what = (UNNEEDED_TIME, "unneeded") if node.ready else (UNREADY_TIME, "NotReady and unneeded")
            dec.reasons = [
                Blocker(code=code, message=f"node {node.name} {what} for {now - since:.0f}s, {left:.0f}s to go")
            ]
            continue
        if last_scale_up_at is not None and now - last_scale_up_at < gs.delay_after_add_s:
            left = gs.delay_after_add_s - (now - last_scale_up_at)
            dec.state = NodeState.UNNEEDED_WAITING
            dec.removable_at = last_scale_up_at + gs.delay_after_add_s
            dec.reasons = [
                Blocker(
                    code=DELAY_AFTER_ADD, message=f"last scale-up {now - last_scale_up_at:.0f}s ago, {left:.0f}s to go"
                )
            ]
            continue
        dec.state = NodeState.EMPTY if empty else NodeState.UNDERUSED
        ready.append((dec, gs, billed))

    _select(plan, ready, nodes, on_node, pdbs, groups, storage, now, targets, used, in_progress, settings, kinds)
    return plan


def plan_from_input(inp: ScaleDownInput) -> ScaleDownPlan:
    return plan_scale_down(
        inp.nodes,
        inp.pods,
        inp.pdbs,
        inp.groups,
        inp.storage,
        inp.now,
        inp.unneeded_since,
        inp.last_scale_up_at,
        set(inp.protected),
        set(inp.in_progress),
        inp.settings,
    )


def _select(
    plan: ScaleDownPlan,
    ready: list[tuple[NodeDecision, ScaleDownSettings, bool]],
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
) -> None:
    """Pick nodes in order (empty first, then least utilised), checking them together."""
    by_name = {n.name: n for n in nodes}
    by_group = {g.name: g for g in groups}
    ready.sort(key=lambda d: (d[0].state != NodeState.EMPTY, d[0].utilization, d[0].name))
    pool_size: dict[tuple[str | None, str | None], int] = {}
    for n in nodes:
        if is_managed(n) and n.name not in in_progress:
            key = (n.labels.get(LABEL_GROUP), pool_of(n))
            pool_size[key] = pool_size.get(key, 0) + 1
    budget = PdbBudget(pdbs)
    used = dict(used)
    moved_in: dict[str, list[PodInfo]] = {}
    removed: set[str] = set()

    for dec, gs, billed in ready:
        node = by_name[dec.name]
        if len(plan.to_remove) >= settings.max_removals_per_loop:
            dec.reasons = [
                Blocker(code=LIMIT_REACHED, message=f"at most {settings.max_removals_per_loop} removals per loop")
            ]
            continue
        key = (dec.group, dec.pool)
        minimum = min_nodes_for(node, groups)
        if pool_size.get(key, 0) - 1 < minimum:
            dec.state = NodeState.BLOCKED
            dec.reasons = [
                Blocker(
                    code=MIN_NODES, message=f"pool {dec.pool} of group {dec.group} is at its minimum of {minimum} nodes"
                )
            ]
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
        pdb_block = budget.check(evict)
        if pdb_block is not None:
            blockers.append(pdb_block)
        fit: FitResult | None = None
        if not blockers:
            movers = [p for p in evict if needs_room(p, kinds)]
            fit = pods_fit_elsewhere(movers, left, used)
            if not fit.ok:
                assert fit.blocker is not None
                blockers.append(fit.blocker)
            elif (
                room := headroom_blocker(node, by_group, left, _after_moves(used, fit.placements, movers))
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
        movers_by_key = {pod_key(p): p for p in evict}
        for pk, dest in fit.placements.items():
            pod = movers_by_key[pk]
            used[dest] = used.get(dest, Resources()) + pod.requests
            moved_in.setdefault(dest, []).append(pod)
        removed.add(node.name)
        pool_size[key] = pool_size.get(key, 0) - 1
        dec.selected = True
        # A billed node's wait happened untainted, and its paid period ends within the margin.
        delay = removal_wait_s(node, gs, settings) if dec.state == NodeState.EMPTY and not billed else 0.0
        plan.to_remove.append(
            NodeRemoval(
                name=node.name,
                group=dec.group or "",
                pool=dec.pool,
                kind=dec.state,
                scale_down_at=now + delay,
                pods_to_evict=sorted(pod_key(p) for p in evict),
                destinations=fit.placements,
            )
        )


# --- re-check when the timer fires ----------------------------------------------------------


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
) -> RemovalCheck:
    """Re-check one node right before draining it (the NodeScaleDown timer fired).

    ``in_progress`` are the other nodes being removed (the node itself may be in it). With
    ``require_empty`` (seed 004's empty-node path), any pod that needs evicting cancels it.
    The node is expected to carry the deletion taint by now; that does not block it. With
    ``now``, long-terminating pods are treated as gone (see the module doc).
    """
    settings = settings or ScaleDownLoopSettings()
    used = _used_by_node(pods)
    if now is not None:
        pods = without_long_terminating(pods, now)
    groups = groups or []
    kinds = frozenset(settings.replicated_kinds)
    others_leaving = set(in_progress) - {node.name}
    blockers: list[Blocker] = []
    if not is_managed(node):
        blockers.append(Blocker(code="NotManaged", message=f"node {node.name} has no {LABEL_GROUP} label"))
        return RemovalCheck(ok=False, blockers=blockers)
    gs = _group_settings(node, {g.name: g for g in groups}, settings)
    if not gs.enabled:
        blockers.append(
            Blocker(
                code=GROUP_SCALE_DOWN_DISABLED, message=f"scale-down is disabled for group {node.labels[LABEL_GROUP]}"
            )
        )
    empty = is_empty(node, pods)
    if require_empty and not empty:
        names = ", ".join(pod_key(p) for p in pods_to_evict(node.name, pods))
        blockers.append(Blocker(code=NOT_EMPTY, message=f"node {node.name} now runs pod {names}"))
    elif not empty and utilization(node, pods) >= gs.utilization_threshold:
        blockers.append(
            Blocker(
                code=UTILIZED, message=f"node {node.name} is at or above {gs.utilization_threshold:.0%} utilization"
            )
        )
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
    b, fit = _individual_blockers(node, pods, pdbs, storage, targets, used, set(protected), kinds)
    blockers += b
    if fit is not None and fit.ok:
        movers = [p for p in pods_to_evict(node.name, pods) if needs_room(p, kinds)]
        after = _after_moves(used, fit.placements, movers)
        room = headroom_blocker(node, {g.name: g for g in groups}, targets, after)
        if room is not None:
            blockers.append(room)
    return RemovalCheck(ok=not blockers, blockers=blockers)


# -- the re-check's verdict and the operator's remove-now -----------------------------------

CANCELLED_BY_PODS = "PodsLandedOnNode"
MANUAL = "Manual"  # NodeScaleDownInput.kind of an operator's remove-now
# Removing a node with these would lose data (or a service Longhorn cannot move): even an
# operator's remove-now is refused. Other blockers (utilisation, timers) are the operator's call.
DATA_LOSS_CODES = frozenset(
    {VOLUME_ATTACHED, LAST_HEALTHY_REPLICA, BACKING_IMAGE_MANAGER, SHARE_MANAGER, LOCAL_STORAGE, NOT_SAFE_TO_EVICT}
)


def data_loss_blockers(blockers: list[Blocker]) -> list[Blocker]:
    """The blockers that refuse even an operator's remove-now."""
    return [b for b in blockers if b.code in DATA_LOSS_CODES]


def blocking(kind: str, blockers: list[Blocker]) -> list[Blocker]:
    """The blockers that cancel a removal at its re-check: all of them for the loop's own
    removals, only the data-loss ones for a manual remove-now."""
    return data_loss_blockers(blockers) if kind == MANUAL else list(blockers)


def cancel_code(blocker: Blocker) -> str:
    """The reason a cancelled removal reports for its first blocker."""
    return CANCELLED_BY_PODS if blocker.code == NOT_EMPTY else blocker.code
