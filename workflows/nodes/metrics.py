"""The node loop's metrics as workflows record them: one call per event at the call site.

`workflow.metric_meter()` records nothing while a workflow replays, so a counter counts each
event once however often its history is replayed (a worker restart, a cache eviction)."""

from __future__ import annotations

from datetime import datetime

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from scaling.nodes import metrics as names
    from scaling.nodes.models import AttemptResult, RequestPhase
    from scaling.nodes.scale_down.removals import NodeScaleDownInput, ScaleDownPhase, ScaleDownStatus
    from scaling.nodes.scale_up.requests import NodeRequestStatus

# Attempt results that are a failed scale-up (Cluster Autoscaler's failed_scale_ups_total{reason}).
FAILED_ATTEMPTS = frozenset(
    {
        AttemptResult.INSUFFICIENT_CAPACITY,
        AttemptResult.QUOTA_EXCEEDED,
        AttemptResult.READINESS_TIMEOUT,
        AttemptResult.PROVIDER_ERROR,
        AttemptResult.CANCELLED,
    }
)


def request_finished(cluster: str, status: NodeRequestStatus) -> None:
    """A NodeRequest reached Ready or Unmet: its node (if any), its failed attempts, its duration."""
    meter = workflow.metric_meter()
    if status.phase == RequestPhase.READY:
        meter.create_counter(names.SCALED_UP_NODES, "nodes added: NodeRequests whose node became Ready").add(
            1, {"cluster": cluster, "group": status.group, "pool": status.current_pool}
        )
    failed = meter.create_counter(names.FAILED_SCALE_UPS, "failed scale-up attempts, by the attempt's result")
    for attempt in status.attempts:
        if attempt.result in FAILED_ATTEMPTS:
            failed.add(1, {"cluster": cluster, "pool": attempt.pool, "reason": attempt.result.value})
    if status.started_at is not None and status.finished_at is not None:
        meter.create_histogram_float(names.NODE_REQUEST_DURATION, "NodeRequest start to Ready or Unmet", "s").record(
            _seconds(status.started_at, status.finished_at), {"cluster": cluster, "phase": status.phase.value}
        )


def scale_down_finished(inp: NodeScaleDownInput, status: ScaleDownStatus) -> None:
    if status.phase != ScaleDownPhase.REMOVED:
        return
    workflow.metric_meter().create_counter(names.SCALED_DOWN_NODES, "nodes removed, by why").add(
        1, {"cluster": inp.cluster, "group": inp.group, "pool": inp.pool or "", "reason": inp.kind.lower()}
    )


def loop_done(cluster: str, started: datetime) -> None:
    workflow.metric_meter().create_histogram_float(
        names.LOOP_DURATION, "one NodeAutoscaler loop: observe, plan, start children", "s"
    ).record(_seconds(started, workflow.now()), {"cluster": cluster})


def _seconds(start: datetime, end: datetime) -> float:
    return max(0.0, (end - start).total_seconds())
