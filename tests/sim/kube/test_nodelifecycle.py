"""The node lifecycle controller's NoSchedule condition taints (sim/kube/nodelifecycle.py).

Facts from kubernetes/kubernetes pkg/controller/nodelifecycle/node_lifecycle_controller.go
(doNoScheduleTaintingPass, nodeConditionToTaintKeyStatusMap), its _test.go
(TestTaintsNodeByCondition: a condition in a status the map does not name adds nothing) and
pkg/controller/util/node/controller_utils.go (SwapNodeControllerTaint sets timeAdded): Ready
False -> not-ready, Unknown -> unreachable, DiskPressure True -> disk-pressure,
spec.unschedulable -> unschedulable; only NoSchedule taints of those keys are the controller's.
The kube-scheduler reads taints, not conditions (TaintToleration).

"Not Ready yet" is held by an hour-long ready delay, and "still tainted after Ready" by an
hour-long lag, that a test then lowers; nodes whose conditions a test sets are not KWOK's.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import pytest
from kubernetes import client

from sim.cluster import FakeCluster
from sim.kube.control import FakeControl
from sim.kube.nodelifecycle import NodeLifecycle
from sim.kube.store import Store
from tests.polling import eventually
from tests.sim.conftest import has_taint, is_ready, node_body, pod_body

HOUR = 3600.0
NOT_READY = "node.kubernetes.io/not-ready"
UNREACHABLE = "node.kubernetes.io/unreachable"
DISK_PRESSURE = "node.kubernetes.io/disk-pressure"
UNSCHEDULABLE = "node.kubernetes.io/unschedulable"
TO_BE_DELETED = "ToBeDeletedByClusterAutoscaler"


@pytest.fixture
def sim() -> Iterator[FakeCluster]:
    with FakeCluster(node_ready_delay=HOUR, pod_start_delay=0.05, run_scheduler=False) as cluster:
        cluster.control.pod_initial_backoff = cluster.control.pod_max_backoff = 0.0
        yield cluster


@pytest.fixture
def core(sim: FakeCluster) -> Iterator[client.CoreV1Api]:
    api = sim.api_client()
    yield client.CoreV1Api(api)
    api.close()


def settings(sim: FakeCluster, **values: float) -> None:
    answer = sim.control_request("POST", "/sim/v1/settings", values)
    assert all(answer[k] == v for k, v in values.items())


def keys(core: client.CoreV1Api, name: str) -> list[tuple[str, str]]:
    return [(t.key, t.effect) for t in core.read_node(name).spec.taints or []]


def tainted(core: client.CoreV1Api, name: str, key: str) -> bool:
    return has_taint(core.read_node(name), key)


def set_conditions(core: client.CoreV1Api, name: str, **statuses: str) -> None:
    """Set conditions by type, as a kubelet posts them (merged by type)."""
    conditions = [{"type": kind, "status": status} for kind, status in statuses.items()]
    core.patch_node_status(name, {"status": {"conditions": conditions}})


def test_a_new_node_is_tainted_not_ready_and_loses_it_once_ready(sim: FakeCluster, core: client.CoreV1Api) -> None:
    """Tainted by the API server as it is created (the TaintNodesByCondition admission plugin,
    plugin/pkg/admission/nodetaint/admission.go: key and effect, no value or timeAdded), so no pod
    binds before the controller's first pass (growth's KWOK nodes are created NotReady: one got a pod
    in that window, 30 Nov); one that brings the taint keeps it once."""
    created = core.create_node(node_body("k0"))
    assert [(t.key, t.effect, t.value, t.time_added) for t in created.spec.taints] == [
        (NOT_READY, "NoSchedule", None, None)
    ]
    brought = node_body("k1", taints=[{"key": NOT_READY, "effect": "NoSchedule"}, {"key": "a", "effect": "NoExecute"}])
    assert keys(core, core.create_node(brought).metadata.name) == [(NOT_READY, "NoSchedule"), ("a", "NoExecute")]
    # Created Ready, it would lose the taint on the controller's first pass, milliseconds on: the
    # simulator leaves it off (sim/kube/store.py).
    ready = node_body("k2", fake=False)
    ready["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
    assert keys(core, core.create_node(ready).metadata.name) == []
    assert not is_ready(core.read_node("k0"))  # an hour has not passed
    settings(sim, node_ready_delay=0)
    eventually(
        lambda: (lambda n: is_ready(n) and not has_taint(n, NOT_READY))(core.read_node("k0")),
        message="k0 Ready and untainted",
    )


def test_the_lag_keeps_not_ready_after_ready_then_removes_it() -> None:
    """The controller driven pass by pass on a store: Ready with a 1 s lag keeps the taint."""
    store, control = Store(), FakeControl(node_taint_lag=1.0)
    controller = NodeLifecycle(store, control)
    nodes = store.builtin("nodes")
    store.create(nodes, "", {"metadata": {"name": "n"}, "spec": {}, "status": {}})
    controller.step()
    assert [t["key"] for t in store.find(nodes, "", "n")["spec"]["taints"]] == [NOT_READY]

    def ready(node: dict[str, Any]) -> dict[str, Any]:
        node["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
        return node

    store.mutate(nodes, "", "n", ready, "status")
    turned_ready = time.monotonic()
    controller.step()
    assert [t["key"] for t in store.find(nodes, "", "n")["spec"]["taints"]] == [NOT_READY]

    def untainted() -> bool:
        controller.step()
        return not store.find(nodes, "", "n")["spec"]["taints"]

    eventually(untainted, message="not-ready removed once the lag is over")
    assert time.monotonic() - turned_ready >= 1.0  # no sooner than the lag


def test_ready_unknown_gives_unreachable_and_disk_pressure_its_taint(sim: FakeCluster, core: client.CoreV1Api) -> None:
    core.create_node(node_body("n", fake=False))  # no KWOK: its conditions are the test's
    eventually(lambda: keys(core, "n") == [(NOT_READY, "NoSchedule")], message="n tainted not-ready")
    set_conditions(core, "n", Ready="Unknown")
    eventually(lambda: keys(core, "n") == [(UNREACHABLE, "NoSchedule")], message="not-ready swapped for unreachable")
    taint = core.read_node("n").spec.taints[0]
    assert isinstance(taint.time_added, datetime)  # the controller's own: RFC 3339 on the wire, parsed
    set_conditions(core, "n", Ready="True", DiskPressure="True", MemoryPressure="Unknown")
    eventually(lambda: keys(core, "n") == [(DISK_PRESSURE, "NoSchedule")], message="disk-pressure only")
    set_conditions(core, "n", DiskPressure="False")
    eventually(lambda: keys(core, "n") == [], message="disk-pressure removed")


def test_others_taints_are_kept_in_order_and_cordon_is_tainted(sim: FakeCluster, core: client.CoreV1Api) -> None:
    taints = [
        {"key": "dedicated", "value": "db", "effect": "NoSchedule"},
        {"key": TO_BE_DELETED, "value": "1700000000", "effect": "NoSchedule"},
        {"key": NOT_READY, "effect": "NoExecute"},  # NoExecute: not this pass's
    ]
    core.create_node(node_body("n", fake=False, taints=taints))
    others = [(t["key"], t["effect"]) for t in taints]
    eventually(lambda: keys(core, "n") == [*others, (NOT_READY, "NoSchedule")], message="not-ready appended")
    core.patch_node("n", {"spec": {"unschedulable": True}})
    eventually(
        lambda: keys(core, "n") == [*others, (NOT_READY, "NoSchedule"), (UNSCHEDULABLE, "NoSchedule")],
        message="cordon tainted unschedulable",
    )
    set_conditions(core, "n", Ready="True")
    core.patch_node("n", {"spec": {"unschedulable": False}})
    eventually(lambda: keys(core, "n") == others, message="the controller's taints gone, the others kept")
    values = {t.key: t.value for t in core.read_node("n").spec.taints}
    assert values["dedicated"] == "db" and values[TO_BE_DELETED] == "1700000000"


def test_no_pod_on_a_ready_node_that_still_carries_not_ready(sim: FakeCluster, core: client.CoreV1Api) -> None:
    settings(sim, node_taint_lag=HOUR)
    core.create_node(node_body("k1"))
    eventually(lambda: tainted(core, "k1", NOT_READY), message="k1 tainted not-ready")
    settings(sim, node_ready_delay=0)
    eventually(lambda: is_ready(core.read_node("k1")), message="k1 Ready")
    core.create_namespaced_pod("default", pod_body("p", cpu="1"))
    sim.scheduler.schedule_once()
    assert tainted(core, "k1", NOT_READY)  # so the pass above saw it tainted
    pod = core.read_namespaced_pod("p", "default")
    assert pod.spec.node_name is None
    condition = next(c for c in pod.status.conditions if c.type == "PodScheduled")
    assert condition.message == (
        "0/1 nodes are available: 1 node(s) had untolerated taint {node.kubernetes.io/not-ready: }."
    )
    settings(sim, node_taint_lag=0)
    eventually(lambda: not tainted(core, "k1", NOT_READY), message="not-ready removed once the lag is lowered")

    def bound() -> str | None:
        sim.scheduler.schedule_once()
        return core.read_namespaced_pod("p", "default").spec.node_name

    assert eventually(bound, message="p bound") == "k1"


def test_a_pod_tolerating_not_ready_may_go_to_a_not_ready_node(sim: FakeCluster, core: client.CoreV1Api) -> None:
    core.create_node(node_body("k2"))
    eventually(lambda: tainted(core, "k2", NOT_READY), message="k2 tainted not-ready")
    tolerating = pod_body("tolerant", tolerations=[{"key": NOT_READY, "operator": "Exists", "effect": "NoSchedule"}])
    core.create_namespaced_pod("default", tolerating)
    core.create_namespaced_pod("default", pod_body("plain"))
    sim.scheduler.schedule_once()
    assert core.read_namespaced_pod("tolerant", "default").spec.node_name == "k2"
    assert core.read_namespaced_pod("plain", "default").spec.node_name is None
