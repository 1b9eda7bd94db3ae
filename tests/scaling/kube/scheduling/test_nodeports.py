"""NodePorts, ported from kubernetes/kubernetes
pkg/scheduler/framework/plugins/nodeports/node_ports_test.go (TestNodePorts): each case names
the upstream case. Ports are written "protocol/hostIP/hostPort" as upstream's newPod does."""

from __future__ import annotations

import pytest

from scaling.kube.models import NodeInfo
from scaling.kube.scheduling import nodeports
from scaling.kube.scheduling.terms import HostPort, host_ports


def ports(*specs: str) -> list[HostPort]:
    out = []
    for s in specs:
        proto, ip, port = s.split("/")
        out += host_ports(
            {
                "containers": [
                    {"ports": [{"containerPort": int(port), "hostPort": int(port), "protocol": proto, "hostIP": ip}]}
                ]
            }
        )
    return out


CASES = [
    ("nothing running", [], [], False),
    ("other port", ["UDP/127.0.0.1/8080"], ["UDP/127.0.0.1/9090"], False),
    ("same udp port", ["UDP/127.0.0.1/8080"], ["UDP/127.0.0.1/8080"], True),
    ("same tcp port", ["TCP/127.0.0.1/8080"], ["TCP/127.0.0.1/8080"], True),
    ("different host ip", ["TCP/127.0.0.1/8080"], ["TCP/127.0.0.2/8080"], False),
    ("different protocol", ["UDP/127.0.0.1/8080"], ["TCP/127.0.0.1/8080"], False),
    ("second udp port conflict", ["UDP/127.0.0.1/8000", "UDP/127.0.0.1/8080"], ["UDP/127.0.0.1/8080"], True),
    (
        "first tcp port conflict",
        ["TCP/127.0.0.1/8001", "UDP/127.0.0.1/8080"],
        ["TCP/127.0.0.1/8001", "UDP/127.0.0.1/8081"],
        True,
    ),
    ("first tcp port conflict due to 0.0.0.0 hostIP", ["TCP/0.0.0.0/8001"], ["TCP/127.0.0.1/8001"], True),
    (
        "TCP hostPort conflict due to 0.0.0.0 hostIP",
        ["TCP/10.0.10.10/8001", "TCP/0.0.0.0/8001"],
        ["TCP/127.0.0.1/8001"],
        True,
    ),
    ("second tcp port conflict to 0.0.0.0 hostIP", ["TCP/127.0.0.1/8001"], ["TCP/0.0.0.0/8001"], True),
    ("second different protocol", ["UDP/127.0.0.1/8001"], ["TCP/0.0.0.0/8001"], False),
    (
        "UDP hostPort conflict due to 0.0.0.0 hostIP",
        ["UDP/127.0.0.1/8001"],
        ["TCP/0.0.0.0/8001", "UDP/0.0.0.0/8001"],
        True,
    ),
]


@pytest.mark.parametrize(("name", "wanted", "used", "refused"), CASES, ids=[c[0] for c in CASES])
def test_node_ports(name: str, wanted: list[str], used: list[str], refused: bool) -> None:
    node = NodeInfo(name="n", host_ports=ports(*used))
    r = nodeports.filter(ports(*wanted), node)
    assert (r is not None) == refused
    if refused:
        assert r.reason == "node(s) didn't have free ports for the requested pod ports"


def test_empty_host_ip_reads_as_every_ip_and_container_ports_without_host_port_bind_nothing() -> None:
    spec = {"containers": [{"ports": [{"containerPort": 80, "hostPort": 80}, {"containerPort": 81}]}]}
    assert host_ports(spec) == (HostPort(port=80, protocol="TCP", ip="0.0.0.0"),)
