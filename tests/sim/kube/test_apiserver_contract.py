"""Contract tests: the emulated API server answers the official client like a kube-apiserver.

Each test pins one documented apiserver behaviour the product relies on (status codes, Status
bodies, selectors, watch semantics, optimistic concurrency, eviction and PDBs, CRDs).
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client, config, watch
from kubernetes.client.exceptions import ApiException

from sim.cluster import FakeCluster
from tests.polling import eventually
from tests.sim.conftest import deployment_body, node_body, pod_body, ready_nodes, ready_replicas

REPO = Path(__file__).resolve().parents[3]


def status_body(exc: ApiException) -> dict[str, Any]:
    body = json.loads(exc.body)
    assert body["kind"] == "Status" and body["status"] == "Failure"
    assert body["code"] == exc.status
    return body


# ---- create / get / delete ----------------------------------------------------------------


def test_create_returns_201_with_server_fields(core: client.CoreV1Api) -> None:
    pod, code, _ = core.create_namespaced_pod_with_http_info("default", pod_body("web"))
    assert code == 201
    assert pod.metadata.uid and pod.metadata.creation_timestamp is not None
    assert int(pod.metadata.resource_version) > 0
    assert pod.status.phase == "Pending"
    assert pod.kind == "Pod" and pod.api_version == "v1"


def test_generate_name_gives_distinct_names(core: client.CoreV1Api) -> None:
    names = {core.create_namespaced_pod("default", pod_body(generate_name="worker-")).metadata.name for _ in range(5)}
    assert len(names) == 5
    assert all(n.startswith("worker-") and len(n) == len("worker-") + 5 for n in names)


def test_create_existing_is_409_already_exists(core: client.CoreV1Api) -> None:
    core.create_namespaced_pod("default", pod_body("dup"))
    with pytest.raises(ApiException) as info:
        core.create_namespaced_pod("default", pod_body("dup"))
    assert info.value.status == 409
    assert status_body(info.value)["reason"] == "AlreadyExists"


@pytest.mark.parametrize("call", ["get", "delete", "patch", "replace"])
def test_missing_object_is_404_not_found(core: client.CoreV1Api, call: str) -> None:
    with pytest.raises(ApiException) as info:
        if call == "get":
            core.read_namespaced_pod("ghost", "default")
        elif call == "delete":
            core.delete_namespaced_pod("ghost", "default")
        elif call == "patch":
            core.patch_namespaced_pod("ghost", "default", {"metadata": {"labels": {"a": "b"}}})
        else:
            core.replace_namespaced_pod("ghost", "default", pod_body("ghost"))
    assert info.value.status == 404
    body = status_body(info.value)
    assert body["reason"] == "NotFound"
    assert body["details"]["name"] == "ghost" and body["details"]["kind"] == "pods"


def test_create_in_missing_namespace_is_404(core: client.CoreV1Api) -> None:
    with pytest.raises(ApiException) as info:
        core.create_namespaced_pod("nowhere", pod_body("p"))
    assert info.value.status == 404


def test_invalid_name_is_422(core: client.CoreV1Api) -> None:
    with pytest.raises(ApiException) as info:
        core.create_node(node_body("Upper_Case"))
    assert info.value.status == 422
    assert status_body(info.value)["reason"] == "Invalid"


def test_delete_returns_200_with_object(core: client.CoreV1Api) -> None:
    core.create_namespaced_config_map("default", {"metadata": {"name": "cfg"}, "data": {"k": "v"}})
    raw = core.delete_namespaced_config_map("cfg", "default", _preload_content=False)
    assert raw.status == 200
    deleted = json.loads(raw.data)
    assert deleted["kind"] == "ConfigMap" and deleted["metadata"]["name"] == "cfg"
    with pytest.raises(ApiException) as info:
        core.read_namespaced_config_map("cfg", "default")
    assert info.value.status == 404


def test_finalizers_defer_deletion_until_removed(core: client.CoreV1Api) -> None:
    core.create_namespaced_config_map("default", {"metadata": {"name": "held", "finalizers": ["x/y"]}})
    _, code, _ = core.delete_namespaced_config_map_with_http_info("held", "default")
    assert code == 202
    held = core.read_namespaced_config_map("held", "default")
    assert held.metadata.deletion_timestamp is not None
    core.patch_namespaced_config_map("held", "default", {"metadata": {"finalizers": None}})
    with pytest.raises(ApiException) as info:
        core.read_namespaced_config_map("held", "default")
    assert info.value.status == 404


# ---- optimistic concurrency ---------------------------------------------------------------


def test_update_with_stale_resource_version_is_409_conflict(core: client.CoreV1Api) -> None:
    created = core.create_namespace({"metadata": {"name": "team-a"}})
    stale = created.metadata.resource_version
    fresh = core.read_namespace("team-a")
    fresh.metadata.labels = {**(fresh.metadata.labels or {}), "tier": "gold"}
    updated = core.replace_namespace("team-a", fresh)
    assert int(updated.metadata.resource_version) > int(stale)
    fresh.metadata.resource_version = stale
    fresh.metadata.labels["tier"] = "silver"
    with pytest.raises(ApiException) as info:
        core.replace_namespace("team-a", fresh)
    assert info.value.status == 409
    assert status_body(info.value)["reason"] == "Conflict"
    assert core.read_namespace("team-a").metadata.labels["tier"] == "gold"


def test_resource_version_is_global_and_monotonic(core: client.CoreV1Api) -> None:
    versions = [
        int(core.create_namespaced_config_map("default", {"metadata": {"name": "c1"}}).metadata.resource_version),
        int(core.create_node(node_body("rv-node")).metadata.resource_version),
        int(core.create_namespaced_pod("default", pod_body("rv-pod")).metadata.resource_version),
    ]
    assert versions == sorted(versions) and len(set(versions)) == 3
    listed = core.list_namespaced_pod("default")
    assert int(listed.metadata.resource_version) >= versions[-1]


def test_pod_update_through_main_endpoint_keeps_status(core: client.CoreV1Api) -> None:
    core.create_namespaced_pod("default", pod_body("keep"))
    core.patch_namespaced_pod("keep", "default", {"status": {"phase": "Running"}})
    assert core.read_namespaced_pod("keep", "default").status.phase == "Pending"
    core.patch_namespaced_pod_status("keep", "default", {"status": {"phase": "Running"}})
    assert core.read_namespaced_pod("keep", "default").status.phase == "Running"


def test_pod_spec_is_immutable(core: client.CoreV1Api) -> None:
    core.create_namespaced_pod("default", pod_body("frozen"))
    with pytest.raises(ApiException) as info:
        core.patch_namespaced_pod("frozen", "default", {"spec": {"nodeName": "elsewhere"}})
    assert info.value.status == 422


# ---- patches ------------------------------------------------------------------------------


def test_patch_flavours(core: client.CoreV1Api) -> None:
    core.create_node(node_body("patchy", labels={"a": "1", "b": "2"}))
    # The client sends a dict body as a strategic merge patch.
    core.patch_node("patchy", {"metadata": {"labels": {"a": "10", "b": None}}})
    assert core.read_node("patchy").metadata.labels == {"a": "10"}
    core.patch_node("patchy", {"spec": {"unschedulable": True}}, _content_type="application/merge-patch+json")
    assert core.read_node("patchy").spec.unschedulable is True
    core.patch_node(
        "patchy",
        [
            {"op": "add", "path": "/spec/taints", "value": [{"key": "k", "value": "v", "effect": "NoSchedule"}]},
            {"op": "replace", "path": "/metadata/labels/a", "value": "11"},
        ],
    )
    node = core.read_node("patchy")
    assert node.spec.taints[0].key == "k" and node.metadata.labels["a"] == "11"
    with pytest.raises(ApiException) as info:
        core.patch_node("patchy", [{"op": "test", "path": "/metadata/labels/a", "value": "nope"}])
    assert info.value.status == 422


def test_strategic_merge_patch_merges_conditions_by_type(core: client.CoreV1Api) -> None:
    core.create_node(
        {
            **node_body("cond", fake=False),
            "status": {
                "conditions": [{"type": "Ready", "status": "False"}, {"type": "DiskPressure", "status": "False"}]
            },
        }
    )
    core.patch_node_status("cond", {"status": {"conditions": [{"type": "Ready", "status": "True"}]}})
    conditions = {c.type: c.status for c in core.read_node("cond").status.conditions}
    assert conditions == {"Ready": "True", "DiskPressure": "False"}


def test_patch_with_stale_resource_version_is_409(core: client.CoreV1Api) -> None:
    node = core.create_node(node_body("guarded"))
    core.patch_node("guarded", {"metadata": {"labels": {"x": "1"}}})
    with pytest.raises(ApiException) as info:
        core.patch_node(
            "guarded", {"metadata": {"resourceVersion": node.metadata.resource_version, "labels": {"x": "2"}}}
        )
    assert info.value.status == 409


# ---- selectors and lists ------------------------------------------------------------------


def test_label_selectors(core: client.CoreV1Api) -> None:
    for name, labels in {
        "a": {"app": "web", "tier": "front"},
        "b": {"app": "web", "tier": "back"},
        "c": {"app": "db"},
        "d": {},
    }.items():
        core.create_namespaced_pod("default", pod_body(name, labels=labels))

    def names(selector: str) -> list[str]:
        return sorted(p.metadata.name for p in core.list_namespaced_pod("default", label_selector=selector).items)

    assert names("app=web") == ["a", "b"]
    assert names("app==web,tier=back") == ["b"]
    assert names("app!=web") == ["c", "d"]
    assert names("tier in (front,back)") == ["a", "b"]
    assert names("app notin (web)") == ["c", "d"]
    assert names("tier") == ["a", "b"]
    assert names("!tier") == ["c", "d"]
    with pytest.raises(ApiException) as info:
        core.list_namespaced_pod("default", label_selector="app in web")
    assert info.value.status == 400


def test_field_selectors(core: client.CoreV1Api) -> None:
    core.create_namespaced_pod("default", pod_body("bound", node_name="n1"))
    core.create_namespaced_pod("default", pod_body("free"))
    core.patch_namespaced_pod_status("bound", "default", {"status": {"phase": "Running"}})

    def names(selector: str) -> list[str]:
        return sorted(p.metadata.name for p in core.list_namespaced_pod("default", field_selector=selector).items)

    assert names("spec.nodeName=") == ["free"]
    assert names("spec.nodeName=n1") == ["bound"]
    assert names("spec.nodeName!=") == ["bound"]
    assert names("status.phase=Pending") == ["free"]
    assert names("metadata.name=free,metadata.namespace=default") == ["free"]
    with pytest.raises(ApiException) as info:
        core.list_namespaced_pod("default", field_selector="spec.bogus=1")
    assert info.value.status == 400


def test_event_field_selectors(core: client.CoreV1Api) -> None:
    for name, kind, target in (("e1", "Pod", "web"), ("e2", "Node", "web"), ("e3", "Pod", "db")):
        core.create_namespaced_event(
            "default",
            {
                "metadata": {"name": name},
                "reason": "Test",
                "message": "m",
                "type": "Normal",
                "involvedObject": {"kind": kind, "name": target, "namespace": "default"},
            },
        )
    found = core.list_namespaced_event("default", field_selector="involvedObject.kind=Pod,involvedObject.name=web")
    assert [e.metadata.name for e in found.items] == ["e1"]


def test_cross_namespace_list_and_pagination(core: client.CoreV1Api) -> None:
    core.create_namespace({"metadata": {"name": "other"}})
    for i in range(5):
        core.create_namespaced_pod("default" if i % 2 else "other", pod_body(f"p{i}"))
    assert len(core.list_pod_for_all_namespaces().items) == 5
    seen: list[str] = []
    token = None
    pages = 0
    while True:
        page = core.list_pod_for_all_namespaces(limit=2, _continue=token)
        seen += [p.metadata.name for p in page.items]
        pages += 1
        token = page.metadata._continue
        if not token:
            break
    assert sorted(seen) == [f"p{i}" for i in range(5)] and pages == 3


# ---- watch --------------------------------------------------------------------------------


def test_watch_streams_events_from_resource_version(core: client.CoreV1Api) -> None:
    start = core.list_namespaced_pod("default").metadata.resource_version
    # Left to another scheduler: the sim's own would mark it Unschedulable (a MODIFIED event)
    # whenever its pass falls between these calls, as it did on a loaded machine.
    w1 = pod_body("w1", labels={"app": "web"})
    w1["spec"]["schedulerName"] = "other-scheduler"
    core.create_namespaced_pod("default", w1)
    core.patch_namespaced_pod("w1", "default", {"metadata": {"labels": {"extra": "1"}}})
    core.create_namespaced_pod("default", pod_body("other", labels={"app": "db"}))
    core.delete_namespaced_pod("w1", "default")
    events = [
        (e["type"], e["object"].metadata.name)
        for e in watch.Watch().stream(
            core.list_namespaced_pod, "default", label_selector="app=web", resource_version=start, timeout_seconds=1
        )
    ]
    assert events == [("ADDED", "w1"), ("MODIFIED", "w1"), ("DELETED", "w1")]


@pytest.mark.parametrize(
    ("value", "watches"),
    [("true", True), ("True", True), ("1", True), ("", True), ("false", False), ("FALSE", False), ("0", False)],
)
def test_a_boolean_query_parameter_is_read_as_the_api_server_converts_it(
    cluster: FakeCluster, value: str, watches: bool
) -> None:
    """apimachinery pkg/runtime/conversion.go Convert_Slice_string_To_bool: only "0" and "false"
    (any case) are false. kubernetes-client 36 sends `watch=True`; a sim that knew only "true"
    and "1" answered it a list, and that client's informers never saw an event."""
    req = urllib.request.Request(
        f"{cluster.url}/api/v1/namespaces?watch={value}&timeoutSeconds=1",
        headers={"Authorization": f"Bearer {cluster.token}"},
    )
    with urllib.request.urlopen(req, timeout=10, context=cluster.ssl_context()) as resp:
        first = json.loads(resp.readline())
        assert resp.headers.get("Transfer-Encoding") == ("chunked" if watches else None)
    assert (first.get("type"), first.get("kind")) == (("ADDED", None) if watches else (None, "NamespaceList"))


