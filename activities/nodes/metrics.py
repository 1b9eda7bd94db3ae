"""Metrics the node loop's activities record: the gauges observe_cluster sees every loop."""

from __future__ import annotations

import threading

from temporalio import activity

from scaling.nodes import metrics as names
from scaling.nodes.contracts import ClusterObservation
from scaling.nodes.scale_down.models import NodeState
from scaling.nodes.scale_down.removals import CandidateState

# (group, pool) label sets set last time, per cluster, so a pool that lost its last node reads 0
# instead of keeping its old value forever.
_seen: dict[str, set[tuple[str, str]]] = {}
_blocked_seen: dict[str, set[str]] = {}  # the same for blocked reasons
_seen_lock = threading.Lock()


def record_observation(cluster: str, obs: ClusterObservation) -> None:
    if not activity.in_activity():  # called as a plain method (tests, tools): nothing to record into
        return
    meter = activity.metric_meter()
    meter.create_gauge(names.UNSCHEDULABLE_PODS, "pods Pending with PodScheduled=False, reason Unschedulable").set(
        obs.demand.unschedulable, {"cluster": cluster}
    )
    gauge = meter.create_gauge(names.NODES, "growth-managed nodes by node group and pool")
    counts = names.nodes_by_pool(obs.demand.nodes)
    with _seen_lock:
        gone = _seen.get(cluster, set()) - set(counts)
        _seen[cluster] = set(counts)
    for group, pool in gone:
        gauge.set(0, {"cluster": cluster, "group": group, "pool": pool})
    for (group, pool), n in counts.items():
        gauge.set(n, {"cluster": cluster, "group": group, "pool": pool})


def record_blocked(cluster: str, candidates: list[CandidateState]) -> None:
    """Nodes held from scale-down by reason, among the candidates the evaluation reports (at most
    MAX_CANDIDATES; blocked ones rank before utilized ones). A reason that no longer holds reads 0."""
    if not activity.in_activity():
        return
    counts: dict[str, int] = {}
    for c in candidates:
        if c.state == NodeState.BLOCKED.value:
            counts[c.reason or "Unknown"] = counts.get(c.reason or "Unknown", 0) + 1
    with _seen_lock:
        gone = _blocked_seen.get(cluster, set()) - set(counts)
        _blocked_seen[cluster] = set(counts)
    gauge = activity.metric_meter().create_gauge(names.SCALE_DOWN_BLOCKED, "nodes held from scale-down, by reason")
    for reason in gone:
        gauge.set(0, {"cluster": cluster, "reason": reason})
    for reason, n in counts.items():
        gauge.set(n, {"cluster": cluster, "reason": reason})
