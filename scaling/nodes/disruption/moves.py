"""What draining nodes moves, and where to: the pods that come back and the nodes that may take them,
beside the pods the scheduler is about to bind (the replacement plan's and the arrival-order check's
common reading of the cluster)."""

from __future__ import annotations

from dataclasses import dataclass, field

from scaling.kube.drain import (
    is_terminal,
    marked_for_deletion,
    pod_key,
    pods_by_node,
    pods_to_evict,
    without_long_terminating,
)
from scaling.kube.labels import label_value
from scaling.kube.models import NodeInfo, PodInfo
from scaling.kube.nodes import as_joined
from scaling.nodes.contracts import ScaleDownObservation
from scaling.nodes.disruption.drift import LABEL_REPLACES
from scaling.nodes.scale_down.arrivals import largest_first, nominated
from scaling.nodes.scale_down.checks import needs_room, used_by_node
from scaling.nodes.scale_down.landing import awaiting_scheduler, land, pods_of_removals


@dataclass
class Moves:
    """What draining ``nodes`` moves, and where to: their pods that come back (``movers``), the nodes
    that may take them (``others``), and the pods that stay (``staying``, those about to land bound
    where they land; ``others``' ``requested`` counts them). ``displaced``: pods about to land (another
    removal's, or pending) that no node but one of ``nodes`` has room for, bound to it."""

    movers: list[PodInfo]
    others: list[NodeInfo]
    staying: list[PodInfo]
    displaced: list[PodInfo] = field(default_factory=list)


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
    # pods still on nodes being drained or named to a removal (``leaving``, tainted a moment later); those
    # of a node whose successors are there fill their room first (left out above) and the rest, the ones
    # its plan put elsewhere, take other nodes' room as these do. Karpenter schedules the pods of deleting
    # nodes with a command's own (pkg/controllers/disruption/helpers.go SimulateScheduling), and buys no
    # node for them alone.
    successors: dict[str, list[NodeInfo]] = {}
    for n in obs.nodes:
        if (replaces := n.labels.get(LABEL_REPLACES)) is not None:
            successors.setdefault(replaces, []).append(n)
    removals = pods_of_removals(obs.nodes, pods_by_node(pods), excluded=nodes, also=leaving)
    waiting = [*beyond_successors(removals, successors), *awaiting_scheduler(pods)]
    landing = nominated(waiting, others, staying)
    displaced = only_room_on(nodes, obs, pods, [p for p in waiting if pod_key(p) not in landing])
    if landing:
        bound = [p.model_copy(update={"node_name": landing[k]}) for p in waiting if (k := pod_key(p)) in landing]
        taken_by = used_by_node(bound)  # the planner reads a node's room from its `requested`
        others = [
            n.model_copy(update={"requested": n.requested + taken_by[n.name]}) if n.name in taken_by else n
            for n in others
        ]
        staying = [p for p in staying if pod_key(p) not in landing] + bound  # a drained pod moves
    return Moves(movers, others, staying, displaced)


def only_room_on(
    nodes: list[str], obs: ScaleDownObservation, pods: list[PodInfo], left: list[PodInfo]
) -> list[PodInfo]:
    """Of ``left`` (pods about to land that no other node takes), those ``nodes`` have room for as they
    are, each bound to the one it fits first. The scheduler puts them there until the command's taint,
    and a command that takes that room strands them: another removal's plan counted on it, and its
    drain went on. The consolidation bench's seed 3: a cx32 being replaced by a cx22 took the cache of
    an underused cx52 drained beside it, and its re-check refused after the cx22 was bought; tainted
    first, it would have left the cache pending. Karpenter schedules the pods of deleting nodes and
    pending pods with a command's own (pkg/controllers/disruption/helpers.go SimulateScheduling)."""
    if not left:
        return []
    mine = [n for n in obs.nodes if n.name in nodes]
    held = land(
        sorted(left, key=largest_first),
        mine,
        used_by_node([p for p in pods if p.node_name in nodes and not is_terminal(p)]),
    )
    return [p.model_copy(update={"node_name": name}) for name, ps in held.arriving.items() for p in ps]


def beyond_successors(removals: list[PodInfo], successors: dict[str, list[NodeInfo]]) -> list[PodInfo]:
    """``removals`` but those their node's successors hold (``successors``: by the node's label value),
    largest first, first fit (``land``): the rest take other nodes' room, as the pods of a removal
    without successors do, for their replacement's plan put them there. The seed 7 bench run of 29 Nov:
    a command planned while another waited for its successor counted all the other node's room free,
    drained first into it, and the other's drain found no node for a batch."""
    on_node: dict[str, list[PodInfo]] = {}
    for p in removals:
        on_node.setdefault(p.node_name or "", []).append(p)
    out: list[PodInfo] = []
    for name, mine in on_node.items():
        own = successors.get(label_value(name), [])
        if not own:
            out += mine
            continue
        own = [as_joined(s) for s in own]  # one still joining is tainted not-ready until it is Ready
        held = land(sorted(mine, key=largest_first), own, {s.name: s.requested for s in own})
        kept = {pod_key(p) for ps in held.arriving.values() for p in ps}
        out += [p for p in mine if pod_key(p) not in kept]
    return out


def taken(node: NodeInfo, leaving: set[str]) -> bool:
    """Whether ``node`` is a successor made for a node still leaving (its replacement under way)."""
    replaces = node.labels.get(LABEL_REPLACES)
    return replaces is not None and replaces in {label_value(n) for n in leaving}
