"""KWOK-like node lifecycle: Ready after a delay, never-ready faults, pods start Running.

No test depends on how fast this machine is: "not Ready yet" is asserted under an hour-long
ready delay that the test then lowers, and "never Ready" is read once a node created later
has become Ready (KWOK handles nodes in creation order, with one clock reading per pass, so a
later node is never Ready before an earlier one would have been).
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from kubernetes import client, watch

from sim.cluster import FakeCluster
from tests.polling import eventually
from tests.sim.conftest import is_ready, node_body, pod_body, ready_nodes

HOUR = 3600.0
DELAY = 0.4


@pytest.fixture
def slow() -> Iterator[FakeCluster]:
    with FakeCluster(node_ready_delay=HOUR, pod_start_delay=0.05, scheduler_interval=0.05) as sim:
        yield sim


@pytest.fixture
def score(slow: FakeCluster) -> Iterator[client.CoreV1Api]:
    api = slow.api_client()
    yield client.CoreV1Api(api)
    api.close()


def ready_delay(cluster: FakeCluster, seconds: float) -> None:
    assert (
        cluster.control_request("POST", "/sim/v1/settings", {"node_ready_delay": seconds})["node_ready_delay"]
        == seconds
    )


def test_node_is_not_ready_before_its_delay(slow: FakeCluster, score: client.CoreV1Api) -> None:
    score.create_node(node_body("k0"))
    assert not is_ready(score.read_node("k0"))  # an hour has not passed
    ready_delay(slow, 0)
    eventually(lambda: is_ready(score.read_node("k0")), message="k0 Ready once the delay is over")


def test_node_becomes_ready_no_sooner_than_the_delay(slow: FakeCluster, score: client.CoreV1Api) -> None:
    ready_delay(slow, DELAY)
    created = time.monotonic()
    score.create_node(node_body("k1", cpu="3", memory="6Gi", pods="20"))
    node = eventually(lambda: (lambda n: is_ready(n) and n)(score.read_node("k1")), message="k1 Ready")
    assert time.monotonic() - created >= DELAY  # a lower bound: a slow machine only adds to it
    assert node.status.allocatable == {"cpu": "3", "memory": "6Gi", "pods": "20"}  # defaults to capacity
    assert any(a.type == "InternalIP" for a in node.status.addresses)


def test_ready_transition_is_a_watch_event(slow: FakeCluster, score: client.CoreV1Api) -> None:
    start = score.list_node().metadata.resource_version
    score.create_node(node_body("k2"))
    ready_delay(slow, 0)
    for event in watch.Watch().stream(score.list_node, resource_version=start, timeout_seconds=60):
        if event["type"] == "MODIFIED" and is_ready(event["object"]):
            break
    else:
        pytest.fail("no MODIFIED event made k2 Ready")


def test_never_ready_fault(slow: FakeCluster, score: client.CoreV1Api) -> None:
    slow.control_request("POST", "/sim/v1/faults", {"never_ready_nodes": ["bad-*"]})
    assert slow.control_request("GET", "/sim/v1/faults")["never_ready_nodes"] == ["bad-*"]
    ready_delay(slow, DELAY)
    score.create_node(node_body("bad-1"))
    score.create_node(node_body("good-1"))
    eventually(lambda: is_ready(score.read_node("good-1")), message="good-1 Ready")
    # bad-1 was created first: without the fault it would be Ready by the time good-1 is.
    assert not is_ready(score.read_node("bad-1"))
    slow.control_request("DELETE", "/sim/v1/faults")
    eventually(lambda: is_ready(score.read_node("bad-1")), message="bad-1 Ready once the fault is lifted")


def test_nodes_without_kwok_annotation_are_left_alone(slow: FakeCluster, score: client.CoreV1Api) -> None:
    ready_delay(slow, 0)
    score.create_node(node_body("real", fake=False))
    score.create_node(node_body("fake"))
    eventually(lambda: is_ready(score.read_node("fake")), message="fake Ready")
    assert not is_ready(score.read_node("real"))  # created first: KWOK would have made it Ready already


def test_pods_on_kwok_node_run_and_become_ready(slow: FakeCluster, score: client.CoreV1Api) -> None:
    score.create_node(node_body("k3"))
    score.create_namespaced_pod("default", pod_body("direct", node_name="k3"))
    pod = score.read_namespaced_pod("direct", "default")
    assert pod.status.phase == "Pending"  # node not Ready (an hour's delay): nothing runs
    ready_delay(slow, 0)
    pod = eventually(
        lambda: (lambda p: p.status.phase == "Running" and p)(score.read_namespaced_pod("direct", "default")),
        message="pod Running",
    )
    conditions = {c.type: c.status for c in pod.status.conditions}
    assert conditions["Ready"] == "True" and conditions["ContainersReady"] == "True"
    assert pod.status.pod_ip and pod.status.container_statuses[0].ready is True


def test_a_node_keeps_the_extended_resources_it_was_created_with(cluster: FakeCluster, core: client.CoreV1Api) -> None:
    """A node made for a GPU type carries nvidia.com/gpu in capacity and allocatable once Ready,
    and a pod asking for one runs there."""
    body = node_body("gpu-0")
    body["status"]["capacity"].update({"nvidia.com/gpu": "4", "ephemeral-storage": "200Gi", "hugepages-2Mi": "1Gi"})
    core.create_node(body)
    ready_nodes(core, "gpu-0")
    node = core.read_node("gpu-0")
    for resources in (node.status.capacity, node.status.allocatable):
        assert (resources["nvidia.com/gpu"], resources["ephemeral-storage"], resources["hugepages-2Mi"]) == (
            "4",
            "200Gi",
            "1Gi",
        )
    pod = pod_body("train")
    pod["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": "2"}}
    core.create_namespaced_pod("default", pod)
    eventually(lambda: core.read_namespaced_pod("train", "default").status.phase == "Running", message="train runs")
