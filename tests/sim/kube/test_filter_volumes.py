"""VolumeZone and VolumeBinding: cases after kubernetes/kubernetes
pkg/scheduler/framework/plugins/volumezone/volume_zone_test.go (TestSingleZone) and
pkg/scheduler/framework/plugins/volumebinding/volume_binding_test.go (bound PV node affinity,
unbound WaitForFirstConsumer claims, PreFilter refusals), against sim/kube/filters/volumes.py;
then the scheduler binding a WaitForFirstConsumer claim where it placed the pod."""

from __future__ import annotations

import pytest

from sim.kube.control import FakeControl
from sim.kube.filters import volumes
from sim.kube.scheduler import Scheduler
from sim.kube.store import Store
from tests.sim.kube.objects import Obj, make_node, make_pod

ZONE = "topology.kubernetes.io/zone"
REGION = "topology.kubernetes.io/region"
BETA_ZONE = "failure-domain.beta.kubernetes.io/zone"


def pv(name: str, labels: dict[str, str] | None = None, zones: list[str] | None = None, **spec: object) -> Obj:
    body: Obj = {"capacity": {"storage": "10Gi"}, "accessModes": ["ReadWriteOnce"], **spec}
    if zones:
        body["nodeAffinity"] = {
            "required": {
                "nodeSelectorTerms": [{"matchExpressions": [{"key": ZONE, "operator": "In", "values": zones}]}]
            }
        }
    return {"metadata": {"name": name, "labels": labels or {}}, "spec": body}


def claim(name: str, volume: str | None = None, sc: str = "", size: str = "5Gi") -> Obj:
    spec: Obj = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": size}}, "storageClassName": sc}
    if volume:
        spec["volumeName"] = volume
    return {"metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"}, "spec": spec}


def storage_class(
    name: str, mode: str = "WaitForFirstConsumer", zones: list[str] | None = None, **extra: object
) -> Obj:
    sc: Obj = {"metadata": {"name": name}, "provisioner": "csi.example.com", "volumeBindingMode": mode, **extra}
    if zones:
        sc["allowedTopologies"] = [{"matchLabelExpressions": [{"key": ZONE, "values": zones}]}]
    return sc


def with_claims(*names: str) -> Obj:
    return make_pod(volumes=[{"name": n, "persistentVolumeClaim": {"claimName": n}} for n in names])


def verdict(pod: Obj, vols: volumes.Volumes, node: Obj) -> str | None:
    state = volumes.prefilter(pod, vols)
    return state if isinstance(state, str) else volumes.refusal(state, vols, node)


def vols(pvs: list[Obj] = (), claims: list[Obj] = (), classes: list[Obj] = ()) -> volumes.Volumes:  # type: ignore[assignment]
    return volumes.Volumes(
        {p["metadata"]["name"]: p for p in pvs},
        {("default", c["metadata"]["name"]): c for c in claims},
        {c["metadata"]["name"]: c for c in classes},
    )


@pytest.mark.parametrize(
    ("name", "pv_labels", "node_labels", "want"),
    [
        ("node without labels", {ZONE: "us-west1-a"}, {}, None),
        ("zone label matched", {ZONE: "us-west1-a"}, {ZONE: "us-west1-a"}, None),
        ("zone label doesn't match", {ZONE: "us-west1-a"}, {ZONE: "us-west1-b"}, volumes.ZONE_CONFLICT),
        ("region label matched", {REGION: "us-west1"}, {REGION: "us-west1", ZONE: "us-west1-b"}, None),
        ("region label doesn't match", {REGION: "us-west1"}, {REGION: "us-east1"}, volumes.ZONE_CONFLICT),
        ("beta zone label matched", {BETA_ZONE: "us-west1-a"}, {BETA_ZONE: "us-west1-a"}, None),
        ("beta zone label doesn't match", {BETA_ZONE: "us-west1-a"}, {BETA_ZONE: "us-west1-b"}, volumes.ZONE_CONFLICT),
        (
            "a PV's beta zone label is matched with the node's GA label",
            {BETA_ZONE: "us-west1-a"},
            {ZONE: "us-west1-a"},
            None,
        ),
        ("zone values joined by __ hold either zone", {ZONE: "us-west1-a__us-west1-b"}, {ZONE: "us-west1-b"}, None),
        (
            "a node with a zone but not the PV's region label",
            {REGION: "us-west1"},
            {ZONE: "us-west1-b"},
            volumes.ZONE_CONFLICT,
        ),
    ],
)
def test_volume_zone(name: str, pv_labels: dict[str, str], node_labels: dict[str, str], want: str | None) -> None:
    v = vols([pv("pv", pv_labels)], [claim("c", "pv")])
    assert verdict(with_claims("c"), v, make_node("n", node_labels)) == want


