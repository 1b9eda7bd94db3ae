"""Metrics the node loop's activities record: the gauges observe_cluster sees every loop."""

from __future__ import annotations

import threading

from temporalio import activity

from scaling.nodes import metrics as names
from scaling.nodes.contracts import ClusterObservation

# (group, pool) label sets set last time, per cluster, so a pool that lost its last node reads 0
# instead of keeping its old value forever.
_seen: dict[str, set[tuple[str, str]]] = {}
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
