"""The simulated kube-scheduler: feasibility, scoring and the Unschedulable condition.

Most tests drive single passes (`schedule_once`) on a cluster whose scheduler loop is off, so
each pass's outcome is deterministic; one test checks the running loop end to end.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from sim.cluster import FakeCluster
from sim.kube.scheduler import pod_requests
from tests.polling import eventually
from tests.sim.conftest import has_taint, node_body, pod_body, ready_nodes


@pytest.fixture
def manual() -> Iterator[FakeCluster]:
    with FakeCluster(node_ready_delay=0.05, pod_start_delay=0.05, run_scheduler=False) as sim:
        # Each pass below stands for a retry after the pod's backoff (its own test covers that).
        sim.control.pod_initial_backoff = sim.control.pod_max_backoff = 0.0
        yield sim


@pytest.fixture
def mcore(manual: FakeCluster) -> Iterator[client.CoreV1Api]:
    api = manual.api_client()
    yield client.CoreV1Api(api)
    api.close()


def scheduled_condition(core: client.CoreV1Api, name: str) -> Any:
    pod = core.read_namespaced_pod(name, "default")
    return next((c for c in pod.status.conditions or [] if c.type == "PodScheduled"), None)


def test_binds_pending_pod_when_room(cluster: FakeCluster, core: client.CoreV1Api) -> None:
    core.create_node(node_body("n1", cpu="2"))
    ready_nodes(core, "n1")
    core.create_namespaced_pod("default", pod_body("p", cpu="1500m", memory="1Gi"))
    pod = eventually(
        lambda: (lambda p: p.status.phase == "Running" and p)(core.read_namespaced_pod("p", "default")),
        message="pod running",
    )
    assert pod.spec.node_name == "n1"
    assert pod.status.pod_ip


def test_unschedulable_condition_with_reason_and_stable_transition_time(
    manual: FakeCluster, mcore: client.CoreV1Api
) -> None:
    for name in ("a", "b", "c"):
        mcore.create_node(node_body(name, cpu="1"))
    ready_nodes(mcore, "a", "b", "c")
    mcore.create_namespaced_pod("default", pod_body("big", cpu="2"))
    assert manual.scheduler.schedule_once() == 0
    condition = scheduled_condition(mcore, "big")
    assert (condition.status, condition.reason) == ("False", "Unschedulable")
    assert condition.message == "0/3 nodes are available: 3 Insufficient cpu."
    first = condition.last_transition_time
    assert first is not None and first.microsecond == 0
    rv = mcore.read_namespaced_pod("big", "default").metadata.resource_version
    manual.scheduler.schedule_once()
    assert mcore.read_namespaced_pod("big", "default").metadata.resource_version == rv  # no churn
    mcore.create_node(node_body("d", cpu="1", labels={"x": "y"}))  # still too small: message changes
    ready_nodes(mcore, "d")
    manual.scheduler.schedule_once()
    condition = scheduled_condition(mcore, "big")
    assert condition.message == "0/4 nodes are available: 4 Insufficient cpu."
    assert condition.last_transition_time == first


def test_an_unschedulable_pod_is_tried_again_after_its_backoff_not_on_every_pass(
    manual: FakeCluster, mcore: client.CoreV1Api
) -> None:
    manual.control.pod_initial_backoff = manual.control.pod_max_backoff = 0.5
    mcore.create_node(node_body("a", cpu="1"))
    ready_nodes(mcore, "a")
    mcore.create_namespaced_pod("default", pod_body("big", cpu="2"))
    manual.scheduler.schedule_once()  # the first mark is not held back
    assert scheduled_condition(mcore, "big").message == "0/1 nodes are available: 1 Insufficient cpu."
    mcore.create_node(node_body("b", cpu="1"))  # a node event: the next pass looks again
    manual.scheduler.schedule_once()  # within the backoff: the condition is left as it was
    assert scheduled_condition(mcore, "big").message == "0/1 nodes are available: 1 Insufficient cpu."

    def retried() -> bool:
        manual.scheduler.schedule_once()
        return scheduled_condition(mcore, "big").message == "0/2 nodes are available: 2 Insufficient cpu."

    eventually(retried, message="message rewritten once the backoff ended")


def test_mixed_reasons_are_counted_and_sorted(manual: FakeCluster, mcore: client.CoreV1Api) -> None:
    mcore.create_node(node_body("small", cpu="1", memory="1Gi"))
    mcore.create_node(node_body("tainted", taints=[{"key": "gpu", "value": "yes", "effect": "NoSchedule"}]))
    mcore.create_node(node_body("cordoned"))
    mcore.patch_node("cordoned", {"spec": {"unschedulable": True}})
    mcore.create_node(node_body("notready", fake=False))  # no kubelet: never Ready
    ready_nodes(mcore, "small", "tainted", "cordoned")
    eventually(
        lambda: has_taint(mcore.read_node("notready"), "node.kubernetes.io/not-ready"),
        message="the node lifecycle controller tainted notready",
    )
    mcore.create_namespaced_pod("default", pod_body("p", cpu="2", memory="2Gi"))
    manual.scheduler.schedule_once()
    assert scheduled_condition(mcore, "p").message == (
        "0/4 nodes are available: 1 Insufficient cpu, 1 Insufficient memory, "
        "1 node(s) had untolerated taint {gpu: yes}, "
        "1 node(s) had untolerated taint {node.kubernetes.io/not-ready: }, "
        "1 node(s) were unschedulable."
    )


def test_node_selector_and_taints(manual: FakeCluster, mcore: client.CoreV1Api) -> None:
    mcore.create_node(node_body("plain"))
    mcore.create_node(
        node_body("gpu", labels={"accel": "gpu"}, taints=[{"key": "gpu", "value": "yes", "effect": "NoSchedule"}])
    )
    ready_nodes(mcore, "plain", "gpu")
    mcore.create_namespaced_pod("default", pod_body("wants-gpu", node_selector={"accel": "gpu"}))
    manual.scheduler.schedule_once()
    condition = scheduled_condition(mcore, "wants-gpu")
    assert condition.reason == "Unschedulable"
    assert "1 node(s) didn't match Pod's node affinity/selector" in condition.message
    mcore.delete_namespaced_pod("wants-gpu", "default")
    mcore.create_namespaced_pod(
        "default",
        pod_body(
            "tolerant",
            node_selector={"accel": "gpu"},
            tolerations=[{"key": "gpu", "operator": "Equal", "value": "yes", "effect": "NoSchedule"}],
        ),
    )
    mcore.create_namespaced_pod("default", pod_body("ordinary"))
    assert manual.scheduler.schedule_once() == 2
    assert mcore.read_namespaced_pod("tolerant", "default").spec.node_name == "gpu"
    assert mcore.read_namespaced_pod("ordinary", "default").spec.node_name == "plain"


def test_pod_slots_and_terminal_pods(manual: FakeCluster, mcore: client.CoreV1Api) -> None:
    mcore.create_node(node_body("tiny", pods="1"))
    ready_nodes(mcore, "tiny")
    mcore.create_namespaced_pod("default", pod_body("first"))
    mcore.create_namespaced_pod("default", pod_body("second"))
    assert manual.scheduler.schedule_once() == 1  # oldest first
    assert mcore.read_namespaced_pod("first", "default").spec.node_name == "tiny"
    assert "1 Too many pods" in scheduled_condition(mcore, "second").message
    mcore.patch_namespaced_pod_status("first", "default", {"status": {"phase": "Succeeded"}})
    assert manual.scheduler.schedule_once() == 1  # a finished pod holds no slot
    assert mcore.read_namespaced_pod("second", "default").spec.node_name == "tiny"


@pytest.mark.parametrize("scoring,expected", [("least-allocated", ["n1", "n2"]), ("most-allocated", ["n1", "n1"])])
def test_scoring_strategies(manual: FakeCluster, mcore: client.CoreV1Api, scoring: str, expected: list[str]) -> None:
    manual.control_request("POST", "/sim/v1/settings", {"scoring": scoring})
    mcore.create_node(node_body("n1", cpu="4"))
    mcore.create_node(node_body("n2", cpu="4"))
    ready_nodes(mcore, "n1", "n2")
    for name in ("p1", "p2"):
        mcore.create_namespaced_pod("default", pod_body(name, cpu="1", memory="1Gi"))
        manual.scheduler.schedule_once()
    assert [mcore.read_namespaced_pod(n, "default").spec.node_name for n in ("p1", "p2")] == expected


def test_daemonset_style_pods_are_not_rescheduled(manual: FakeCluster, mcore: client.CoreV1Api) -> None:
    mcore.create_node(node_body("n1", cpu="1"))
    mcore.create_node(node_body("n2", cpu="8"))
    ready_nodes(mcore, "n1", "n2")
    mcore.create_namespaced_pod("default", pod_body("ds-pod", cpu="1", node_name="n1"))
    mcore.create_namespaced_pod("default", pod_body("normal", cpu="500m"))
    manual.scheduler.schedule_once()
    assert mcore.read_namespaced_pod("ds-pod", "default").spec.node_name == "n1"
    assert scheduled_condition(mcore, "ds-pod") is None or scheduled_condition(mcore, "ds-pod").status == "True"
    # n1 is full with the pre-bound pod, so the ordinary pod must go to n2
    assert mcore.read_namespaced_pod("normal", "default").spec.node_name == "n2"


def test_required_node_affinity(manual: FakeCluster, mcore: client.CoreV1Api) -> None:
    mcore.create_node(node_body("zone-a", labels={"zone": "a"}))
    mcore.create_node(node_body("zone-b", labels={"zone": "b"}))
    ready_nodes(mcore, "zone-a", "zone-b")
    body = pod_body("affine")
    body["spec"]["affinity"] = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]}]
            }
        }
    }
    mcore.create_namespaced_pod("default", body)
    manual.scheduler.schedule_once()
    assert mcore.read_namespaced_pod("affine", "default").spec.node_name == "zone-b"


HOST = "kubernetes.io/hostname"


def three_hosts(manual: FakeCluster, mcore: client.CoreV1Api, **zones: str) -> None:
    for name in ("h1", "h2", "h3"):
        labels = {HOST: name, "topology.kubernetes.io/zone": zones.get(name, "z1")}
        mcore.create_node(node_body(name, labels=labels))
    ready_nodes(mcore, "h1", "h2", "h3")


def placement(mcore: client.CoreV1Api, names: list[str]) -> dict[str, str | None]:
    return {n: mcore.read_namespaced_pod(n, "default").spec.node_name for n in names}


def test_hostname_anti_affinity_is_one_replica_per_node(manual: FakeCluster, mcore: client.CoreV1Api) -> None:
    three_hosts(manual, mcore)
    names = [f"web{i}" for i in range(4)]
    for name in names:
        body = pod_body(name, labels={"app": "web"}, cpu="100m")
        body["spec"]["affinity"] = {
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {"topologyKey": HOST, "labelSelector": {"matchLabels": {"app": "web"}}}
                ]
            }
        }
        mcore.create_namespaced_pod("default", body)
    assert manual.scheduler.schedule_once() == 3
    where = placement(mcore, names)
    assert sorted(v for v in where.values() if v) == ["h1", "h2", "h3"]  # one each, room for many
    (left,) = [n for n, v in where.items() if v is None]
    assert "didn't match pod anti-affinity rules" in scheduled_condition(mcore, left).message
    # Symmetry: a pod the placed replicas' terms select is kept off their nodes as well.
    mcore.create_node(node_body("h4", labels={HOST: "h4"}))
    ready_nodes(mcore, "h4")
    mcore.create_namespaced_pod("default", pod_body("plain", labels={"app": "web"}, cpu="100m"))
    manual.scheduler.schedule_once()
    assert {placement(mcore, ["plain"])["plain"], placement(mcore, [left])[left]} == {"h4", None}


def test_hostname_and_zone_spread_do_not_schedule(manual: FakeCluster, mcore: client.CoreV1Api) -> None:
    three_hosts(manual, mcore, h3="z2")

    def spread(name: str, key: str, skew: int) -> dict:
        body = pod_body(name, labels={"app": key}, cpu="100m")
        body["spec"]["topologySpreadConstraints"] = [
            {
                "maxSkew": skew,
                "topologyKey": key,
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"app": key}},
            }
        ]
        return body

    # h1 already runs two matching pods (no requests: by room alone h1 ties and wins by name).
    for i in range(2):
        mcore.create_namespaced_pod("default", pod_body(f"old{i}", labels={"app": HOST}, node_name="h1"))
    hosts = [f"h-{i}" for i in range(4)]
    for name in hosts:
        mcore.create_namespaced_pod("default", spread(name, HOST, 1))
    manual.scheduler.schedule_once()
    assert Counter(placement(mcore, hosts).values()) == {"h2": 2, "h3": 2}  # h1 would exceed the skew
    zones = [f"z-{i}" for i in range(4)]
    for name in zones:
        mcore.create_namespaced_pod("default", spread(name, "topology.kubernetes.io/zone", 1))
    manual.scheduler.schedule_once()
    in_zone = Counter("z2" if v == "h3" else "z1" for v in placement(mcore, zones).values() if v)
    assert in_zone == {"z1": 2, "z2": 2}


def test_node_selector_on_hostname_and_zone(manual: FakeCluster, mcore: client.CoreV1Api) -> None:
    three_hosts(manual, mcore, h2="z2")
    mcore.create_namespaced_pod("default", pod_body("pinned", node_selector={HOST: "h3"}))
    mcore.create_namespaced_pod("default", pod_body("zoned", node_selector={"topology.kubernetes.io/zone": "z2"}))
    manual.scheduler.schedule_once()
    assert placement(mcore, ["pinned", "zoned"]) == {"pinned": "h3", "zoned": "h2"}


def test_pod_requests_arithmetic() -> None:
    pod = {
        "spec": {
            "containers": [
                {"name": "a", "resources": {"requests": {"cpu": "250m", "memory": "64Mi"}}},
                {"name": "b", "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}},
            ],
            "initContainers": [{"name": "init", "resources": {"requests": {"cpu": "2", "memory": "10Mi"}}}],
            "overhead": {"cpu": "100m"},
        }
    }
    assert pod_requests(pod) == {"cpu": 2100, "memory": 64 * 2**20 + 2**30, "pods": 1}


def test_pods_like_one_that_fit_nowhere_get_its_verdict_and_others_their_own(
    manual: FakeCluster, mcore: client.CoreV1Api
) -> None:
    """A pass reuses the verdict for pods identical to one that fit nowhere; a different pod is
    still searched for."""
    mcore.create_node(node_body("n1", cpu="1"))
    ready_nodes(mcore, "n1")
    for i in range(3):
        mcore.create_namespaced_pod("default", pod_body(f"big{i}", cpu="2"))
    mcore.create_namespaced_pod("default", pod_body("small", cpu="500m"))
    assert manual.scheduler.schedule_once() == 1
    for i in range(3):
        condition = scheduled_condition(mcore, f"big{i}")
        assert (condition.reason, condition.message) == (
            "Unschedulable",
            "0/1 nodes are available: 1 Insufficient cpu.",
        )
    assert mcore.read_namespaced_pod("small", "default").spec.node_name == "n1"
