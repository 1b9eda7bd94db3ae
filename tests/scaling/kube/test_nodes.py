from datetime import UTC, datetime
from typing import Any

from scaling.kube.models import Resources, Taint
from scaling.kube.nodes import node_info

GI = 2**30


def node(**status: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "n1", "labels": {"a": "b"}, "creationTimestamp": "2024-05-01T10:00:00Z"},
        "spec": {
            "providerID": "kwok://n1",
            "taints": [{"key": "k", "value": "v", "effect": "NoSchedule"}],
        },
        "status": {"conditions": [{"type": "Ready", "status": "True"}], **status},
    }


def running(cpu: str, mem: str, phase: str = "Running") -> dict[str, Any]:
    return {
        "metadata": {"name": "p"},
        "spec": {
            "nodeName": "n1",
            "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": mem}}}],
        },
        "status": {"phase": phase},
    }


def test_node_info_reads_allocatable_requested_and_metadata() -> None:
    info = node_info(
        node(
            allocatable={"cpu": "3920m", "memory": "8Gi", "pods": "110"},
            capacity={"cpu": "4", "memory": "9Gi", "pods": "110"},
        ),
        [running("1", "1Gi"), running("500m", "1Gi"), running("8", "8Gi", phase="Succeeded")],
    )
    assert info.ready
    assert info.allocatable == Resources(cpu_m=3920, memory=8 * GI, pods=110)
    assert info.requested == Resources(cpu_m=1500, memory=2 * GI, pods=2)  # the finished pod frees its room
    assert info.taints == [Taint(key="k", value="v", effect="NoSchedule")]
    assert info.provider_id == "kwok://n1"
    assert info.labels == {"a": "b"}
    assert info.created_at == datetime(2024, 5, 1, 10, tzinfo=UTC)
    assert not info.unschedulable


def test_capacity_is_used_when_allocatable_is_missing() -> None:
    info = node_info(node(capacity={"cpu": "4", "memory": "8Gi", "pods": "110"}), [])
    assert info.allocatable == Resources(cpu_m=4000, memory=8 * GI, pods=110)


def test_not_ready_and_cordoned() -> None:
    n = node(conditions=[{"type": "Ready", "status": "Unknown"}])
    n["spec"]["unschedulable"] = True
    info = node_info(n, [])
    assert not info.ready and info.unschedulable
