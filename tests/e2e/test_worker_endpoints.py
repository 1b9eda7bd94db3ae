"""The worker's operability endpoints against the real dev server: Prometheus metrics (the SDK's
runtime) and the liveness/readiness probes deploy/base/worker.yaml uses."""

from __future__ import annotations

import asyncio
import socket
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from activities.settings import ObservabilitySettings, Settings, SettingsError
from sim.cluster import FakeCluster
from starters.metrics import fetch
from starters.processes import free_port
from tests.e2e.conftest import TemporalServer
from tests.polling import until
from tests.workflows.workers import new_worker
from worker import Health, metrics_runtime, run_worker


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


@pytest.fixture
def sim(tmp_path: Path) -> Iterator[FakeCluster]:
    with FakeCluster(node_ready_delay=0.1) as s:
        yield s


async def test_metrics_and_probes_while_the_worker_polls(
    temporal_server: TemporalServer, sim: FakeCluster, tmp_path: Path
) -> None:
    metrics, health = f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}"
    settings = Settings.model_validate(
        {
            "kubernetes": {"kubeconfig": str(sim.write_kubeconfig(tmp_path / "kubeconfig"))},
            "temporal": {"address": temporal_server.address, "task_queue": f"endpoints-{tmp_path.name}"},
            "observability": {"metrics_address": metrics, "health_address": health},
        }
    )
    stop = asyncio.Event()
    task = asyncio.create_task(run_worker(settings, stop))
    try:

        async def ready() -> bool:
            try:
                return (await asyncio.to_thread(get, f"http://{health}/readyz")) == (200, "ok\n")
            except OSError:  # not listening yet
                return False

        await until(ready, 60, "/readyz answering 200")
        assert await asyncio.to_thread(get, f"http://{health}/healthz") == (200, "ok\n")
        assert (await asyncio.to_thread(get, f"http://{health}/nope"))[0] == 404
        samples = await asyncio.to_thread(fetch, f"http://{metrics}/metrics")
        # The SDK's own metrics, with its default prefix, on the same endpoint growth's go to.
        assert any(name.startswith("temporal_") for name, _, _ in samples)
    finally:
        stop.set()
        await asyncio.wait_for(task, 60)
    with pytest.raises(OSError):  # the probes stop with the worker
        await asyncio.to_thread(get, f"http://{health}/healthz")


async def test_readiness_is_false_until_the_worker_polls(temporal_server: TemporalServer) -> None:
    client = await temporal_server.client()
    worker = new_worker(client, "never-started")
    ok, why = await Health(client, worker).ready()
    assert not ok and "not polling" in why


def test_a_taken_metrics_port_is_an_error_naming_the_setting() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        address = f"127.0.0.1:{taken.getsockname()[1]}"
        with pytest.raises(SettingsError, match="observability.metrics_address"):
            metrics_runtime(ObservabilitySettings(metrics_address=address))
    assert metrics_runtime(ObservabilitySettings(metrics_address="0")) is None
