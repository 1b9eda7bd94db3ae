"""The scale-down fits as the kube-scheduler takes the moved pods (scaling.kube.scheduling.arrivals).

The fits place a removed node's pods first fit. The scheduler binds each recreated pod to the
emptiest node that admits it, in whatever order the evictions bring them, and an early pod may
take the room first fit kept for a later one. A Karpenter-style group's underused node whose pods
some order strands is therefore not deleted with a plain drain: its consolidation drains it in an
order that places every pod, or refuses (scaling.nodes.disruption.arrival_orders). A Cluster
Autoscaler group keeps CA's first fit (its simulator's own rule).
"""

from __future__ import annotations

from collections.abc import Mapping

from scaling.kube.drain import is_terminal, pod_key, pods_by_node, pods_to_evict
from scaling.kube.models import NodeInfo, PodInfo, Resources
from scaling.kube.scheduling.arrivals import Target, bound_in_turn, fits, score_reads, stranded
from scaling.nodes.scale_down.checks import NOTHING, can_land, free_room, need_of, needs_room, used_by_node
from scaling.nodes.scale_down.landing import LANDING_MAX, land
from scaling.nodes.scale_down.models import Landing

NOMINATION_WORK = 5_000  # node scores where the pods of drains under way land (nominated)


def largest_first(pod: PodInfo) -> tuple:
    """The sort key that takes pods largest first (cpu, then memory), by name among equals."""
    return (-pod.requests.cpu_m, -pod.requests.memory, pod.namespace, pod.name)


def target(node: NodeInfo, pods: list[PodInfo], used: Resources | None = None) -> Target:
    """``node`` holding ``pods`` (and the room ``used`` says it holds, else their requests): its free
    room, and their requests as the scores read them."""
    held = Resources.total(p.requests for p in pods) if used is None else used
    cpu, mem, slots = free_room(node, {node.name: held})
    reads = [score_reads(p) for p in pods]
    real_cpu, real_mem, nz_cpu, nz_mem = (sum(r[i] for r in reads) for i in range(4))
    return Target(node, (cpu, mem, slots), (real_cpu, real_mem, nz_cpu, nz_mem))


def nominated(waiting: list[PodInfo], nodes: list[NodeInfo], staying: list[PodInfo]) -> dict[str, str]:
    """Where the scheduler is about to put ``waiting`` (pod key -> node): largest first, each on the
    node of ``nodes`` it scores best beside the pods ``staying`` there (the first by name of several
    that tie); a pod that fits none is left out (the scale-up planner's once judged). A replacement
    plans its node's pods on what is left: else it counts a node those pods are about to fill as room
    (Karpenter's scheduling simulation for a disruption takes the pending pods and those of deleting
    nodes first, pkg/controllers/disruption/helpers.go SimulateScheduling). Scored, not first fit: the
    consolidation bench's seed 3 planned an api into the room of a cx32 that a drained web, first fit
    elsewhere, took instead (the emptier node scores best), and its command bought a cx22 that its
    drain's re-check then found no use for. Bounded: the LANDING_MAX largest, NOMINATION_WORK node
    scores (a few hundredths of a second), then the rest first fit as ``land`` places them (a burst on a
    large cluster, where the scheduler too scores only some nodes: percentageOfNodesToScore)."""
    order = sorted(waiting, key=largest_first)[:LANDING_MAX]
    live = [p for p in staying if not is_terminal(p)]
    on, used = pods_by_node(live), used_by_node(live)
    by_name = sorted(nodes, key=lambda n: n.name)
    targets = [target(n, on.get(n.name, []), used.get(n.name, NOTHING)) for n in by_name]
    bound = bound_in_turn(order, targets, can_land, work=NOMINATION_WORK)
    landing: dict[str, str] = {}
    after = dict(used)  # the room the scored ones leave, for the rest
    for p, i in zip(order, bound, strict=False):
        if i >= 0:
            name = landing[pod_key(p)] = targets[i].node.name
            after[name] = after.get(name, NOTHING) + p.requests
    if rest := order[len(bound) :]:
        first = land(rest, by_name, after)
        landing |= {pod_key(p): name for name, pods in first.arriving.items() for p in pods}
    return landing


def placed_anyway(movers: list[PodInfo], targets: list[NodeInfo], used: Mapping[str, Resources], leaving: str) -> bool:
    """Each of ``movers`` has as many nodes with room that admit it as there are movers, or one with room
    for them all: no order strands it, so no play is needed (the play's own shortcut, found without
    reading every node: an evaluation asks it of each underused node, over a cluster's every node).
    ``leaving``: the node they leave, not one of the ``targets`` they may take."""
    needs = [need_of(p) for p in movers]
    total = tuple(sum(n[r] for n in needs) for r in range(3))
    for pod, need in zip(movers, needs, strict=True):
        found = 0
        for t in targets:
            if t.name == leaving:
                continue
            room = free_room(t, used)
            if not fits(need, room) or not can_land(pod, t):
                continue
            found += 1
            if found >= len(movers) or fits(total, room):
                break
        else:
            return False
    return True


def deletion_strands(
    node: NodeInfo,
    mine: list[PodInfo],
    targets: list[NodeInfo],
    on_node: Mapping[str, list[PodInfo]],
    landing: Landing,
    kinds: frozenset[str],
) -> bool:
    """Whether some order the scheduler may take ``node``'s moved pods in (``mine`` that come back, and the
    waiting pods about to land on it) leaves one without a node among the other ``targets``: their room
    as ``landing`` counts it, their pods ``on_node`` and those landing there as the scores read them.
    A play that ran out of work says no, as the consolidation's check does."""
    movers = [p for p in pods_to_evict(node.name, mine) if needs_room(p, kinds)] + landing.arriving.get(node.name, [])
    if placed_anyway(movers, targets, landing.used, node.name):
        return False
    others = [t for t in targets if t.name != node.name]
    plays = [
        target(t, [*on_node.get(t.name, []), *landing.arriving.get(t.name, [])], landing.used.get(t.name, Resources()))
        for t in others
    ]
    return stranded(movers, plays, can_land).stranded is not None
