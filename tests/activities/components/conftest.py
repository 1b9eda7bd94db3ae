"""Fixtures: a simulated cluster with three roomy nodes, the TiDB world beside it, and clients
built the way the worker builds them (kubeconfig file, settings)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from kubernetes import client

from activities.answers import verified_context
from activities.kube.client import api_client
from activities.settings import KubeSettings
from sim.cluster import FakeCluster
from sim.tidb.world import FakeTidb
from tests.sim.tidb.conftest import NS, running, tc_body, tidb_world  # noqa: F401 - shared with the sim tests

G, V, TC, TAC = "pingcap.com", "v1alpha1", "tidbclusters", "tidbclusterautoscalers"


@pytest.fixture
def sim() -> Iterator[FakeCluster]:
    with FakeCluster(node_ready_delay=0.1, pod_start_delay=0.05, scheduler_interval=0.05) as s:
        yield s


@pytest.fixture
def api(sim: FakeCluster, tmp_path: Path) -> Iterator[client.ApiClient]:
    built = api_client(KubeSettings(kubeconfig=str(sim.write_kubeconfig(tmp_path / "kubeconfig"))))
    yield built
    built.close()


@pytest.fixture
def custom(api: client.ApiClient) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(api)


@pytest.fixture
def world(sim: FakeCluster, api: client.ApiClient) -> Iterator[FakeTidb]:
    with tidb_world(sim, client.CoreV1Api(api)) as tidb:
        yield tidb


@pytest.fixture
def control(world: FakeTidb) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=world.server.url, timeout=10, verify=verified_context()) as c:
        yield c