def test_watch_delivers_live_events(core: client.CoreV1Api) -> None:
    core.create_namespaced_pod("default", pod_body("existing"))
    received: list[tuple[str, str]] = []
    w = watch.Watch()
    writer = threading.Thread(target=core.create_namespaced_pod, args=("default", pod_body("live")))
    for event in w.stream(core.list_namespaced_pod, "default", timeout_seconds=60):
        received.append((event["type"], event["object"].metadata.name))
        if received[-1] == ("ADDED", "existing"):
            writer.start()  # the watch is open: its first event arrived
        if received[-1] == ("ADDED", "live"):
            w.stop()
    writer.join()
    # (the scheduler may add MODIFIED events: these pods have no node to go to)
    assert [r for r in received if r[0] == "ADDED"] == [("ADDED", "existing"), ("ADDED", "live")]


def test_watch_honours_timeout_seconds(core: client.CoreV1Api) -> None:
    started = time.monotonic()
    events = list(
        watch.Watch().stream(
            core.list_namespaced_pod, "default", label_selector="app=none", timeout_seconds=1, _request_timeout=60
        )
    )
    elapsed = time.monotonic() - started
    # The server ends the stream by itself (a hang would run into the 60 s client timeout).
    assert events == [] and 1 <= elapsed < 60


