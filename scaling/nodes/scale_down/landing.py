"""Nodes pods are about to land on: never removed while the scheduler is about to use them.

A node looks empty from the moment the pods meant for it exist until the scheduler binds them:
a replacement's successor once its predecessor's pods were evicted (their controller recreates
them unbound), a node just Ready after a scale-up. Removing it then strands the pods (and, for a
successor, leaves the replaced node's work with nowhere to run). The real systems hold such a node:
Karpenter skips a disruption candidate "nominated for a pending pod"
(kubernetes-sigs/karpenter pkg/controllers/disruption/types.go NewCandidate), and Cluster
Autoscaler places the pending pods that fit existing nodes before it simulates a scale-down
(core/static_autoscaler.go, filterOutSchedulable).

The pods counted are the ones the scheduler has not judged yet (pending, unbound, not being
deleted, no Unschedulable condition): the ones it judged are the scale-up planner's, and a loop
whose pending pods fit existing nodes runs no scale-down step at all (scaling.nodes.loop).
DaemonSet and mirror pods never make a node non-empty, so they hold nothing here either; nor do
pods for another scheduler (spec.schedulerName): the kube-scheduler never judges them, so one
that waits for a scheduler that is not running held an empty node for good. Cluster Autoscaler
ignores them too (unless named in --bypassed-schedulers).

The room they are about to take is taken before any removal's fit (``land``). Cluster Autoscaler
packs the pending pods that fit existing nodes into its cluster snapshot before it simulates a
scale-down (core/podlistprocessor/filter_out_schedulable.go: TrySchedulePods on the snapshot, higher
priority first; the planner then simulates each removal on that snapshot,
core/scaledown/planner/planner.go), so an underused node whose pods fit only into that room is not
unneeded. Else a burst of new pods and a removal's evicted pods compete for the same room, the
evicted ones stay pending and a scale-up buys again. growth places its waiting pods the same way:
in their given order (the observation carries neither priority nor queue time), each on the first
Ready, schedulable node by name whose nodeSelector, required node affinity, taints (``can_land``)
and room (cpu, memory, pod slots: what the scale-down fit reads) admit it. A pod that fits nowhere
takes no room: once judged Unschedulable it is the scale-up planner's. CA packs the pods the
scheduler judged Unschedulable (and those of --bypassed-schedulers); growth packs the ones not yet
judged, for its loop runs no scale-down while a judged pod fits an existing node
(scaling.nodes.loop.may_scale_down; older CA releases did the same, DisableScaleDownForLoop in
filter_out_schedulable.go, current ones keep only the snapshot).

A node that is itself a removal candidate may receive them, as in CA's snapshot. An empty one is
then held by ``about_to_land`` as before, which reads the room before any pod landed (else a pod
would count twice: once in the room it took there, once as not fitting it). An underused one keeps
its timer only if they move with it: its fit places its own pods and the ones about to land on it
elsewhere (CA moves every pod its snapshot puts on the node); its utilization reads the pods bound
to it, as its re-check does. When the fit fails only because of the room they take, the blocker
says so (``RoomTakenByPodsAboutToLand``, models.ROOM_TAKEN).

Removals in progress: the pods still on nodes tainted for deletion, not yet evicted, take their room
before the waiting pods (``land_removals_first``), on the successors made for their nodes first. Else
two removals count the same free room, and the pods of the second to drain stay pending until a
scale-up buys again. Cluster Autoscaler injects the same pods into its snapshot before it simulates a
removal (core/scaledown/planner/planner.go injectOngoingActuation: the pods of the nodes being drained
and those recently evicted; one that fits nowhere takes no room), and Karpenter's consolidation
schedules the pods of deleting nodes with a command's own (pkg/controllers/disruption/helpers.go
SimulateScheduling). Only tainted nodes in the evaluation and the re-check: a replacement taints its
node once its successors are Ready, so until then its pods are meant for nodes not yet made (Karpenter
counts those in flight as capacity). A replacement's plan counts too the nodes the loop is removing
that are not tainted yet (scaling.nodes.disruption.moves): a removal just started taints its node a
moment later, and a plan made in that moment counted that node's room gone and its pods with it (the
consolidation bench saw it in 3 runs of 25: a command planned 0.1 s after an underused removal
started was cancelled by its drain's re-check, once after it had bought a cx22). The pods of a
replacement whose successors are not there yet then take room they will not: that plan buys more,
or is refused and made again once the cluster changed. An empty candidate that such pods landed on
goes only when they fit elsewhere (``removals_need``); an underused one moves them with its own, as
it moves the waiting ones.

Bounded: at most LANDING_MAX pods are tried and LANDING_VISITS_MAX node visits made, whatever the
burst. Pods of one landing key (requests, nodeSelector, affinity, tolerations) resume where the
last of them landed: rooms only shrink, so no node before it can take one (the same answer as
starting over, and CA's similar-pods cache for the ones that fit nowhere); a burst of a few
Deployments costs a few passes over the nodes plus one step a pod.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence

from scaling.kube.drain import (
    NO_PLACE_TO_MOVE,
    REPLICATED_KINDS,
    Blocker,
    marked_for_deletion,
    pod_key,
    pods_to_evict,
)
from scaling.kube.labels import label_value
from scaling.kube.models import NodeInfo, PodInfo, Resources
from scaling.kube.pods import follows_node
from scaling.nodes.disruption.drift import LABEL_REPLACEMENT, LABEL_REPLACES
from scaling.nodes.scale_down.checks import NOTHING, can_land, free_room, need_of, needs_room, pods_fit_elsewhere
from scaling.nodes.scale_down.models import Landing

PODS_ABOUT_TO_LAND = "PodsAboutToLand"
REPLACING = "ReplacementInProgress"

# The waiting pods tried, in order: the rest of a larger burst takes no room. 1,000 pods of 100m
# already hold 100 cores, more free room than one underused node's pods need; they wait for the
# scheduler for moments (the next loop sees them bound, their room counted as used), and an
# underused node goes only after its whole unneeded time. Placing 1,000 measured 9 ms on 1,700
# nodes and 17-23 ms on 5,000 (2 shared cores, CPU time; a 30,000-pod burst costs the same).
LANDING_MAX = 1_000
# Node visits over all pods: pods pinned each to its own node (a hostname nodeSelector) scan the
# nodes up to theirs, each visit asking can_land (~2.4 us here): this caps it at ~0.12 s.
LANDING_VISITS_MAX = 50_000


def awaiting_scheduler(pods: list[PodInfo]) -> list[PodInfo]:
    """The pods the scheduler has yet to place or judge (module doc), in their given order."""
    return [
        p
        for p in pods
        if p.node_name is None
        and p.phase == "Pending"
        and p.deletion_timestamp is None
        and not p.unschedulable
        and not follows_node(p)
        and p.scheduler_name is None
    ]


def about_to_land(node: NodeInfo, used: Resources, waiting: Iterable[PodInfo]) -> Blocker | None:
    """A blocker naming the first of ``waiting`` that the node would take (its selectors,
    affinity and taints admit it and it fits the room ``used`` leaves); None when none would.
    The plan passes ``FirstOfEachKey(waiting)``: the same answer, without a walk of every pod per node."""
    room = node.allocatable - used
    for pod in waiting:
        cpu, mem, slots = need_of(pod)
        if cpu <= room.cpu_m and mem <= room.memory and slots <= room.pods and can_land(pod, node):
            return Blocker(
                code=PODS_ABOUT_TO_LAND,
                message=f"pod {pod_key(pod)}, not yet scheduled, would land on node {node.name}",
                pod=pod_key(pod),
            )
    return None


def landing_key(pod: PodInfo) -> tuple:
    """What decides where ``pod`` may land in ``land``: its requests and what ``can_land`` reads."""
    return (
        need_of(pod),
        tuple(sorted(pod.node_selector.items())),
        tuple(pod.node_affinity),
        tuple(pod.tolerations),
    )


class FirstOfEachKey:
    """The waiting pods, only the first of each landing key, in their order. Where one pod of a key
    may land, every one may, so the first pod a node would take is among these: ``about_to_land``
    answers the same from them. Without it each empty candidate walked every waiting pod when none
    fits (5,000 pods for a pool with no node yet and 85 empty nodes: 3.2 s of a 0.1 s evaluation).
    Worked out as far as callers read, once: most stop at the first pod."""

    def __init__(self, waiting: Sequence[PodInfo]) -> None:
        self._waiting = waiting
        self._read = 0  # pods of ``waiting`` looked at
        self._keys: set[tuple] = set()
        self._firsts: list[PodInfo] = []

    def __iter__(self) -> Iterator[PodInfo]:
        i = 0
        while True:
            if i < len(self._firsts):
                yield self._firsts[i]
                i += 1
            elif self._read < len(self._waiting):
                pod = self._waiting[self._read]
                self._read += 1
                key = landing_key(pod)
                if key not in self._keys:
                    self._keys.add(key)
                    self._firsts.append(pod)
            else:
                return


def land(
    waiting: Sequence[PodInfo],
    targets: Sequence[NodeInfo],
    used: dict[str, Resources],
    limit: int = LANDING_MAX,
    visits: int = LANDING_VISITS_MAX,
) -> Landing:
    """Each of the first ``limit`` of ``waiting``, in order, takes its room on the first of
    ``targets`` that admits it (``can_land``) and has that room left of ``used``; one that fits
    none takes nothing. At most ``visits`` node visits in all (module doc)."""
    room: dict[str, list[int]] = {}
    resume: dict[tuple, int] = {}  # landing key -> the first target one of its pods may still take
    arriving: dict[str, list[PodInfo]] = {}
    tried = 0
    for pod in waiting[:limit]:
        if visits <= 0:
            break
        tried += 1
        key = landing_key(pod)
        cpu, mem, slots = need_of(pod)
        i = resume.get(key, 0)
        while i < len(targets) and visits > 0:
            visits -= 1
            node = targets[i]
            free = room.get(node.name)
            if free is None:
                free = room[node.name] = free_room(node, used)
            if cpu <= free[0] and mem <= free[1] and slots <= free[2] and can_land(pod, node):
                free[0], free[1], free[2] = free[0] - cpu, free[1] - mem, free[2] - slots
                arriving.setdefault(node.name, []).append(pod)
                break
            i += 1
        resume[key] = i
    if not arriving:
        return Landing(used=used, before=used, tried=tried)
    rooms = [room.get(n.name) or free_room(n, used) for n in targets]
    after = dict(used)
    for name, pods in arriving.items():
        needs = [need_of(p) for p in pods]
        taken = Resources(
            cpu_m=sum(n[0] for n in needs), memory=sum(n[1] for n in needs), pods=sum(n[2] for n in needs)
        )
        after[name] = after.get(name, NOTHING) + taken
    return Landing(used=after, before=used, arriving=arriving, tried=tried, ceiling=_ceiling(rooms))


def _ceiling(rooms: Sequence[Sequence[int]]) -> tuple[int, int, int] | None:
    """The most free cpu, memory and pod slots of any of ``rooms``, each on its own (Landing.ceiling)."""
    if not rooms:
        return None
    return (max(r[0] for r in rooms), max(r[1] for r in rooms), max(r[2] for r in rooms))


def pods_of_removals(
    nodes: Iterable[NodeInfo],
    on_node: Mapping[str, list[PodInfo]],
    kinds: frozenset[str] = REPLICATED_KINDS,
    excluded: Collection[str] = (),
    also: Collection[str] = (),
) -> list[PodInfo]:
    """The pods still on nodes tainted for deletion (being drained, by growth or anyone) and on the
    nodes ``also`` names (ones the loop is removing, not yet tainted) that their controller recreates
    elsewhere and that are not yet evicted (an evicted one is terminating, and the pod that replaces it
    waits for the scheduler). Module doc: "Removals in progress"."""
    # Sorted after the filter: the evaluation calls this over every node, and few are being removed.
    leaving = sorted(n.name for n in nodes if (marked_for_deletion(n) or n.name in also) and n.name not in excluded)
    return [
        p
        for name in leaving
        for p in pods_to_evict(name, on_node.get(name, []))
        if p.deletion_timestamp is None and needs_room(p, kinds)
    ]


def successors_first(targets: Sequence[NodeInfo], leaving: Iterable[str]) -> list[NodeInfo]:
    """``targets``, the successors made for ``leaving`` nodes first: the room meant for those nodes' pods."""
    names = {label_value(n) for n in leaving}
    own = [t for t in targets if t.labels.get(LABEL_REPLACES) in names]
    return own + [t for t in targets if t.labels.get(LABEL_REPLACES) not in names] if own else list(targets)


