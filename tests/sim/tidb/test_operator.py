"""The tidb-operator stand-in: TidbCluster -> pods with tidb-operator's names, labels and
resources; status replicas; scale-out fills ordinals, scale-in removes the highest; deleting
the cluster deletes its pods. Driven through the official client, as growth drives it."""

from __future__ import annotations

from typing import Any

import httpx
from kubernetes import client

from sim.tidb.world import FakeTidb
from tests.polling import eventually
from tests.sim.tidb.conftest import NS, running, tc_body

G, V, TC = "pingcap.com", "v1alpha1", "tidbclusters"


def pods_of(core: client.CoreV1Api, tc: str, component: str) -> list[Any]:
    selector = f"app.kubernetes.io/instance={tc},app.kubernetes.io/component={component}"
    return sorted(core.list_namespaced_pod(NS, label_selector=selector).items, key=lambda p: p.metadata.name)


def names(core: client.CoreV1Api, tc: str, component: str) -> list[str]:
    return [p.metadata.name for p in pods_of(core, tc, component)]


def test_tidbcluster_makes_labelled_pods_with_its_requests(
    world: FakeTidb, core: client.CoreV1Api, custom: client.CustomObjectsApi
) -> None:
    labels = {"tidb.pingcap.com/auto-instance": "tas", "tidb.pingcap.com/auto-component": "tikv", "team": "not-copied"}
    custom.create_namespaced_custom_object(G, V, NS, TC, tc_body("basic", tikv=3, tidb=2, labels=labels))
    eventually(
        lambda: names(core, "basic", "tikv") == ["basic-tikv-0", "basic-tikv-1", "basic-tikv-2"],
        message="three tikv pods",
    )
    assert names(core, "basic", "tidb") == ["basic-tidb-0", "basic-tidb-1"]
    assert names(core, "basic", "pd") == ["basic-pd-0"]
    pod = pods_of(core, "basic", "tikv")[0]
    assert pod.metadata.labels == {
        "app.kubernetes.io/name": "tidb-cluster",
        "app.kubernetes.io/managed-by": "tidb-operator",
        "app.kubernetes.io/instance": "basic",
        "app.kubernetes.io/component": "tikv",
        "tidb.pingcap.com/auto-instance": "tas",
        "tidb.pingcap.com/auto-component": "tikv",
    }
    resources = pod.spec.containers[0].resources
    assert resources.requests == {"cpu": "2", "memory": "4Gi"}  # storage is a volume, not a request
    assert resources.limits == {"cpu": "2", "memory": "4Gi"}
    owner = pod.metadata.owner_references[0]
    assert (owner.kind, owner.name, owner.controller) == ("TidbCluster", "basic", True)


def test_status_reports_ready_replicas(world: FakeTidb, custom: client.CustomObjectsApi) -> None:
    custom.create_namespaced_custom_object(G, V, NS, TC, tc_body("basic", tikv=3, tidb=1))

    def ready() -> dict[str, Any] | None:
        status = custom.get_namespaced_custom_object(G, V, NS, TC, "basic").get("status") or {}
        sts = (status.get("tikv") or {}).get("statefulSet") or {}
        return status if sts.get("readyReplicas") == 3 else None

    status = eventually(ready, timeout=60, message="tikv ready in status")
    assert status["tikv"]["phase"] == "Normal"
    assert status["tikv"]["statefulSet"]["replicas"] == 3
    assert status["tidb"]["statefulSet"]["replicas"] == 1


def test_scale_in_removes_highest_ordinals_and_scale_out_fills_gaps(
    world: FakeTidb, core: client.CoreV1Api, custom: client.CustomObjectsApi
) -> None:
    custom.create_namespaced_custom_object(G, V, NS, TC, tc_body("basic", tikv=4))
    eventually(lambda: len(names(core, "basic", "tikv")) == 4, message="four tikv pods")
    custom.patch_namespaced_custom_object(G, V, NS, TC, "basic", {"spec": {"tikv": {"replicas": 2}}})
    eventually(
        lambda: names(core, "basic", "tikv") == ["basic-tikv-0", "basic-tikv-1"], message="ordinals 2 and 3 removed"
    )
    core.delete_namespaced_pod("basic-tikv-0", NS)  # a lost pod is recreated under its ordinal
    custom.patch_namespaced_custom_object(G, V, NS, TC, "basic", {"spec": {"tikv": {"replicas": 3}}})
    eventually(
        lambda: names(core, "basic", "tikv") == ["basic-tikv-0", "basic-tikv-1", "basic-tikv-2"],
        message="ordinals 0..2",
    )