def test_watch_selector_transitions(core: client.CoreV1Api) -> None:
    start = core.list_namespaced_pod("default").metadata.resource_version
    # Bound to a node that is not KWOK's, so neither the scheduler nor KWOK touches it meanwhile.
    core.create_namespaced_pod("default", pod_body("t", labels={"app": "db"}, node_name="n1"))
    core.patch_namespaced_pod("t", "default", {"metadata": {"labels": {"app": "web"}}})
    core.patch_namespaced_pod("t", "default", {"metadata": {"labels": {"app": "db"}}})
    events = [
        e["type"]
        for e in watch.Watch().stream(
            core.list_namespaced_pod, "default", label_selector="app=web", resource_version=start, timeout_seconds=1
        )
    ]
    assert events == ["ADDED", "DELETED"]


def test_watch_stop_closes_stream(core: client.CoreV1Api, cluster: FakeCluster) -> None:
    w = watch.Watch()
    core.create_namespaced_pod("default", pod_body("once"))
    for _ in w.stream(core.list_namespaced_pod, "default", _request_timeout=5):
        w.stop()
    # The server notices the closed connection and ends the watch (counted when it ends).
    eventually(
        lambda: cluster.control_request("GET", "/sim/v1/stats")["by_verb"].get("watch") == 1,
        message="watch ended server-side",
    )