def test_bound_volume_node_affinity() -> None:
    v = vols([pv("pv", zones=["a"])], [claim("c", "pv")])
    pod = with_claims("c")
    assert verdict(pod, v, make_node("n", {ZONE: "a"})) is None
    assert verdict(pod, v, make_node("n", {ZONE: "b"})) == volumes.NODE_CONFLICT
    assert verdict(pod, v, make_node("n")) == volumes.NODE_CONFLICT  # no zone label: the term does not match


@pytest.mark.parametrize(
    ("name", "objects", "want"),
    [
        ("a claim that does not exist", vols(), 'persistentvolumeclaim "c" not found'),
        (
            "a claim bound to a PV that does not exist",
            vols([], [claim("c", "gone")]),
            "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)",
        ),
        (
            "an unbound claim of an Immediate class",
            vols([], [claim("c", sc="fast")], [storage_class("fast", "Immediate")]),
            "pod has unbound immediate PersistentVolumeClaims",
        ),
        (
            "an unbound claim of a class that does not exist",
            vols([], [claim("c", sc="fast")]),
            'storageclass.storage.k8s.io "fast" not found',
        ),
    ],
)
def test_prefilter_refusals(name: str, objects: volumes.Volumes, want: str) -> None:
    assert volumes.prefilter(with_claims("c"), objects) == want


def test_wait_for_first_consumer_claims() -> None:
    a, b = make_node("a", {ZONE: "a"}), make_node("b", {ZONE: "b"})
    pod = with_claims("c")
    provisioned = vols([], [claim("c", sc="wffc")], [storage_class("wffc", zones=["b"])])
    assert (verdict(pod, provisioned, a), verdict(pod, provisioned, b)) == (volumes.BIND_CONFLICT, None)
    anywhere = vols([], [claim("c", sc="wffc")], [storage_class("wffc")])
    assert (verdict(pod, anywhere, a), verdict(pod, anywhere, b)) == (None, None)
    # Local volumes: no provisioner, only an Available PV of the class that allows the node.
    static = vols(
        [
            pv("small", zones=["a"], storageClassName="local", capacity={"storage": "1Gi"}),
            pv("big", zones=["b"], storageClassName="local"),
        ],
        [claim("c", sc="local")],
        [storage_class("local", provisioner=volumes.NO_PROVISIONER)],
    )
    assert (verdict(pod, static, a), verdict(pod, static, b)) == (volumes.BIND_CONFLICT, None)


def test_the_scheduler_binds_a_wait_for_first_consumer_claim_where_it_placed_the_pod() -> None:
    """The pod goes where the class allows; its claim is then bound to a PV pinned to that zone,
    so a second pod of the claim follows it (the PV's node affinity)."""
    store = Store()
    for node in (make_node("a", {ZONE: "a"}), make_node("b", {ZONE: "b"})):
        store.create(store.builtin("nodes"), "", node)
    store.create(store.builtin("storageclasses", "storage.k8s.io"), "", storage_class("wffc", zones=["b"]))
    store.create(store.builtin("persistentvolumeclaims"), "default", claim("data", sc="wffc"))
    pods = store.builtin("pods")
    first = with_claims("data")
    first["metadata"]["name"] = "first"
    store.create(pods, "default", first)
    scheduler = Scheduler(store, FakeControl(pod_initial_backoff=0.0, pod_max_backoff=0.0))
    assert scheduler.schedule_once() == 1
    assert store.get(pods, "default", "first")["spec"]["nodeName"] == "b"
    bound = store.get(store.builtin("persistentvolumeclaims"), "default", "data")
    assert bound["status"]["phase"] == "Bound"
    assert bound["metadata"]["annotations"][volumes.SELECTED_NODE] == "b"
    volume = store.get(store.builtin("persistentvolumes"), "", bound["spec"]["volumeName"])
    assert volume["spec"]["claimRef"]["name"] == "data" and volume["status"]["phase"] == "Bound"
    assert volume["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"] == [
        {"matchExpressions": [{"key": ZONE, "operator": "In", "values": ["b"]}]}
    ]
    second = with_claims("data")
    second["metadata"]["name"] = "second"
    store.create(pods, "default", second)
    assert scheduler.schedule_once() == 1
    assert store.get(pods, "default", "second")["spec"]["nodeName"] == "b"
