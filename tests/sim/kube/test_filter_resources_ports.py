"""NodeResourcesFit and NodePorts, cases from kubernetes/kubernetes
pkg/scheduler/framework/plugins/noderesources/fit_test.go (TestEnoughRequests),
pkg/scheduler/framework/plugins/nodeports/node_ports_test.go (TestNodePorts) and
k8s.io/component-helpers/resource/helpers_test.go (PodRequests with restartable init containers),
against sim/kube/filters/resources.py and ports.py."""

from __future__ import annotations

from typing import Any

import pytest

from sim.kube.filters.ports import conflicts, host_ports
from sim.kube.filters.resources import allocatable, insufficient, pod_requests
from tests.sim.kube.objects import Obj, make_node, make_pod


def container(name: str, restart: str | None = None, **requests: str) -> Obj:
    c: Obj = {
        "name": name,
        "image": "x",
        "resources": {"requests": {k.replace("_", "-"): v for k, v in requests.items()}},
    }
    if restart:
        c["restartPolicy"] = restart
    return c


def pod_of(containers: list[Obj], init: list[Obj] | None = None, overhead: dict[str, str] | None = None) -> Obj:
    spec: dict[str, Any] = {"containers": containers, "initContainers": init or []}
    if overhead:
        spec["overhead"] = overhead
    return {"metadata": {"name": "p", "namespace": "default"}, "spec": spec}


@pytest.mark.parametrize(
    ("name", "pod", "want"),
    [
        (
            "init container fits because it's the max, not sum, of containers and init containers",
            pod_of([container("a", cpu="1", memory="1")], [container("i1", cpu="3", memory="1")]),
            {"cpu": 3000, "memory": 1},
        ),
        (
            "restartable init containers run beside the containers: summed",
            pod_of([container("a", cpu="1")], [container("s1", "Always", cpu="1"), container("s2", "Always", cpu="2")]),
            {"cpu": 4000},
        ),
        (
            "an ordinary init container after a sidecar runs with it: max(containers + sidecars, init + sidecars before)",
            pod_of([container("a", cpu="1")], [container("s1", "Always", cpu="1"), container("i1", cpu="5")]),
            {"cpu": 6000},
        ),
        (
            "an init container before the sidecar runs alone",
            pod_of([container("a", cpu="1")], [container("i1", cpu="3"), container("s1", "Always", cpu="1")]),
            {"cpu": 3000},
        ),
        (
            "overhead is added",
            pod_of([container("a", cpu="1", memory="1Gi")], overhead={"cpu": "250m", "memory": "120Mi"}),
            {"cpu": 1250, "memory": (1024 + 120) * 2**20},
        ),
    ],
)
def test_pod_requests(name: str, pod: Obj, want: dict[str, int]) -> None:
    got = pod_requests(pod)
    assert got.pop("pods") == 1
    assert {k: v for k, v in got.items() if v} == want


def test_extended_resources_hugepages_and_ephemeral_storage_are_read() -> None:
    c = {
        "name": "a",
        "image": "x",
        "resources": {
            "limits": {"nvidia.com/gpu": "2"},
            "requests": {"hugepages-2Mi": "4Mi", "ephemeral-storage": "1Gi"},
        },
    }
    req = pod_requests(pod_of([c]))
    assert (req["nvidia.com/gpu"], req["hugepages-2Mi"], req["ephemeral-storage"]) == (2, 4 * 2**20, 2**30)


NODE = make_node(
    "n",
    alloc={
        "cpu": "10",
        "memory": "20",
        "pods": "32",
        "ephemeral-storage": "20",
        "example.com/aaa": "5",
        "hugepages-2Mi": "2Mi",
    },
)


