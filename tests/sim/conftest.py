"""Fixtures: a FakeCluster per test with short delays, and official-client API objects."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, TypeVar

import pytest
from kubernetes import client

from sim.cluster import FakeCluster
from tests.polling import eventually

T = TypeVar("T")


@pytest.fixture
def cluster() -> Iterator[FakeCluster]:
    with FakeCluster(node_ready_delay=0.1, pod_start_delay=0.05, scheduler_interval=0.05) as sim:
        yield sim


@pytest.fixture
def api_client(cluster: FakeCluster) -> Iterator[client.ApiClient]:
    api = cluster.api_client()
    yield api
    api.close()


@pytest.fixture
def core(api_client: client.ApiClient) -> client.CoreV1Api:
    return client.CoreV1Api(api_client)


@pytest.fixture
def apps(api_client: client.ApiClient) -> client.AppsV1Api:
    return client.AppsV1Api(api_client)


@pytest.fixture
def policy(api_client: client.ApiClient) -> client.PolicyV1Api:
    return client.PolicyV1Api(api_client)


@pytest.fixture
def custom(api_client: client.ApiClient) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(api_client)


@pytest.fixture
def apiext(api_client: client.ApiClient) -> client.ApiextensionsV1Api:
    return client.ApiextensionsV1Api(api_client)


def pod_body(
    name: str | None = None,
    *,
    labels: dict[str, str] | None = None,
    cpu: str | None = None,
    memory: str | None = None,
    node_selector: dict[str, str] | None = None,
    tolerations: list[dict[str, Any]] | None = None,
    node_name: str | None = None,
    generate_name: str | None = None,
) -> dict[str, Any]:
    requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v is not None}
    meta: dict[str, Any] = {"labels": labels or {}}
    if name:
        meta["name"] = name
    if generate_name:
        meta["generateName"] = generate_name
    spec: dict[str, Any] = {
        "containers": [{"name": "app", "image": "registry.local/app:1", "resources": {"requests": requests}}]
    }
    if node_selector:
        spec["nodeSelector"] = node_selector
    if tolerations:
        spec["tolerations"] = tolerations
    if node_name:
        spec["nodeName"] = node_name
    return {"metadata": meta, "spec": spec}


def deployment_body(name: str, replicas: int, image: str = "img") -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "c", "image": image}]},
            },
        },
    }


def ready_replicas(apps: client.AppsV1Api, name: str, namespace: str = "default") -> int:
    status = apps.read_namespaced_deployment(name, namespace).status  # None until the controller writes it
    return int((status.ready_replicas if status else 0) or 0)


def node_body(
    name: str,
    *,
    cpu: str = "4",
    memory: str = "8Gi",
    pods: str = "110",
    fake: bool = True,
    labels: dict[str, str] | None = None,
    taints: list[dict[str, str]] | None = None,
) -> dict[str, Any]:
    annotations = {"kwok.x-k8s.io/node": "fake"} if fake else {}
    spec: dict[str, Any] = {"taints": taints} if taints else {}
    return {
        "metadata": {"name": name, "labels": labels or {}, "annotations": annotations},
        "spec": spec,
        "status": {"capacity": {"cpu": cpu, "memory": memory, "pods": pods}},
    }


def is_ready(node: Any) -> bool:
    return any(c.type == "Ready" and c.status == "True" for c in (node.status.conditions or []))


def has_taint(node: Any, key: str) -> bool:
    return any(t.key == key for t in (node.spec.taints or []))


def ready_nodes(core: client.CoreV1Api, *names: str) -> None:
    """Wait until the nodes are Ready and the node lifecycle controller has taken their
    not-ready taint off (the scheduler reads only taints)."""

    def usable(name: str) -> bool:
        node = core.read_node(name)
        return is_ready(node) and not has_taint(node, "node.kubernetes.io/not-ready")

    eventually(lambda: all(usable(n) for n in names), message=f"nodes {names} Ready and untainted")
