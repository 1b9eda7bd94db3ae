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
"""

from __future__ import annotations

from scaling.kube.drain import Blocker, pod_key
from scaling.kube.models import NodeInfo, PodInfo, Resources
from scaling.kube.pods import follows_node
from scaling.nodes.disruption.drift import LABEL_REPLACES
from scaling.nodes.scale_down.checks import can_land

PODS_ABOUT_TO_LAND = "PodsAboutToLand"
REPLACING = "ReplacementInProgress"


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


def about_to_land(node: NodeInfo, used: Resources, waiting: list[PodInfo]) -> Blocker | None:
    """A blocker naming the first of ``waiting`` that the node would take (its selectors,
    affinity and taints admit it and it fits the room ``used`` leaves); None when none would."""
    room = node.allocatable - used
    for pod in waiting:
        need = Resources(cpu_m=pod.requests.cpu_m, memory=pod.requests.memory, pods=max(pod.requests.pods, 1))
        if need.fits_in(room) and can_land(pod, node):
            return Blocker(
                code=PODS_ABOUT_TO_LAND,
                message=f"pod {pod_key(pod)}, not yet scheduled, would land on node {node.name}",
                pod=pod_key(pod),
            )
    return None


def nominated(waiting: list[PodInfo], nodes: list[NodeInfo], used: dict[str, Resources]) -> dict[str, str]:
    """Where the scheduler is about to put ``waiting`` (pod key -> node), first fit over ``nodes`` in
    name order, largest pods first, from the room ``used`` leaves; a pod that fits none is left out
    (the scale-up planner's once judged). A replacement plans its node's pods on what is left: else it
    counts a node those pods are about to fill as room (Karpenter's scheduling simulation for a
    disruption takes the pending pods first, pkg/controllers/disruption/helpers.go SimulateScheduling)."""
    room = {n.name: n.allocatable - used.get(n.name, Resources()) for n in nodes}
    order = sorted(waiting, key=lambda p: (-p.requests.cpu_m, -p.requests.memory, p.namespace, p.name))
    out: dict[str, str] = {}
    for pod in order:
        need = Resources(cpu_m=pod.requests.cpu_m, memory=pod.requests.memory, pods=max(pod.requests.pods, 1))
        for node in sorted(nodes, key=lambda n: n.name):
            if need.fits_in(room[node.name]) and can_land(pod, node):
                room[node.name] = room[node.name] - need
                out[pod_key(pod)] = node.name
                break
    return out


def successor_held(node: NodeInfo, in_progress: set[str], observed: set[str]) -> Blocker | None:
    """A replacement's successor is held while the node it replaces is being removed or is still
    seen: until then its pods have not arrived, and it is the only place they have to go."""
    replaces = node.labels.get(LABEL_REPLACES)
    if not replaces or (replaces not in in_progress and replaces not in observed):
        return None
    return Blocker(code=REPLACING, message=f"node {node.name} replaces node {replaces}, still being drained")