@pytest.mark.parametrize(
    ("name", "requests", "used", "want"),
    [
        ("no resources requested always fits", {}, {"cpu": 10_000, "memory": 20}, []),
        (
            "too many resources fails",
            {"cpu": "1", "memory": "1"},
            {"cpu": 10_000, "memory": 20},
            ["Insufficient cpu", "Insufficient memory"],
        ),
        ("equal edge case", {"cpu": "5", "memory": "19"}, {"cpu": 5000, "memory": 1}, []),
        ("extended resource fits", {"example.com/aaa": "1"}, {}, []),
        ("extended resource capacity enforced", {"example.com/aaa": "10"}, {}, ["Insufficient example.com/aaa"]),
        (
            "extended resource allocatable enforced for used",
            {"example.com/aaa": "1"},
            {"example.com/aaa": 5},
            ["Insufficient example.com/aaa"],
        ),
        ("extended resource the node does not offer", {"example.com/bbb": "1"}, {}, ["Insufficient example.com/bbb"]),
        ("hugepages enforced", {"hugepages-2Mi": "4Mi"}, {}, ["Insufficient hugepages-2Mi"]),
        ("ephemeral local storage is enforced", {"ephemeral-storage": "25"}, {}, ["Insufficient ephemeral-storage"]),
        ("ephemeral local storage fits", {"ephemeral-storage": "10"}, {}, []),
        ("one pod slot left is taken", {}, {"pods": 32}, ["Too many pods"]),
    ],
)
def test_enough_requests(name: str, requests: dict[str, str], used: dict[str, int], want: list[str]) -> None:
    pod = make_pod(requests=requests)
    assert insufficient(pod_requests(pod), used, allocatable(NODE)) == want


def port(proto: str, ip: str, number: int) -> Obj:
    return {"containerPort": number, "hostPort": number, "protocol": proto, "hostIP": ip}


@pytest.mark.parametrize(
    ("name", "wanted", "existing", "fits"),
    [
        ("nothing running", [port("UDP", "127.0.0.1", 8080)], [], True),
        ("other port", [port("UDP", "127.0.0.1", 8080)], [port("UDP", "127.0.0.1", 9090)], True),
        ("same udp port", [port("UDP", "127.0.0.1", 8080)], [port("UDP", "127.0.0.1", 8080)], False),
        ("same tcp port", [port("TCP", "127.0.0.1", 8080)], [port("TCP", "127.0.0.1", 8080)], False),
        ("different host ip", [port("TCP", "127.0.0.1", 8080)], [port("TCP", "127.0.0.2", 8080)], True),
        ("different protocol", [port("UDP", "127.0.0.1", 8080)], [port("TCP", "127.0.0.1", 8080)], True),
        (
            "second udp port conflict",
            [port("UDP", "127.0.0.1", 8000), port("UDP", "127.0.0.1", 8080)],
            [port("UDP", "127.0.0.1", 8080)],
            False,
        ),
        (
            "first tcp port conflict",
            [port("TCP", "127.0.0.1", 8001), port("UDP", "127.0.0.1", 8080)],
            [port("TCP", "127.0.0.1", 8001), port("UDP", "127.0.0.1", 8081)],
            False,
        ),
        (
            "first tcp port conflict due to 0.0.0.0 hostIP",
            [port("TCP", "0.0.0.0", 8001)],
            [port("TCP", "127.0.0.1", 8001)],
            False,
        ),
        (
            "TCP hostPort conflict due to 0.0.0.0 hostIP",
            [port("TCP", "10.0.10.10", 8001), port("TCP", "0.0.0.0", 8001)],
            [port("TCP", "127.0.0.1", 8001)],
            False,
        ),
        (
            "second tcp port conflict to 0.0.0.0 hostIP",
            [port("TCP", "127.0.0.1", 8001)],
            [port("TCP", "0.0.0.0", 8001)],
            False,
        ),
        ("second different protocol", [port("UDP", "0.0.0.0", 8001)], [port("TCP", "0.0.0.0", 8001)], True),
        (
            "UDP hostPort conflict due to 0.0.0.0 hostIP",
            [port("TCP", "0.0.0.0", 8001), port("UDP", "0.0.0.0", 8001)],
            [port("UDP", "127.0.0.1", 8001)],
            False,
        ),
        (
            "an empty hostIP is 0.0.0.0 and the protocol defaults to TCP",
            [{"containerPort": 80, "hostPort": 80}],
            [port("TCP", "10.1.1.1", 80)],
            False,
        ),
        ("a containerPort without hostPort takes nothing", [{"containerPort": 80}], [port("TCP", "0.0.0.0", 80)], True),
    ],
)
def test_node_ports(name: str, wanted: list[Obj], existing: list[Obj], fits: bool) -> None:
    pod, other = make_pod(ports=wanted), make_pod("o", ports=existing)
    assert conflicts(host_ports(pod), host_ports(other)) is not fits