# ---- eviction and disruption budgets -------------------------------------------------------


def _running_pod(core: client.CoreV1Api, name: str, labels: dict[str, str]) -> None:
    core.create_namespaced_pod("default", pod_body(name, labels=labels, node_name="n1"))
    core.patch_namespaced_pod_status(
        name, "default", {"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}}
    )


def test_eviction_refused_with_429_by_pdb(core: client.CoreV1Api, policy: client.PolicyV1Api) -> None:
    for name in ("db-0", "db-1"):
        _running_pod(core, name, {"app": "db"})
    policy.create_namespaced_pod_disruption_budget(
        "default", {"metadata": {"name": "db"}, "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "db"}}}}
    )
    pdb = policy.read_namespaced_pod_disruption_budget("db", "default")
    assert (
        pdb.status.current_healthy,
        pdb.status.desired_healthy,
        pdb.status.disruptions_allowed,
        pdb.status.expected_pods,
    ) == (2, 2, 0, 2)
    eviction = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "db-0", "namespace": "default"}}
    with pytest.raises(ApiException) as info:
        core.create_namespaced_pod_eviction("db-0", "default", eviction)
    assert info.value.status == 429
    body = status_body(info.value)
    assert body["reason"] == "TooManyRequests" and "disruption budget" in body["message"]
    assert core.read_namespaced_pod("db-0", "default").metadata.name == "db-0"


