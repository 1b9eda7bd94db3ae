"""OpenTelemetry traces of the worker, through Temporal's TracingInterceptor (its contrib module).

With OTEL_EXPORTER_OTLP_ENDPOINT set, the worker's client carries the interceptor and spans go
to that endpoint over OTLP/HTTP (the exporter reads the OTEL_EXPORTER_OTLP_* variables itself;
the service is OTEL_SERVICE_NAME, default growth-worker). Unset, nothing is imported or traced.
The packages are the optional extra `growth[otel]` (`make install` installs it).

What one trace holds: a loop's activity that starts NodeRequests (start_node_requests) is a root
span when its loop was not started under a trace; the client call inside it (StartWorkflow)
carries its context in the workflow's headers, so the NodeRequest's workflow spans and its
create_node and readiness activities join the same trace: one pod's scale-up from the loop's
decision to the node's readiness (tests/workflows/nodes/test_tracing.py).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

ENDPOINT = "OTEL_EXPORTER_OTLP_ENDPOINT"
INSTALL_HINT = "pip install 'growth[otel]' (make install does) for OpenTelemetry tracing"


def tracing_interceptor(provider: Any) -> Any:
    """Temporal's interceptor writing to `provider` (an opentelemetry TracerProvider). Loop
    workflows are started by operators without a trace, so workflow spans are made only under
    a caller's span (the SDK's default): a NodeRequest started from a traced activity."""
    from temporalio.contrib.opentelemetry import TracingInterceptor

    return TracingInterceptor(provider.get_tracer("growth"))


def from_environment() -> tuple[list[Any], Callable[[], None]]:
    """The client interceptors for the worker and what flushes the spans at shutdown."""
    if not os.environ.get(ENDPOINT):
        return [], lambda: None
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError as err:
        raise RuntimeError(f"{ENDPOINT} is set but OpenTelemetry is not installed: {INSTALL_HINT}") from err
    name = os.environ.get("OTEL_SERVICE_NAME", "growth-worker")
    provider = TracerProvider(resource=Resource.create({"service.name": name}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    return [tracing_interceptor(provider)], provider.shutdown
