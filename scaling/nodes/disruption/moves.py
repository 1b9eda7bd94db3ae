"""What draining nodes moves, and where to: the pods that come back and the nodes that may take them,
beside the pods the scheduler is about to bind (the replacement plan's and the arrival-order check's
common reading of the cluster)."""

from __future__ import annotations

from dataclasses import dataclass

from scaling.kube.drain import marked_for_deletion, pod_key, pods_by_node, pods_to_evict, without_long_terminating
from scaling.kube.labels import label_value
from scaling.kube.models import NodeInfo, PodInfo
from scaling.kube.scheduling.arrivals import fits
from scaling.nodes.contracts import ScaleDownObservation
from scaling.nodes.disruption.drift import LABEL_REPLACES
from scaling.nodes.scale_down.arrivals import nominated
from scaling.nodes.scale_down.checks import can_land, free_room, need_of, needs_room, used_by_node
from scaling.nodes.scale_down.landing import awaiting_scheduler, pods_of_removals


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
    # pods still on nodes being drained or named to a removal (``leaving``, tainted a moment later); those
    # of a node whose successors are there fill their room first (left out above) and the rest, the ones
    # its plan put elsewhere, take other nodes' room as these do. Karpenter schedules the pods of deleting
    # nodes with a command's own (pkg/controllers/disruption/helpers.go SimulateScheduling), and buys no
    # node for them alone.
    successors: dict[str, list[NodeInfo]] = {}
    for n in obs.nodes:
        if (replaces := n.labels.get(LABEL_REPLACES)) is not None:
            successors.setdefault(replaces, []).append(n)
    served_by_successor = {n for n in away if label_value(n) in successors}
    on_node = pods_by_node(pods)
    waiting = [
        *pods_of_removals(obs.nodes, on_node, excluded={*nodes, *served_by_successor}, also=leaving),
        *overflow(served_by_successor - set(nodes), successors, on_node),
        *awaiting_scheduler(pods),
    ]
    if landing := nominated(waiting, others, staying):
        bound = [p.model_copy(update={"node_name": landing[k]}) for p in waiting if (k := pod_key(p)) in landing]
        taken_by = used_by_node(bound)  # the planner reads a node's room from its `requested`
        others = [
            n.model_copy(update={"requested": n.requested + taken_by[n.name]}) if n.name in taken_by else n
            for n in others
        ]
        staying = [p for p in staying if pod_key(p) not in landing] + bound  # a drained pod moves
    return Moves(movers, others, staying)


def overflow(
    served: set[str], successors: dict[str, list[NodeInfo]], on_node: dict[str, list[PodInfo]]
) -> list[PodInfo]:
    """The pods of ``served`` nodes (leaving, their successors there) that their successors' room does
    not hold, largest first, first fit: their replacement's plan put them in other nodes' room, and they
    take it as the pods of a removal without successors do. The seed 7 bench run of 29 Nov: a command
    planned while another waited for its successor counted all the other node's room free, drained
    first into it, and the other's drain found no node for a batch."""
    out: list[PodInfo] = []
    for name in sorted(served):
        rooms = [(s, free_room(s, None)) for s in successors.get(label_value(name), [])]
        mine = [p for p in pods_to_evict(name, on_node.get(name, [])) if p.deletion_timestamp is None and needs_room(p)]
        for pod in sorted(mine, key=lambda p: (-p.requests.cpu_m, -p.requests.memory, p.name)):
            need = need_of(pod)
            room = next((r for s, r in rooms if fits(need, r) and can_land(pod, s)), None)
            if room is None:
                out.append(pod)
                continue
            for i in range(3):
                room[i] -= need[i]
    return out


def taken(node: NodeInfo, leaving: set[str]) -> bool:
    """Whether ``node`` is a successor made for a node still leaving (its replacement under way)."""
    replaces = node.labels.get(LABEL_REPLACES)
    return replaces is not None and replaces in {label_value(n) for n in leaving}