def test_eviction_allowed_when_budget_permits(core: client.CoreV1Api, policy: client.PolicyV1Api) -> None:
    for name in ("web-0", "web-1", "web-2"):
        _running_pod(core, name, {"app": "web"})
    policy.create_namespaced_pod_disruption_budget(
        "default",
        {"metadata": {"name": "web"}, "spec": {"minAvailable": "60%", "selector": {"matchLabels": {"app": "web"}}}},
    )
    assert policy.read_namespaced_pod_disruption_budget("web", "default").status.disruptions_allowed == 1
    eviction = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "web-0", "namespace": "default"}}
    _, code, _ = core.create_namespaced_pod_eviction_with_http_info("web-0", "default", eviction)
    assert code == 201
    with pytest.raises(ApiException):
        core.read_namespaced_pod("web-0", "default")
    with pytest.raises(ApiException) as info:  # the budget is now spent
        core.create_namespaced_pod_eviction("web-1", "default", {**eviction, "metadata": {"name": "web-1"}})
    assert info.value.status == 429


def test_a_watcher_sees_a_pdb_status_change_the_pods_made(core: client.CoreV1Api, policy: client.PolicyV1Api) -> None:
    """An informer holds what it was sent: the disruption controller writes a new status when the
    pods change it (a PDB made before its pods allowed 0 disruptions; once they run, 1)."""
    policy.create_namespaced_pod_disruption_budget(
        "default", {"metadata": {"name": "db"}, "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "db"}}}}
    )
    rv = policy.list_namespaced_pod_disruption_budget("default").metadata.resource_version
    for name in ("db-0", "db-1"):
        _running_pod(core, name, {"app": "db"})
    seen = watch.Watch().stream(
        policy.list_namespaced_pod_disruption_budget, "default", resource_version=rv, timeout_seconds=10
    )
    allowed = next(e["object"].status.disruptions_allowed for e in seen if e["object"].status.disruptions_allowed)
    assert allowed == 1


def test_eviction_without_pdb_deletes_pod(core: client.CoreV1Api) -> None:
    _running_pod(core, "lonely", {"app": "x"})
    _, code, _ = core.create_namespaced_pod_eviction_with_http_info(
        "lonely", "default", {"metadata": {"name": "lonely", "namespace": "default"}}
    )
    assert code == 201
    assert core.list_namespaced_pod("default", field_selector="metadata.name=lonely").items == []


# ---- custom resources ---------------------------------------------------------------------

CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "nodegroups.example.dev"},
    "spec": {
        "group": "example.dev",
        "scope": "Namespaced",
        "names": {"plural": "nodegroups", "singular": "nodegroup", "kind": "NodeGroup"},
        "versions": [
            {
                "name": "v1alpha1",
                "served": True,
                "storage": True,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
            }
        ],
    },
}


