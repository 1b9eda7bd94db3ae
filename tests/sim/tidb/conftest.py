"""Fixtures: a simulated cluster with room for TiDB pods, and the TiDB world attached to it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from kubernetes import client

from activities.answers import verified_context
from sim.cluster import FakeCluster
from sim.tidb.world import FakeTidb
from tests.polling import eventually
from tests.sim.conftest import node_body, ready_nodes

NS = "tidb"


def tidb_world(cluster: FakeCluster, core: client.CoreV1Api) -> FakeTidb:
    """The namespace NS, three Ready 32-core nodes, and a FakeTidb on the cluster (not started)."""
    core.create_namespace({"metadata": {"name": NS}})
    for i in range(3):
        core.create_node(node_body(f"db-{i}", cpu="32", memory="128Gi"))
    ready_nodes(core, "db-0", "db-1", "db-2")
    return FakeTidb(cluster.store, operator_interval=0.05)


@pytest.fixture
def world(cluster: FakeCluster, core: client.CoreV1Api) -> Iterator[FakeTidb]:
    with tidb_world(cluster, core) as tidb:
        yield tidb


@pytest.fixture
def http(world: FakeTidb) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=world.server.url, timeout=10, verify=verified_context()) as c:
        yield c


def tc_body(
    name: str,
    *,
    tikv: int = 3,
    tidb: int = 2,
    pd: int | None = 1,
    tikv_cpu: str = "2",
    tidb_cpu: str = "4",
    storage: str = "100Gi",
    labels: dict[str, str] | None = None,
    base: str | None = None,
    tikv_config: dict[str, Any] | None = None,
    tidb_config: dict[str, Any] | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "version": "v8.5.0",
        "tikv": {
            "replicas": tikv,
            "requests": {"cpu": tikv_cpu, "memory": "4Gi", "storage": storage},
            "limits": {"cpu": tikv_cpu, "memory": "4Gi"},
        },
        "tidb": {"replicas": tidb, "requests": {"cpu": tidb_cpu, "memory": "8Gi"}},
    }
    if pd is not None:
        spec["pd"] = {"replicas": pd, "requests": {"cpu": "1", "memory": "1Gi"}}
    if tikv_config is not None:
        spec["tikv"]["config"] = tikv_config
    if tidb_config is not None:
        spec["tidb"]["config"] = tidb_config
    if base is not None:
        spec["cluster"] = {"name": base}
    return {
        "apiVersion": "pingcap.com/v1alpha1",
        "kind": "TidbCluster",
        "metadata": {"name": name, "labels": labels or {}},
        "spec": spec,
    }


def running(http: httpx.Client, count: int, component: str | None = None) -> list[dict[str, Any]]:
    """Wait until `count` tikv/tidb instances (of `component`) run; returns them."""

    def probe() -> tuple[list[dict[str, Any]]] | None:
        found = [
            i
            for i in http.get("/sim/v1/instances").json()["instances"]
            if component is None or i["component"] == component
        ]
        return (found,) if len(found) == count else None

    return eventually(probe, timeout=60, message=f"{count} running {component or 'tikv/tidb'} instances")[0]
