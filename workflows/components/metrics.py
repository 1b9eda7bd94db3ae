"""The components loop's metrics as its workflow records them: one call per event at the call site.

`workflow.metric_meter()` records nothing while a workflow replays and adds no command, so these
calls change no history (no patch id) and a counter counts each event once."""

from __future__ import annotations

from datetime import datetime

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from scaling.components import loop_metrics as names
    from scaling.components.plan import Change


def changed(cluster: str, component: str, change: Change, base: str, early: bool = False) -> None:
    """One applied change; `early`: before its interval ran out (adding 0 otherwise keeps the
    violations series present, so an alert on it never reads a missing series as healthy)."""
    kind = "homogeneous" if change.cluster == base else "heterogeneous"
    meter = workflow.metric_meter()
    meter.create_counter(names.CHANGES, "applied scale-outs and scale-ins").add(
        1, {"cluster": cluster, "component": component, "direction": change.direction, "kind": kind}
    )
    meter.create_counter(names.INTERVAL_VIOLATIONS, "changes applied before their interval ran out").add(
        1 if early else 0, {"cluster": cluster, "component": component}
    )


def sized(cluster: str, component: str, groups: int, replicas: int) -> None:
    meter = workflow.metric_meter()
    labels = {"cluster": cluster, "component": component}
    meter.create_gauge(names.GROUPS, "heterogeneous groups of the component").set(groups, labels)
    meter.create_gauge(names.REPLICAS, "replicas over the base cluster and its groups").set(replicas, labels)


def metrics_failed(cluster: str, component: str, source: str, failed: bool = True) -> None:
    """A round's source answered or not (0 when it did: the series exists before the first failure)."""
    workflow.metric_meter().create_counter(names.METRICS_FAILURES, "rounds whose metrics source gave no answer").add(
        1 if failed else 0, {"cluster": cluster, "component": component, "source": source}
    )


def round_done(cluster: str, started: datetime) -> None:
    workflow.metric_meter().create_histogram_float(
        names.ROUND_DURATION, "one ComponentAutoscaler round: read, plan, act", "s"
    ).record(max(0.0, (workflow.now() - started).total_seconds()), {"cluster": cluster})
