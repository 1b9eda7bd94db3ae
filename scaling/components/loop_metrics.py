"""The components loop's Prometheus metrics: names, label keys and histogram buckets.

Plain constants beside the node loop's (scaling/nodes/metrics.py), with the same prefix; every
metric carries `cluster` = `<namespace>/<TidbCluster>`, the loop's GrowthCluster search attribute.
Workflows record them through `workflow.metric_meter()`, which records nothing during replay.
"""

from __future__ import annotations

# Counters.
CHANGES = "growth_component_changes_total"  # {cluster, component, direction, kind}: one applied change
METRICS_FAILURES = "growth_component_metrics_failures_total"  # {cluster, component, source}: a round with no answer
# {cluster, component}: a change applied before its direction's interval since the last change
# ran out (the loop's own check of its gate: 0 unless the gate is wrong; set to 0 at each change).
INTERVAL_VIOLATIONS = "growth_component_interval_violations_total"
# Gauges, set every round a component is planned.
GROUPS = "growth_component_groups_count"  # {cluster, component}: heterogeneous groups (auto-* TidbClusters)
REPLICAS = "growth_component_replicas_count"  # {cluster, component}: replicas over the base and its groups
# Histograms (seconds).
ROUND_DURATION = "growth_component_round_duration_seconds"  # {cluster}: read, plan and act, one round

ALL = (CHANGES, METRICS_FAILURES, INTERVAL_VIOLATIONS, GROUPS, REPLICAS, ROUND_DURATION)

# A round is a few activities; seconds, not the SDK's millisecond buckets.
HISTOGRAM_BUCKETS: dict[str, list[float]] = {
    ROUND_DURATION: [0.05, 0.1, 0.25, 0.5, 1, 2, 3, 5, 10, 30, 60],
}
