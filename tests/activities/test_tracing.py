"""The worker's tracing switch (activities/tracing.py): off without OTEL_EXPORTER_OTLP_ENDPOINT,
Temporal's TracingInterceptor exporting over OTLP/HTTP with it. What one trace holds:
tests/workflows/nodes/test_tracing.py."""

from __future__ import annotations

import pytest
from temporalio.contrib.opentelemetry import TracingInterceptor

from activities import tracing


def test_no_endpoint_no_tracing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(tracing.ENDPOINT, raising=False)
    interceptors, flush = tracing.from_environment()
    assert interceptors == []
    flush()


def test_an_endpoint_turns_the_interceptor_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(tracing.ENDPOINT, "http://127.0.0.1:9")  # nothing listens: nothing is sent here
    interceptors, flush = tracing.from_environment()
    (interceptor,) = interceptors
    assert isinstance(interceptor, TracingInterceptor)
    flush()  # no span was made, so the exporter is never called