def test_crd_backed_custom_objects(apiext: client.ApiextensionsV1Api, custom: client.CustomObjectsApi) -> None:
    apiext.create_custom_resource_definition(CRD)
    crd = apiext.read_custom_resource_definition(CRD["metadata"]["name"])
    assert any(c.type == "Established" and c.status == "True" for c in crd.status.conditions)
    args = ("example.dev", "v1alpha1", "default", "nodegroups")
    created = custom.create_namespaced_custom_object(
        *args,
        {
            "apiVersion": "example.dev/v1alpha1",
            "kind": "NodeGroup",
            "metadata": {"name": "pool-a"},
            "spec": {"priority": 10},
            "status": {"ignored": True},
        },
    )
    assert isinstance(created, dict) and created["metadata"]["uid"]
    assert "status" not in created  # status subresource: status is not settable on create
    with pytest.raises(ApiException) as info:
        custom.create_namespaced_custom_object(
            *args, {"apiVersion": "example.dev/v1alpha1", "kind": "NodeGroup", "metadata": {"name": "pool-a"}}
        )
    assert info.value.status == 409
    custom.patch_namespaced_custom_object_status(*args, "pool-a", {"status": {"nodes": 3}})
    custom.patch_namespaced_custom_object(*args, "pool-a", {"spec": {"priority": 20}})
    got = custom.get_namespaced_custom_object(*args, "pool-a")
    assert got["status"] == {"nodes": 3} and got["spec"]["priority"] == 20
    assert got["metadata"]["generation"] == 2
    listed = custom.list_namespaced_custom_object(*args, label_selector="")
    assert [i["metadata"]["name"] for i in listed["items"]] == ["pool-a"]
    with pytest.raises(ApiException) as info:
        custom.get_namespaced_custom_object(*args, "missing")
    assert info.value.status == 404
    apiext.delete_custom_resource_definition(CRD["metadata"]["name"])
    with pytest.raises(ApiException) as info:
        custom.list_namespaced_custom_object(*args)
    assert info.value.status == 404


def test_cluster_scoped_crd(apiext: client.ApiextensionsV1Api, custom: client.CustomObjectsApi) -> None:
    body = json.loads(json.dumps(CRD))
    body["metadata"]["name"] = "regions.example.dev"
    body["spec"].update(scope="Cluster", names={"plural": "regions", "kind": "Region"})
    apiext.create_custom_resource_definition(body)
    created = custom.create_cluster_custom_object(
        "example.dev",
        "v1alpha1",
        "regions",
        {"apiVersion": "example.dev/v1alpha1", "kind": "Region", "metadata": {"name": "fsn1"}},
    )
    assert "namespace" not in created["metadata"]
    assert custom.get_cluster_custom_object("example.dev", "v1alpha1", "regions", "fsn1")["kind"] == "Region"


# ---- other semantics the product relies on -------------------------------------------------


def test_requests_without_token_are_401(cluster: FakeCluster) -> None:
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(cluster.url + "/api/v1/namespaces", timeout=10, context=cluster.ssl_context())
    assert info.value.code == 401
    configuration = client.Configuration()
    configuration.host = cluster.url
    configuration.ssl_ca_cert = cluster.ca_file
    with client.ApiClient(configuration) as anonymous:
        with pytest.raises(ApiException) as exc:
            client.CoreV1Api(anonymous).list_node()
    assert exc.value.status == 401


def test_deleting_node_deletes_its_pods(core: client.CoreV1Api) -> None:
    core.create_node(node_body("doomed"))
    core.create_namespaced_pod("default", pod_body("on-doomed", node_name="doomed"))
    core.create_namespaced_pod("default", pod_body("elsewhere", node_name="other"))
    core.delete_node("doomed")
    assert [p.metadata.name for p in core.list_namespaced_pod("default").items] == ["elsewhere"]


def test_binding_subresource(core: client.CoreV1Api) -> None:
    core.create_namespaced_pod("default", pod_body("bindme"))
    target = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": "bindme"},
        "target": {"apiVersion": "v1", "kind": "Node", "name": "n7"},
    }
    # The apiserver answers a Status, which the client cannot read as a V1Binding: ask raw.
    response = core.create_namespaced_pod_binding("bindme", "default", target, _preload_content=False)
    assert response.status == 201
    pod = core.read_namespaced_pod("bindme", "default")
    assert pod.spec.node_name == "n7"
    assert [(c.type, c.status) for c in pod.status.conditions] == [("PodScheduled", "True")]
    with pytest.raises(ApiException) as info:
        core.create_namespaced_pod_binding("bindme", "default", target, _preload_content=False)
    assert info.value.status == 409


