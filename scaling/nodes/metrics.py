"""The node loop's Prometheus metrics: names, label keys and histogram buckets. Named like Cluster
Autoscaler's where it has one (unschedulable_pods_count, nodes_count, scaled_up_nodes_total,
scaled_down_nodes_total, failed_scale_ups_total), with growth's prefix.

Plain constants (no I/O, no Temporal): workflows record through `workflow.metric_meter()` (not
recorded during replay, so counters never double-count), activities through
`activity.metric_meter()`, and the worker's SDK runtime serves them next to the SDK's own metrics.
"""

from __future__ import annotations

from collections import Counter

from scaling.nodes.scale_up.demand import NodeTally

# Gauges, set by observe_cluster every loop.
UNSCHEDULABLE_PODS = "growth_unschedulable_pods_count"  # {cluster}
NODES = "growth_nodes_count"  # {cluster, group, pool}: growth-managed nodes
# {cluster, reason}: nodes the last scale-down evaluation found held (among the candidates it reports)
SCALE_DOWN_BLOCKED = "growth_scale_down_blocked_nodes_count"
# Gauge, set at each Hetzner answer: the project's API requests left (RateLimit-Remaining plus refill).
HETZNER_RATELIMIT_REMAINING = "growth_hetzner_ratelimit_remaining"
# Counters, from workflows.
SCALED_UP_NODES = "growth_scaled_up_nodes_total"  # {cluster, group, pool}: a NodeRequest's node became Ready
SCALED_DOWN_NODES = "growth_scaled_down_nodes_total"  # {cluster, group, pool, reason}: a node was removed
FAILED_SCALE_UPS = "growth_failed_scale_ups_total"  # {cluster, pool, reason}: one failed attempt, by its result
# Histograms (seconds), from workflows.
NODE_REQUEST_DURATION = "growth_node_request_duration_seconds"  # {cluster, phase}: start to Ready/Unmet
LOOP_DURATION = "growth_loop_duration_seconds"  # {cluster}: one NodeAutoscaler loop, observe to children started

ALL = (
    UNSCHEDULABLE_PODS,
    NODES,
    SCALE_DOWN_BLOCKED,
    HETZNER_RATELIMIT_REMAINING,
    SCALED_UP_NODES,
    SCALED_DOWN_NODES,
    FAILED_SCALE_UPS,
    NODE_REQUEST_DURATION,
    LOOP_DURATION,
)

# The SDK's default buckets are for milliseconds; these are seconds.
HISTOGRAM_BUCKETS: dict[str, list[float]] = {
    NODE_REQUEST_DURATION: [1, 5, 10, 20, 30, 60, 120, 300, 600, 1200],
    LOOP_DURATION: [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
}


def nodes_by_pool(tally: NodeTally) -> Counter[tuple[str, str]]:
    """growth-managed nodes counted by (group, pool); nodes growth did not make are left out."""
    counts: Counter[tuple[str, str]] = Counter()
    for c in tally.groups:
        counts[(c.group, c.pool)] += c.count
    return counts
