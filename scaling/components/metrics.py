"""Per-instance samples -> per-group aggregates (what crosses into workflow history).

The query_metrics activity reads per-instance CPU usage, CPU quota and (TiKV) store sizes keyed
by instance (pod name) and calls `aggregate`; the planner reads only the aggregates, so history
does not grow with the number of instances.
"""

from __future__ import annotations

from scaling.components.contracts import Component, ComponentMetrics, GroupMetrics


def cluster_of(instance: str, clusters: dict[str, str], component: str) -> str | None:
    """The TidbCluster an instance belongs to (pods are `<tc>-<component>-<ordinal>`), or None.

    The longest matching name wins, so a base cluster "db" never claims "db-x-tikv-0"'s pods."""
    best: str | None = None
    for name in clusters:
        prefix = f"{name}-{component}-"
        if instance.startswith(prefix) and instance[len(prefix) :].isdigit():
            if best is None or len(name) > len(best):
                best = name
    return best


def aggregate(
    component: Component,
    clusters: dict[str, str],
    cpu_used: dict[str, float],
    cpu_quota: dict[str, float],
    hot_threshold: float | None = None,
    storage: dict[str, tuple[float, float]] | None = None,
) -> ComponentMetrics:
    """Sum per group. `storage` maps instance -> (capacity, used) bytes.

    An instance with usage but no quota (or the reverse) is counted in `missing`, not guessed."""
    groups: dict[str, GroupMetrics] = {}
    missing = 0

    def group_of(instance: str) -> GroupMetrics | None:
        tc = cluster_of(instance, clusters, component)
        if tc is None:
            return None
        key = clusters[tc]
        return groups.setdefault(key, GroupMetrics(group=key))

    for instance in sorted(set(cpu_used) | set(cpu_quota)):
        g = group_of(instance)
        if g is None:
            continue
        used, quota = cpu_used.get(instance), cpu_quota.get(instance)
        if used is None or quota is None or quota <= 0:
            missing += 1
            continue
        ratio = used / quota
        g.instances += 1
        g.cpu_used += used
        g.cpu_quota += quota
        g.max_ratio = max(g.max_ratio, ratio)
        if hot_threshold is not None and ratio > hot_threshold:
            g.hot_instances += 1
            g.hot_cpu_used += used
            g.hot_cpu_quota += quota
    for instance, (capacity, used) in sorted((storage or {}).items()):
        g = group_of(instance)
        if g is None or capacity <= 0:
            continue
        g.storage_instances += 1
        g.storage_used += used
        g.storage_capacity += capacity
    return ComponentMetrics(component=component, groups=[groups[k] for k in sorted(groups)], missing=missing)