def test_deployment_controller_recreates_and_scales(core: client.CoreV1Api, apps: client.AppsV1Api) -> None:
    core.create_node(node_body("worker", cpu="8"))
    apps.create_namespaced_deployment("default", deployment_body("web", 3))

    def web_pods() -> list[Any]:
        return core.list_namespaced_pod("default", label_selector="app=web").items

    pods = eventually(lambda: len(web_pods()) == 3 and web_pods(), message="3 replicas")
    owner = pods[0].metadata.owner_references[0]
    assert owner.kind == "ReplicaSet" and owner.controller is True
    assert apps.read_namespaced_replica_set(owner.name, "default").metadata.owner_references[0].kind == "Deployment"
    core.delete_namespaced_pod(pods[0].metadata.name, "default")
    eventually(
        lambda: len(web_pods()) == 3 and pods[0].metadata.name not in {p.metadata.name for p in web_pods()},
        message="deleted pod replaced",
    )
    eventually(lambda: ready_replicas(apps, "web") == 3, message="deployment ready")
    apps.patch_namespaced_deployment_scale("web", "default", {"spec": {"replicas": 1}})
    eventually(lambda: len(web_pods()) == 1, message="scaled to 1")
    apps.delete_namespaced_deployment("web", "default")
    eventually(
        lambda: not web_pods() and not apps.list_namespaced_replica_set("default").items, message="garbage collected"
    )


def test_daemonset_puts_one_pod_per_node(core: client.CoreV1Api, apps: client.AppsV1Api) -> None:
    for name in ("d1", "d2"):
        core.create_node(node_body(name, taints=[{"key": "dedicated", "value": "x", "effect": "NoSchedule"}]))
    apps.create_namespaced_daemon_set(
        "default",
        {
            "metadata": {"name": "agent"},
            "spec": {
                "selector": {"matchLabels": {"app": "agent"}},
                "template": {
                    "metadata": {"labels": {"app": "agent"}},
                    "spec": {"containers": [{"name": "c", "image": "img"}]},
                },
            },
        },
    )
    pods = eventually(
        lambda: (lambda items: len(items) == 2 and items)(
            core.list_namespaced_pod("default", label_selector="app=agent").items
        ),
        message="2 daemon pods",
    )
    assert sorted(p.spec.node_name for p in pods) == ["d1", "d2"]
    core.create_node(node_body("d3"))
    eventually(
        lambda: len(core.list_namespaced_pod("default", label_selector="app=agent").items) == 3,
        message="daemon pod on the new node",
    )


def test_control_api_faults_and_stats(cluster: FakeCluster, core: client.CoreV1Api) -> None:
    cluster.control_request("DELETE", "/sim/v1/stats")
    core.list_node()
    # The server counts a request after answering it: wait for the count, don't race it.
    stats = eventually(
        lambda: (s := cluster.control_request("GET", "/sim/v1/stats"))["by_verb"].get("list") and s,
        message="list counted",
    )
    assert stats["requests_total"] >= 1 and stats["by_verb"]["list"] == 1
    assert stats["objects"]["namespaces"] == 4
    cluster.control_request(
        "POST",
        "/sim/v1/faults",
        {"request_failures": [{"method": "GET", "path_regex": "^/api/v1/nodes$", "status": 503, "times": 1}]},
    )
    with pytest.raises(ApiException) as info:
        core.list_node()
    assert info.value.status == 503
    core.list_node()  # only once
    with pytest.raises(urllib.error.HTTPError) as bad:
        cluster.control_request("POST", "/sim/v1/settings", {"scoring": "random"})
    assert bad.value.code == 400


def test_control_api_holds_a_request_in_progress_until_lifted(cluster: FakeCluster, core: client.CoreV1Api) -> None:
    # The next node create hangs unanswered (a caller caught mid-call); others pass; lifting
    # the hold serves it as usual.
    hold = {"method": "POST", "path_regex": "^/api/v1/nodes$", "times": 1}
    cluster.control_request("POST", "/sim/v1/faults", {"request_holds": [hold]})
    held = threading.Thread(target=core.create_node, args=(node_body("held", labels={"req": "r1"}),))
    held.start()
    holds = eventually(
        lambda: (h := cluster.control_request("GET", "/sim/v1/faults")["request_holds"])[0]["waiting"] == 1 and h,
        message="the create held",
    )
    assert holds[0]["held"] == 1 and holds[0]["times"] == 0
    assert holds[0]["objects"] == [{"name": "held", "labels": {"req": "r1"}}]
    core.create_node(node_body("passes"))  # the hold caught one create only
    assert held.is_alive() and [n.metadata.name for n in core.list_node().items] == ["passes"]
    cluster.control_request("DELETE", "/sim/v1/faults")
    held.join(timeout=30)
    assert not held.is_alive()
    assert core.read_node("held").metadata.labels["req"] == "r1"
    assert cluster.control_request("GET", "/sim/v1/faults")["request_holds"] == []
    for bad, field in (
        ({"path_regex": "x"}, "method"),
        ({**hold, "times": -1}, "times"),
        ({**hold, "path_regex": "("}, "path_regex"),
        ({**hold, "body_regex": "("}, "body_regex"),
    ):
        with pytest.raises(urllib.error.HTTPError) as refused:
            cluster.control_request("POST", "/sim/v1/faults", {"request_holds": [bad]})
        assert refused.value.code == 400 and field in json.loads(refused.value.read())["message"]


