"""The Longhorn stand-in against the simulated cluster, over HTTP (seed 003: attached volumes, a
last healthy replica and backing-image or share managers keep a node from scale-down)."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from sim.cluster import FakeCluster
from sim.storage.longhorn import (
    NAMESPACE,
    SAFE_TO_EVICT,
    SETTING_AUTOSCALER,
    TO_BE_DELETED_TAINT,
    FakeLonghorn,
    VolumeDataLost,
)

pytestmark = pytest.mark.timeout(60)

NODES = ("n1", "n2", "n3")


class Kube:
    """A tiny test client: the cluster as an operator or growth would touch it."""

    def __init__(self, cluster: FakeCluster) -> None:
        self.http = httpx.Client(
            base_url=cluster.url, headers={"Authorization": f"Bearer {cluster.token}"}, verify=cluster.ssl_context()
        )

    def add_node(self, name: str) -> None:
        body = {
            "metadata": {
                "name": name,
                "annotations": {"kwok.x-k8s.io/node": "fake"},
                "labels": {"kubernetes.io/hostname": name},
            },
            "status": {
                "allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"},
                "capacity": {"cpu": "4", "memory": "8Gi", "pods": "110"},
                "conditions": [{"type": "Ready", "status": "True"}],
            },
        }
        assert self.http.post("/api/v1/nodes", json=body).status_code == 201

    def patch_node(self, name: str, spec: dict) -> None:
        r = self.http.patch(
            f"/api/v1/nodes/{name}", json={"spec": spec}, headers={"Content-Type": "application/merge-patch+json"}
        )
        assert r.status_code == 200, r.text

    def taint_for_deletion(self, name: str) -> None:
        self.patch_node(name, {"taints": [{"key": TO_BE_DELETED_TAINT, "value": "1", "effect": "NoSchedule"}]})

    def delete_node(self, name: str) -> None:
        assert self.http.delete(f"/api/v1/nodes/{name}").status_code == 200

    def pods(self, selector: str) -> list[dict]:
        return self.http.get(f"/api/v1/namespaces/{NAMESPACE}/pods", params={"labelSelector": selector}).json()["items"]

    def list(self, path: str) -> list[dict]:
        return self.http.get(path).json()["items"]

    def evict(self, pod: str) -> int:
        body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": pod, "namespace": NAMESPACE}}
        return self.http.post(f"/api/v1/namespaces/{NAMESPACE}/pods/{pod}/eviction", json=body).status_code

    def im_running(self, node: str) -> bool:
        pods = self.pods(f"longhorn.io/node={node},longhorn.io/component=instance-manager")
        return bool(pods) and pods[0]["status"].get("phase") == "Running"


@pytest.fixture
def cluster() -> Iterator[FakeCluster]:
    with FakeCluster(node_ready_delay=0.0, pod_start_delay=0.0, run_scheduler=False) as c:
        yield c


@pytest.fixture
def kube(cluster: FakeCluster) -> Iterator[Kube]:
    k = Kube(cluster)
    for n in NODES:
        k.add_node(n)
    yield k
    k.http.close()


@pytest.fixture
def longhorn(cluster: FakeCluster, kube: Kube) -> Iterator[FakeLonghorn]:
    with FakeLonghorn(cluster.url, cluster.token, ca_pem=cluster.certs.ca_pem, interval=0.02) as lh:
        assert lh.wait_until(lambda: all(kube.im_running(n) for n in NODES))
        yield lh
        assert lh.errors == 0, lh.last_error


def test_installs_crds_and_an_instance_manager_per_node(
    cluster: FakeCluster, kube: Kube, longhorn: FakeLonghorn
) -> None:
    crds = {c["metadata"]["name"] for c in kube.list("/apis/apiextensions.k8s.io/v1/customresourcedefinitions")}
    assert {
        "volumes.longhorn.io",
        "replicas.longhorn.io",
        "engines.longhorn.io",
        "instancemanagers.longhorn.io",
    } <= crds
    setting = kube.http.get(f"/apis/longhorn.io/v1beta2/namespaces/{NAMESPACE}/settings/{SETTING_AUTOSCALER}").json()
    assert setting["value"] == "true"
    pods = kube.pods("longhorn.io/component=instance-manager")
    assert sorted(p["spec"]["nodeName"] for p in pods) == list(NODES)
    for p in pods:
        assert p["metadata"]["annotations"][SAFE_TO_EVICT] == "true"
        [owner] = p["metadata"]["ownerReferences"]
        assert owner["kind"] == "InstanceManager" and owner["controller"] is True
    ims = kube.list(f"/apis/longhorn.io/v1beta2/namespaces/{NAMESPACE}/instancemanagers")
    assert sorted(i["spec"]["nodeID"] for i in ims) == list(NODES)
    assert longhorn.pdb_nodes() == set()  # no volume, nothing to protect


def test_pdbs_follow_attach_and_detach_but_keep_the_last_healthy_replica(kube: Kube, longhorn: FakeLonghorn) -> None:
    assert longhorn.create_volume("vol-1", replicas=2) == ["n1", "n2"]
    longhorn.attach("vol-1", "n1")
    assert longhorn.wait_until(lambda: longhorn.pdb_nodes() == {"n1", "n2"})
    pdb = kube.http.get(f"/apis/policy/v1/namespaces/{NAMESPACE}/poddisruptionbudgets/instance-manager-n1").json()
    assert pdb["spec"]["minAvailable"] == 1 and pdb["status"]["disruptionsAllowed"] == 0
    assert kube.evict("instance-manager-n1") == 429  # the PDB holds the engine's node
    # The CRs are mirrored later in the same pass as the PDBs: poll for them too.
    assert longhorn.wait_until(
        lambda: (
            [
                (v["status"]["state"], v["status"]["currentNodeID"])
                for v in kube.list(f"/apis/longhorn.io/v1beta2/namespaces/{NAMESPACE}/volumes")
            ]
            == [("attached", "n1")]
        )
    )
    assert longhorn.wait_until(
        lambda: (
            [e["spec"]["nodeID"] for e in kube.list(f"/apis/longhorn.io/v1beta2/namespaces/{NAMESPACE}/engines")]
            == ["n1"]
        )
    )

    longhorn.detach("vol-1")
    # One replica keeps its PDB (the node it was attached to); the other is released.
    assert longhorn.wait_until(lambda: longhorn.pdb_nodes() == {"n1"})
    assert longhorn.wait_until(lambda: kube.list(f"/apis/longhorn.io/v1beta2/namespaces/{NAMESPACE}/engines") == [])
    assert kube.evict("instance-manager-n2") == 201
    assert kube.evict("instance-manager-n1") == 429


def test_attach_to_a_new_node_rebuilds_a_replica_and_keeps_the_data(kube: Kube, longhorn: FakeLonghorn) -> None:
    longhorn.create_volume("vol-1", replicas=2)
    longhorn.attach("vol-1", "n1")
    longhorn.write("vol-1", b"hello longhorn" * 100)
    before = longhorn.checksum("vol-1")
    longhorn.detach("vol-1")
    longhorn.attach("vol-1", "n3")
    assert ("n3", True) in longhorn.volume("vol-1")["replicas"]
    assert longhorn.checksum("vol-1") == before
    assert longhorn.wait_until(lambda: longhorn.pdb_nodes() == {"n1", "n2", "n3"})
    longhorn.detach("vol-1")
    assert longhorn.wait_until(lambda: longhorn.pdb_nodes() == {"n3"})  # last attached keeps it
    assert longhorn.checksum("vol-1") == before


def test_deleted_nodes_fail_their_replicas_and_losing_all_is_detectable(kube: Kube, longhorn: FakeLonghorn) -> None:
    longhorn.create_volume("vol-1", replicas=2)
    longhorn.attach("vol-1", "n1")
    longhorn.write("vol-1", b"precious")
    before = longhorn.checksum("vol-1")
    longhorn.detach("vol-1")
    kube.delete_node("n2")
    assert longhorn.wait_until(lambda: ("n2", False) in longhorn.volume("vol-1")["replicas"])
    assert longhorn.checksum("vol-1") == before  # n1 still holds a healthy copy
    assert longhorn.wait_until(
        lambda: (
            sorted(
                (r["spec"]["nodeID"], bool(r["spec"]["failedAt"]), r["status"]["currentState"])
                for r in kube.list(f"/apis/longhorn.io/v1beta2/namespaces/{NAMESPACE}/replicas")
            )
            == [("n1", False, "stopped"), ("n2", True, "error")]
        )
    )
    kube.delete_node("n1")
    assert longhorn.wait_until(lambda: ("n1", False) in longhorn.volume("vol-1")["replicas"])
    with pytest.raises(VolumeDataLost):
        longhorn.checksum("vol-1")
    with pytest.raises(VolumeDataLost):
        longhorn.attach("vol-1", "n3")


def test_unschedulable_nodes_release_pdbs_only_when_a_peer_is_protected(kube: Kube, longhorn: FakeLonghorn) -> None:
    longhorn.create_volume("vol-1", replicas=2)
    longhorn.attach("vol-1", "n1")
    assert longhorn.wait_until(lambda: longhorn.pdb_nodes() == {"n1", "n2"})
    # A replica-only node tainted for deletion is released: n1 is schedulable and protected.
    kube.taint_for_deletion("n2")
    assert longhorn.wait_until(lambda: longhorn.pdb_nodes() == {"n1"})
    kube.patch_node("n2", {"taints": None})
    assert longhorn.wait_until(lambda: longhorn.pdb_nodes() == {"n1", "n2"})
    longhorn.detach("vol-1")
    assert longhorn.wait_until(lambda: longhorn.pdb_nodes() == {"n1"})
    # Cordoning the keeper moves protection to the other healthy replica.
    kube.patch_node("n1", {"unschedulable": True})
    assert longhorn.wait_until(lambda: longhorn.pdb_nodes() == {"n2"})
    # With every healthy replica on leaving nodes, both are held.
    kube.taint_for_deletion("n2")
    assert longhorn.wait_until(lambda: longhorn.pdb_nodes() == {"n1", "n2"})


def test_backing_image_manager_pod_is_not_safe_to_evict(kube: Kube, longhorn: FakeLonghorn) -> None:
    name = longhorn.add_backing_image_manager("n2")
    assert longhorn.wait_until(lambda: bool(kube.pods("longhorn.io/component=backing-image-manager")))
    [pod] = kube.pods("longhorn.io/component=backing-image-manager")
    assert pod["metadata"]["name"] == name and pod["spec"]["nodeName"] == "n2"
    assert SAFE_TO_EVICT not in (pod["metadata"].get("annotations") or {})
    longhorn.remove_backing_image_manager("n2")
    assert longhorn.wait_until(lambda: not kube.pods("longhorn.io/component=backing-image-manager"))


def test_with_the_setting_off_every_instance_manager_is_held(kube: Kube, longhorn: FakeLonghorn) -> None:
    longhorn.set_setting(SETTING_AUTOSCALER, False)
    assert longhorn.wait_until(lambda: longhorn.pdb_nodes() == set(NODES))
    assert longhorn.wait_until(
        lambda: all(
            SAFE_TO_EVICT not in (p["metadata"].get("annotations") or {})
            for p in kube.pods("longhorn.io/component=instance-manager")
        )
    )
    longhorn.set_setting(SETTING_AUTOSCALER, True)
    assert longhorn.wait_until(lambda: longhorn.pdb_nodes() == set())


def test_growth_rules_read_the_stand_in_objects(kube: Kube, longhorn: FakeLonghorn) -> None:
    """Seed 003's rule (a node holding a detached volume's replica goes only while another
    schedulable node keeps a healthy one) through growth's pure rules, fed with what the API server
    holds."""
    from scaling.kube.drain import pdb_from_object
    from scaling.kube.nodes import node_info
    from scaling.kube.pods import pod_info
    from scaling.nodes.models import LABEL_GROUP, LABEL_POOL
    from scaling.nodes.scale_down.candidates import plan_scale_down
    from scaling.nodes.scale_down.models import NodeState
    from scaling.nodes.scale_down.storage import longhorn_state_from_objects

    for n in NODES:
        kube.http.patch(
            f"/api/v1/nodes/{n}",
            json={"metadata": {"labels": {LABEL_GROUP: "g", LABEL_POOL: "kwok-x"}}},
            headers={"Content-Type": "application/merge-patch+json"},
        )
    longhorn.create_volume("vol-1", replicas=2)
    longhorn.attach("vol-1", "n1")
    longhorn.write("vol-1", b"data")
    assert longhorn.wait_until(lambda: longhorn.pdb_nodes() == {"n1", "n2"})

    def plan():
        base = f"/apis/longhorn.io/v1beta2/namespaces/{NAMESPACE}"
        raw_pods = kube.list("/api/v1/pods")
        nodes = [
            node_info(n, [p for p in raw_pods if p["spec"].get("nodeName") == n["metadata"]["name"]])
            for n in kube.list("/api/v1/nodes")
        ]
        pods = [pod_info(p) for p in raw_pods]
        storage = longhorn_state_from_objects(
            kube.list(f"{base}/volumes"),
            kube.list(f"{base}/replicas"),
            kube.list(f"{base}/engines"),
            kube.list(f"{base}/instancemanagers"),
            pods,
        )
        pdbs = [pdb_from_object(p) for p in kube.list("/apis/policy/v1/poddisruptionbudgets")]
        # Every node runs an instance-manager pod, so none is "empty": they are underused,
        # and unneeded for long enough.
        since = {n: 0.0 for n in NODES}
        return plan_scale_down(nodes, pods, pdbs, [], storage, 1e9, since, None, set(), set())

    def codes(p, node: str) -> set[str]:
        return {b.code for b in p.decisions[node].reasons}

    assert longhorn.wait_until(lambda: "LonghornVolumeAttached" in codes(plan(), "n1"))
    p = plan()
    assert p.decisions["n1"].state == NodeState.BLOCKED
    assert {b.code for b in p.decisions["n1"].reasons} >= {"LonghornVolumeAttached", "NotEnoughPdb"}
    assert {b.code for b in p.decisions["n2"].reasons} == {"NotEnoughPdb"}
    assert p.decisions["n3"].state == NodeState.UNDERUSED and [r.name for r in p.to_remove] == ["n3"]

    longhorn.detach("vol-1")
    assert longhorn.wait_until(lambda: longhorn.pdb_nodes() == {"n1"})
    assert longhorn.wait_until(lambda: codes(plan(), "n1") == {"NotEnoughPdb"})
    p = plan()
    # n2 and n3 may go together; n1 holds the last protected healthy replica.
    assert sorted(r.name for r in p.to_remove) == ["n2", "n3"]


def test_seed_scenario_scale_down_all_nodes_holding_replicas(
    cluster: FakeCluster, kube: Kube, longhorn: FakeLonghorn
) -> None:
    """Seed 003 "scale down all nodes containing volume replicas" (the last healthy replica's node
    goes only after a rebuild elsewhere), with growth's rules deciding and this test acting as the
    NodeScaleDown workflow would: taint, evict, delete the Node."""
    from scaling.kube.drain import ANNOTATION_SCALE_DOWN_DISABLED, pdb_from_object
    from scaling.kube.nodes import node_info
    from scaling.kube.pods import pod_info
    from scaling.nodes.models import LABEL_GROUP, LABEL_POOL
    from scaling.nodes.scale_down.candidates import plan_scale_down
    from scaling.nodes.scale_down.storage import longhorn_state_from_objects

    base = f"/apis/longhorn.io/v1beta2/namespaces/{NAMESPACE}"
    # Volume created, attached, written and detached before the scale-up.
    assert longhorn.create_volume("vol-1", replicas=3) == list(NODES)
    longhorn.attach("vol-1", "n1")
    longhorn.write("vol-1", b"seed-003" * 512)
    before = longhorn.checksum("vol-1")
    longhorn.detach("vol-1")
    new = ("m1", "m2", "m3")
    for n in new:
        kube.add_node(n)
    for n in NODES + new:
        meta: dict = {"labels": {LABEL_GROUP: "g", LABEL_POOL: "kwok-x"}}
        if n in new:  # the seed pins the new nodes so only the old ones go
            meta["annotations"] = {ANNOTATION_SCALE_DOWN_DISABLED: "true"}
        kube.http.patch(
            f"/api/v1/nodes/{n}", json={"metadata": meta}, headers={"Content-Type": "application/merge-patch+json"}
        )
    assert longhorn.wait_until(lambda: all(kube.im_running(n) for n in new))
    assert longhorn.wait_until(lambda: longhorn.pdb_nodes() == {"n1"})

    def plan():
        raw_pods = kube.list("/api/v1/pods")
        nodes = [
            node_info(n, [p for p in raw_pods if p["spec"].get("nodeName") == n["metadata"]["name"]])
            for n in kube.list("/api/v1/nodes")
        ]
        pods = [pod_info(p) for p in raw_pods]
        storage = longhorn_state_from_objects(
            kube.list(f"{base}/volumes"),
            kube.list(f"{base}/replicas"),
            kube.list(f"{base}/engines"),
            kube.list(f"{base}/instancemanagers"),
            pods,
        )
        pdbs = [pdb_from_object(p) for p in kube.list("/apis/policy/v1/poddisruptionbudgets")]
        since = {n.name: 0.0 for n in nodes}
        return plan_scale_down(nodes, pods, pdbs, [], storage, 1e9, since, None, set(), set())

    def remove(names: list[str]) -> None:
        for name in names:
            kube.taint_for_deletion(name)
            for pod in [p for p in kube.list("/api/v1/pods") if p["spec"].get("nodeName") == name]:
                assert kube.evict(pod["metadata"]["name"]) == 201
            kube.delete_node(name)

    assert longhorn.wait_until(lambda: sorted(r.name for r in plan().to_remove) == ["n2", "n3"])
    remove(["n2", "n3"])
    # Original number + 1 blocked node: n1 holds the last healthy replica.
    assert longhorn.wait_until(lambda: [(n, h) for n, h in longhorn.volume("vol-1")["replicas"] if h] == [("n1", True)])
    p = plan()
    assert p.to_remove == [] and {b.code for b in p.decisions["n1"].reasons} == {
        "NotEnoughPdb",
        "LonghornLastHealthyReplica",
    }

    longhorn.attach("vol-1", "m1")  # rebuilds on m1, then up to 3 replicas on m2, m3
    assert longhorn.wait_until(lambda: sum(h for _, h in longhorn.volume("vol-1")["replicas"]) >= 3)
    assert longhorn.checksum("vol-1") == before
    longhorn.detach("vol-1")
    assert longhorn.wait_until(lambda: [r.name for r in plan().to_remove] == ["n1"])
    remove(["n1"])
    assert longhorn.wait_until(lambda: longhorn.pdb_nodes() == {"m1"})
    assert sorted(n["metadata"]["name"] for n in kube.list("/api/v1/nodes")) == list(new)
    assert longhorn.checksum("vol-1") == before
