"""Metrics recorded outside an activity's context (a provider's own threads, the agent API): through
the worker's runtime, the one whose Prometheus exporter serves /metrics. `run_worker` installs
its runtime's meter here for as long as it runs; without one (tests, tools) nothing is recorded."""

from __future__ import annotations

from temporalio.common import MetricMeter

_meter: MetricMeter = MetricMeter.noop


def use(meter: MetricMeter | None) -> None:
    """The meter process_meter() gives from now on (None: record nothing)."""
    global _meter
    _meter = meter or MetricMeter.noop


def process_meter() -> MetricMeter:
    return _meter