def test_control_api_holds_only_the_request_whose_body_matches(cluster: FakeCluster, core: client.CoreV1Api) -> None:
    # A node's PATCHes (a taint, a mark, a cordon) in whatever order: the hold catches the cordon.
    core.create_node(node_body("n1"))
    hold = {"method": "PATCH", "path_regex": "^/api/v1/nodes/n1$", "body_regex": '"unschedulable":true'}
    cluster.control_request("POST", "/sim/v1/faults", {"request_holds": [hold]})
    core.patch_node("n1", {"metadata": {"labels": {"a": "b"}}}, _request_timeout=10)  # not a cordon: served
    held = threading.Thread(target=core.patch_node, args=("n1", {"spec": {"unschedulable": True}}))
    held.start()
    eventually(
        lambda: cluster.control_request("GET", "/sim/v1/faults")["request_holds"][0]["waiting"] == 1,
        message="the cordon held",
    )
    assert core.read_node("n1").metadata.labels["a"] == "b" and not core.read_node("n1").spec.unschedulable
    cluster.control_request("DELETE", "/sim/v1/faults")
    held.join(timeout=30)
    assert not held.is_alive() and core.read_node("n1").spec.unschedulable


def test_cli_writes_kubeconfig_and_serves(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "sim.cluster",
            "--port",
            "0",
            "--kubeconfig",
            str(kubeconfig),
            "--node-ready-delay",
            "0.1",
            "--scoring",
            "most-allocated",
        ],
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        assert line.startswith("sim cluster ready: https://127.0.0.1:")
        url = line.split(": ", 1)[1].strip()
        assert yaml.safe_load(kubeconfig.read_text())["clusters"][0]["cluster"]["server"] == url
        api = config.new_client_from_config(str(kubeconfig))
        core = client.CoreV1Api(api)
        core.create_node(node_body("cli-node"))
        ready_nodes(core, "cli-node")
        api.close()
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0


def test_pdb_counts_controller_scale_while_replacement_starts(
    cluster: FakeCluster, core: client.CoreV1Api, apps: client.AppsV1Api, policy: client.PolicyV1Api
) -> None:
    core.create_node(node_body("host", cpu="8"))
    apps.create_namespaced_deployment("default", deployment_body("api", 3))
    policy.create_namespaced_pod_disruption_budget(
        "default",
        {"metadata": {"name": "api"}, "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "api"}}}},
    )
    eventually(
        lambda: policy.read_namespaced_pod_disruption_budget("api", "default").status.disruptions_allowed == 1,
        message="budget healthy",
    )
    cluster.control.pod_start_delay = 3600  # the replacement stays unready until the test says so
    first, second = [p.metadata.name for p in core.list_namespaced_pod("default", label_selector="app=api").items][:2]
    core.create_namespaced_pod_eviction(first, "default", {"metadata": {"name": first, "namespace": "default"}})
    status = policy.read_namespaced_pod_disruption_budget("api", "default").status
    assert (status.expected_pods, status.current_healthy, status.disruptions_allowed) == (3, 2, 0)
    with pytest.raises(ApiException) as info:
        core.create_namespaced_pod_eviction(second, "default", {"metadata": {"name": second, "namespace": "default"}})
    assert info.value.status == 429
    cluster.control.pod_start_delay = 0
    eventually(
        lambda: policy.read_namespaced_pod_disruption_budget("api", "default").status.disruptions_allowed == 1,
        message="replacement Ready restores the budget",
    )


def test_watch_from_compacted_resource_version_is_410(cluster: FakeCluster, core: client.CoreV1Api) -> None:
    cluster.store.event_log_size = 5  # compact the history aggressively, like etcd would
    start = core.list_namespaced_config_map("default").metadata.resource_version
    for i in range(20):
        core.create_namespaced_config_map("default", {"metadata": {"name": f"c{i}"}})
    with pytest.raises(ApiException) as info:
        list(
            watch.Watch().stream(core.list_namespaced_config_map, "default", resource_version=start, timeout_seconds=1)
        )
    assert info.value.status == 410
