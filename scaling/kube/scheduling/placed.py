"""What the pods a shape places itself do to its own filters (the scheduler's AddPod, for pods
of one shape): a pod binding host ports conflicts with its twin, a pod whose anti-affinity
selects itself takes one per domain, a spread that selects itself fills the node's domain up to
the skew, and affinity that selects itself is met once one runs."""

from __future__ import annotations

from scaling.kube.models import LABEL_HOSTNAME, NodeInfo
from scaling.kube.scheduling import interpodaffinity
from scaling.kube.scheduling.framework import Pending, SchedulingState
from scaling.kube.scheduling.podtopologyspread import eligible


def self_limit(pod: Pending, state: SchedulingState, node: NodeInfo) -> int | None:
    """How many pods of the shape the node takes, by their own ports, anti-affinity and
    spread (None: as many as the other filters and the room allow)."""
    if pod.host_ports:
        return 1
    if state.affinity is not None and state.affinity.self_anti:
        return 1
    return state.spread.room(node) if state.spread is not None else None


def hostname_cap(pod: Pending, state: SchedulingState | None) -> int | None:
    """Pods of the shape on one new node, by their own ports and hostname anti-affinity."""
    if pod.host_ports:
        return 1
    if state is not None and state.affinity is not None and LABEL_HOSTNAME in state.affinity.self_anti:
        return 1
    return None


def with_placed(pod: Pending, state: SchedulingState, node: NodeInfo, n: int) -> SchedulingState:
    update: dict = {}
    if state.affinity is not None:
        update["affinity"] = interpodaffinity.with_own(state.affinity, node.labels, n)
    if state.spread is not None:
        counted = [
            eligible(c, node, pod.node_selector, pod.node_affinity, pod.tolerations) for c in state.spread.constraints
        ]
        update["spread"] = state.spread.with_own(node, n, counted)
    return state.model_copy(update=update)
