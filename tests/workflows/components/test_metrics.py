"""The components loop's growth_component_* metrics, read from the SDK's metric buffer on the
time-skipping server: what the worker's /metrics endpoint would serve."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.runtime import MetricBuffer, Runtime, TelemetryConfig
from temporalio.testing import WorkflowEnvironment

from scaling.components import loop_metrics as names
from starters.processes import free_port
from tests.conftest import SERVER_STARTUP
from tests.polling import until
from tests.workflows.components.stubs import ComponentsWorld
from tests.workflows.components.test_autoscaler import autoscaler, base_patches, rounds_past, skip, tikv_spec

CLUSTER = "ns/db"  # <namespace>/<TidbCluster>, the stubs' world


@pytest.fixture
def buffer() -> MetricBuffer:
    return MetricBuffer(10_000)


@pytest.fixture
async def env(temporal_test_server_path: str, buffer: MetricBuffer) -> AsyncIterator[WorkflowEnvironment]:
    """The shared fixture's server, with a runtime whose metrics go to `buffer`."""
    runtime = Runtime(telemetry=TelemetryConfig(metrics=buffer))
    async with await WorkflowEnvironment.start_time_skipping(
        port=free_port(),
        test_server_startup_timeout=SERVER_STARTUP,
        test_server_existing_path=temporal_test_server_path,
        data_converter=pydantic_data_converter,
        runtime=runtime,
    ) as e:
        yield e


class Seen:
    """Every growth_component_* update so far: counters summed, gauges' last value, histogram values."""

    def __init__(self, buffer: MetricBuffer) -> None:
        self.buffer = buffer
        self.updates: list[tuple[str, dict[str, str], float]] = []

    def read(self) -> Seen:
        for u in self.buffer.retrieve_updates():
            if u.metric.name in names.ALL:
                self.updates.append((u.metric.name, dict(u.attributes), float(u.value)))
        return self

    def total(self, name: str, **labels: str) -> float:
        return sum(v for n, ls, v in self.updates if n == name and labels.items() <= ls.items())

    def last(self, name: str, **labels: str) -> float | None:
        found = [v for n, ls, v in self.updates if n == name and labels.items() <= ls.items()]
        return found[-1] if found else None

    def values(self, name: str) -> list[float]:
        return [v for n, _, v in self.updates if n == name]


async def test_changes_failures_sizes_and_round_durations_are_recorded(
    env: WorkflowEnvironment, buffer: MetricBuffer
) -> None:
    seen = Seen(buffer)
    world = ComponentsWorld(spec=tikv_spec(), load={"tikv": 5.4}, metrics_down=True)
    async with autoscaler(env, world) as handle:
        await rounds_past(env, handle, 3)
        seen.read()
        # Every round without an answer is counted (the Event is raised only once).
        failures = seen.total(names.METRICS_FAILURES, cluster=CLUSTER, component="tikv", source="prometheus")
        assert failures >= 3 and world.reasons().count("MetricsUnavailable") == 1
        assert seen.total(names.CHANGES) == 0 and seen.last(names.GROUPS) is None  # nothing planned
        world.metrics_down = False
        await skip(env, 40)
        await until(lambda: base_patches(world) == [6])  # 5.4 of 6 cores over max 0.8
        await rounds_past(env, handle, 1)
        seen.read()
        out = {"cluster": CLUSTER, "component": "tikv", "direction": "out", "kind": "homogeneous"}
        assert seen.total(names.CHANGES, **out) == 1 and seen.total(names.CHANGES, direction="in") == 0
        assert seen.last(names.GROUPS, cluster=CLUSTER, component="tikv") == 0
        assert seen.last(names.REPLICAS, cluster=CLUSTER, component="tikv") == 6
        assert seen.total(names.METRICS_FAILURES) == failures  # the source answers again
        rounds = seen.values(names.ROUND_DURATION)
        assert len(rounds) >= 5 and all(0 <= r < 30 for r in rounds)  # seconds, one per round
