from datetime import UTC, datetime
from typing import Any

import pytest

from scaling.kube.models import Resources, Taint
from scaling.kube.nodes import STARTUP_MARK_PREFIX, node_info, node_is_ready, startup_mark

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


# Cluster Autoscaler's cases (cluster-autoscaler/utils/kubernetes/ready_test.go, TestGetReadiness):
# the condition, its status, a NoSchedule taint on the node, and whether the node counts as Ready.
READINESS_CASES = [
    ("ready", "Ready", "True", "", True),
    ("unready and unready taint", "Ready", "False", "node.kubernetes.io/not-ready", False),
    ("readiness unknown and unready taint", "Ready", "Unknown", "node.kubernetes.io/not-ready", False),
    ("disk pressure and disk pressure taint", "DiskPressure", "True", "node.kubernetes.io/disk-pressure", False),
    (
        "network unavailable and network unavailable taint",
        "NetworkUnavailable",
        "True",
        "node.kubernetes.io/network-unavailable",
        False,
    ),
    ("ready but unready taint", "Ready", "True", "node.kubernetes.io/not-ready", False),
    ("no disk pressure but disk pressure taint", "DiskPressure", "False", "node.kubernetes.io/disk-pressure", False),
    (
        "network available but network unavailable taint",
        "NetworkUnavailable",
        "False",
        "node.kubernetes.io/network-unavailable",
        False,
    ),
]


@pytest.mark.parametrize(
    ("desc", "kind", "status", "taint", "ready"), READINESS_CASES, ids=[c[0] for c in READINESS_CASES]
)
def test_readiness_as_cluster_autoscaler_reads_it(desc: str, kind: str, status: str, taint: str, ready: bool) -> None:
    conditions = [{"type": kind, "status": status}]
    if kind != "Ready":
        conditions.append({"type": "Ready", "status": "True"})
    obj = node(conditions=conditions)
    obj["spec"]["taints"] = [{"key": taint, "effect": "NoSchedule"}] if taint else []
    assert node_is_ready(obj) is ready
    assert node_info(obj, []).ready is ready


def test_a_node_without_a_ready_condition_is_not_ready() -> None:
    assert not node_is_ready(node(conditions=[{"type": "DiskPressure", "status": "False"}]))
    assert not node_is_ready({"metadata": {"name": "n1"}})


def test_other_taints_leave_a_ready_node_ready() -> None:
    obj = node()  # its taint k=v:NoSchedule is a user's
    obj["spec"]["taints"].append({"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"})
    assert node_is_ready(obj)


def test_a_startup_taint_keeps_a_node_unready_and_a_status_taint_does_not() -> None:
    """Cluster Autoscaler (utils/taints FilterOutNodesWithStartupTaints): a node carrying a taint of the
    ignore-taint or startup-taint prefix is read as not Ready; the status-taint prefix is not."""
    for key, ready in (
        ("startup-taint.cluster-autoscaler.kubernetes.io/cni", False),
        ("ignore-taint.cluster-autoscaler.kubernetes.io/cni", False),
        ("status-taint.cluster-autoscaler.kubernetes.io/gpu", True),
    ):
        obj = node()
        obj["spec"]["taints"] = [{"key": key, "effect": "NoSchedule"}]
        assert node_is_ready(obj) is ready, key


def test_a_taint_the_node_marks_as_startup_keeps_it_unready() -> None:
    """A group's startupTaints (Karpenter's) under any key: the node growth registers carries a label
    naming each, and is not Ready while it carries one of them. The same taint unmarked is a taint like
    any other."""
    obj = node()
    obj["spec"]["taints"] = [{"key": "node.cilium.io/agent-not-ready", "value": "true", "effect": "NoExecute"}]
    assert node_is_ready(obj)
    obj["metadata"]["labels"][STARTUP_MARK_PREFIX + startup_mark("node.cilium.io/agent-not-ready")] = "true"
    assert not node_is_ready(obj)
    obj["spec"]["taints"] = []  # the agent lifted it
    assert node_is_ready(obj)
    # A label name is 63 characters, alphanumeric at both ends: other keys go by their hash.
    long = "example.com/" + "x" * 60
    assert startup_mark("node.cilium.io/agent-not-ready") == "node.cilium.io_agent-not-ready"
    assert len(startup_mark(long)) <= 63 and startup_mark(long) != startup_mark(long + "y")
    assert startup_mark("_odd") != "_odd"
