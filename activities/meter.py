"""Metrics recorded outside an activity's context (a provider's own threads, the agent API, the
worker's readiness): through the process's Temporal runtime, the one whose Prometheus exporter
serves the worker's /metrics (worker.py makes it the default). Without one (tests, tools) the
default runtime's meter records nowhere."""

from __future__ import annotations

from temporalio.common import MetricMeter
from temporalio.runtime import Runtime


def process_meter() -> MetricMeter:
    return Runtime.default().metric_meter