def land_removals_first(
    removals: Sequence[PodInfo],
    waiting: Sequence[PodInfo],
    targets: Sequence[NodeInfo],
    used: dict[str, Resources],
) -> Landing:
    """``land``, the pods of removals in progress first (on their nodes' successors first), then the
    pods waiting for the scheduler. Module doc: "Removals in progress"."""
    if not removals:
        return land(waiting, targets, used)
    first = land(removals, successors_first(targets, {p.node_name for p in removals if p.node_name}), used)
    then = land(waiting, targets, first.used)
    arriving = {n: [*first.arriving.get(n, []), *then.arriving.get(n, [])] for n in {*first.arriving, *then.arriving}}
    return Landing(
        used=then.used,
        before=used,
        arriving=arriving,
        tried=then.tried,
        ceiling=_ceiling([free_room(n, then.used) for n in targets]) if arriving else None,
        removals={pod_key(p) for ps in first.arriving.values() for p in ps},
    )


def removals_need(node: NodeInfo, landing: Landing, targets: Sequence[NodeInfo]) -> Blocker | None:
    """An empty candidate that pods of removals in progress landed on: held unless they fit the other
    targets' room (the rest of ``landing`` in place), as an underused node's landed pods move with it."""
    coming = landing.from_removals(node.name)
    if not coming:
        return None
    fit = pods_fit_elsewhere(coming, list(targets), landing.used, landing.ceiling, leaving=node.name)
    if fit.ok:
        return None
    pod = next((p for p in coming if pod_key(p) == fit.blocker.pod), coming[0]) if fit.blocker else coming[0]
    return Blocker(
        code=NO_PLACE_TO_MOVE,
        message=f"pod {pod_key(pod)} of node {pod.node_name}, being removed, has room on node {node.name} only",
        pod=pod_key(pod),
    )


def successor_held(
    node: NodeInfo, in_progress: set[str], leaving_seen: set[str], commands: Collection[str] = ()
) -> Blocker | None:
    """A replacement's successor is held while the node it replaces is being removed or is still
    seen on its way out (``leaving_seen``: tainted for deletion or cordoned; a node whose command
    refused serves again, and its successor, kept for the pods that landed on it, is a node like any
    other), or while any node of its command is in flight (``commands``: their LABEL_REPLACEMENT
    values; a multi-node command drains its nodes together, and the one the successor names may go
    first): until then their pods have not arrived, and it is the only place they have to go."""
    replaces = node.labels.get(LABEL_REPLACES)
    if not replaces:
        return None
    if replaces in in_progress or replaces in leaving_seen:
        return Blocker(code=REPLACING, message=f"node {node.name} replaces node {replaces}, still being drained")
    if node.labels.get(LABEL_REPLACEMENT) in commands:
        return Blocker(code=REPLACING, message=f"node {node.name} replaces nodes of a command still being drained")
    return None