def test_removed_component_and_deleted_cluster_take_their_pods(
    world: FakeTidb, core: client.CoreV1Api, custom: client.CustomObjectsApi
) -> None:
    custom.create_namespaced_custom_object(G, V, NS, TC, tc_body("basic", tikv=2, tidb=2))
    eventually(lambda: len(names(core, "basic", "tidb")) == 2, message="two tidb pods")
    custom.patch_namespaced_custom_object(G, V, NS, TC, "basic", {"spec": {"tidb": None}})
    eventually(lambda: names(core, "basic", "tidb") == [], message="tidb pods gone with spec.tidb")
    custom.delete_namespaced_custom_object(G, V, NS, TC, "basic")
    eventually(
        lambda: names(core, "basic", "tikv") == [] and names(core, "basic", "pd") == [],
        message="pods gone with the cluster",
    )


def test_replicas_zero_keeps_the_cluster_without_pods(
    world: FakeTidb, core: client.CoreV1Api, custom: client.CustomObjectsApi
) -> None:
    """Graceful scale-in of a heterogeneous cluster sets replicas to 0 before deleting it."""
    custom.create_namespaced_custom_object(G, V, NS, TC, tc_body("auto-x", tikv=2, tidb=0, pd=None, base="basic"))
    eventually(lambda: len(names(core, "auto-x", "tikv")) == 2, message="two tikv pods")
    custom.patch_namespaced_custom_object(G, V, NS, TC, "auto-x", {"spec": {"tikv": {"replicas": 0}}})

    def drained() -> bool:
        status = custom.get_namespaced_custom_object(G, V, NS, TC, "auto-x").get("status") or {}
        return names(core, "auto-x", "tikv") == [] and status["tikv"]["statefulSet"]["replicas"] == 0

    eventually(drained, message="no tikv pods, status replicas 0")


def test_removed_tikv_store_goes_offline_before_its_pod_is_deleted(
    world: FakeTidb, core: client.CoreV1Api, custom: client.CustomObjectsApi
) -> None:
    world.operator.tikv_offline_s = 3600  # held Offline until the test lets go
    custom.create_namespaced_custom_object(G, V, NS, TC, tc_body("basic", tikv=3, tidb=0))
    http = httpx.Client(base_url=world.server.url, timeout=10)
    running(http, 3, "tikv")
    custom.patch_namespaced_custom_object(G, V, NS, TC, "basic", {"spec": {"tikv": {"replicas": 1}}})

    def states() -> dict[str, str]:
        stores = http.get(f"/pd/{NS}/basic/pd/api/v1/stores").json()["stores"]
        return {s["store"]["address"].split(".")[0]: s["store"]["state_name"] for s in stores}

    offline = {"basic-tikv-0": "Up", "basic-tikv-1": "Offline", "basic-tikv-2": "Offline"}
    eventually(lambda: states() == offline, message="two stores Offline")
    tc = custom.get_namespaced_custom_object(G, V, NS, TC, "basic")
    assert tc["status"]["tikv"]["statefulSet"]["replicas"] == 3  # the pods still exist
    assert tc["status"]["tikv"]["phase"] == "Scale"
    custom.patch_namespaced_custom_object(G, V, NS, TC, "basic", {"spec": {"tikv": {"replicas": 2}}})
    eventually(lambda: states() == {**offline, "basic-tikv-1": "Up"}, message="wanted again: back Up")
    world.operator.tikv_offline_s = 0.1
    eventually(lambda: names(core, "basic", "tikv") == ["basic-tikv-0", "basic-tikv-1"], message="offline pod gone")
    assert states() == {"basic-tikv-0": "Up", "basic-tikv-1": "Up"}
    http.close()
