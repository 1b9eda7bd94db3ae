"""What a Kubernetes user meets first: kubectl against the simulated cluster.

The same behaviour is pinned twice: through the official Python client (always), and through
the real kubectl when one is on PATH (skipped otherwise; the suite never installs it):
HTTPS verified against the kubeconfig's CA, the bearer token required, meta.k8s.io Table
output (columns of nodes, pods, deployments, events, namespaces, CRD printer columns; watches),
and enough OpenAPI that `kubectl apply` validates without --validate=false.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import ssl
import subprocess
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client, config

from sim.cluster import FakeCluster
from sim.kube import openapi, tls
from sim.kube.tables import human_duration, json_path, table_version
from tests.polling import eventually
from tests.sim.conftest import deployment_body, node_body, pod_body, ready_nodes, ready_replicas

REPO = Path(__file__).resolve().parents[3]
TABLE = (
    "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"
)
GROUP, VERSION, PLURAL = "growth.autoscaling.dev", "v1alpha1", "nodegroupswithpriority"
KUBECTL = shutil.which("kubectl")
needs_kubectl = pytest.mark.skipif(KUBECTL is None, reason="kubectl is not on PATH")


@pytest.fixture
def kubeconfig(cluster: FakeCluster, tmp_path: Path) -> Path:
    return cluster.write_kubeconfig(tmp_path / "kubeconfig")


@pytest.fixture
def kube(kubeconfig: Path) -> Iterator[client.ApiClient]:
    """Built from the kubeconfig file, as the worker and the starters build theirs."""
    api = config.new_client_from_config(config_file=str(kubeconfig))
    yield api
    api.close()


def request(api: client.ApiClient, path: str, accept: str = "application/json", **query: str) -> Any:
    """A GET through the official client's own transport (its connection pool, CA and token as
    the kubeconfig gave them)."""
    url = api.configuration.host + path + (f"?{urllib.parse.urlencode(query)}" if query else "")
    auth = api.configuration.auth_settings()["BearerToken"]
    headers = {"Accept": accept, auth["key"]: auth["value"]}
    response = api.rest_client.pool_manager.request("GET", url, headers=headers, preload_content=False)
    assert response.status == 200, response.read()
    return response


def get(api: client.ApiClient, path: str, accept: str = "application/json", **query: str) -> Any:
    return json.loads(request(api, path, accept, **query).read())


def raw(
    cluster: FakeCluster,
    path: str,
    token: str | None = None,
    accept: str = "application/json",
    context: ssl.SSLContext | None = None,
) -> tuple[int, bytes, str]:
    headers = {"Accept": accept, **({"Authorization": f"Bearer {token}"} if token else {})}
    request = urllib.request.Request(cluster.url + path, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=30, context=context or cluster.ssl_context()) as resp:
            return resp.status, resp.read(), resp.headers.get("Content-Type", "")
    except urllib.error.HTTPError as err:
        return err.code, err.read(), err.headers.get("Content-Type", "")


def apply_crd(api: client.ApiClient) -> None:
    body = yaml.safe_load((REPO / "deploy" / "crds" / "nodegroupwithpriority.yaml").read_text())
    client.ApiextensionsV1Api(api).create_custom_resource_definition(body)


def columns(table: dict[str, Any], wide: bool = False) -> list[str]:
    return [c["name"] for c in table["columnDefinitions"] if wide or c["priority"] == 0]


def cells(table: dict[str, Any], name: str) -> dict[str, Any]:
    names = [c["name"] for c in table["columnDefinitions"]]
    row = next(
        r for r in table["rows"] if r["cells"][0] == name or r.get("object", {}).get("metadata", {}).get("name") == name
    )
    return dict(zip(names, row["cells"], strict=True))


# ---- transport: HTTPS, CA, token ------------------------------------------------------------


def test_kubeconfig_carries_the_ca_and_the_token(cluster: FakeCluster, kubeconfig: Path) -> None:
    cfg = yaml.safe_load(kubeconfig.read_text())
    assert cfg["clusters"][0]["cluster"]["server"].startswith("https://127.0.0.1:")
    assert cfg["clusters"][0]["cluster"]["certificate-authority-data"] == cluster.certs.ca_data
    assert cfg["users"][0]["user"]["token"] == cluster.token


def test_the_server_is_verified_against_the_cluster_ca_only(cluster: FakeCluster) -> None:
    assert raw(cluster, "/version")[0] == 200  # the CA verifies it, for 127.0.0.1
    localhost = cluster.url.replace("127.0.0.1", "localhost")
    with urllib.request.urlopen(localhost + "/version", timeout=30, context=cluster.ssl_context()) as resp:
        assert resp.status == 200  # and for localhost (both are in the certificate)
    with pytest.raises(urllib.error.URLError) as err:
        urllib.request.urlopen(cluster.url + "/version", timeout=30, context=ssl.create_default_context())
    assert isinstance(err.value.reason, ssl.SSLCertVerificationError)  # no public CA vouches for it
    with FakeCluster(run_kwok=False, run_scheduler=False, run_controllers=False) as other:
        with pytest.raises(urllib.error.URLError):  # another cluster's CA does not either
            urllib.request.urlopen(cluster.url + "/version", timeout=30, context=other.ssl_context())


def test_plain_http_is_not_served(cluster: FakeCluster) -> None:
    with pytest.raises((urllib.error.URLError, ConnectionError, OSError)):
        urllib.request.urlopen(cluster.url.replace("https://", "http://") + "/version", timeout=30)
    assert raw(cluster, "/version")[0] == 200  # a failed handshake leaves the server serving


def test_requests_need_the_token_except_discovery_of_the_join(cluster: FakeCluster) -> None:
    for path in ("/api/v1/nodes", "/api", "/openapi/v3", "/openapi/v2", "/api/v1/namespaces/kube-public/configmaps"):
        status, body, _ = raw(cluster, path)
        assert status == 401 and json.loads(body)["reason"] == "Unauthorized", path
        assert raw(cluster, path, token="wrong")[0] == 401
        assert raw(cluster, path, token=cluster.token)[0] == 200
    assert raw(cluster, "/version")[0] == 200 and raw(cluster, "/healthz")[0] == 200
    status, body, _ = raw(cluster, "/api/v1/namespaces/kube-public/configmaps/cluster-info")
    assert status == 200  # what `kubeadm join` reads before it has credentials: the CA, no secrets
    info = yaml.safe_load(json.loads(body)["data"]["kubeconfig"])
    assert info["clusters"][0]["cluster"]["certificate-authority-data"] == cluster.certs.ca_data
    assert "users" not in info or not info["users"]


def test_the_official_client_reuses_its_connections(cluster: FakeCluster, kube: client.ApiClient) -> None:
    core = client.CoreV1Api(kube)
    before = cluster.control_request("GET", "/sim/v1/stats")["connections_accepted"]
    for i in range(200):
        core.create_namespaced_pod("default", pod_body(f"ka-{i}"))
    accepted = cluster.control_request("GET", "/sim/v1/stats")["connections_accepted"] - before
    assert accepted <= 3, f"{accepted} TLS connections for 200 creates: keep-alive is not working"


# ---- Table output ---------------------------------------------------------------------------


def test_accept_header_negotiation() -> None:
    assert table_version(TABLE) == "v1"
    assert table_version("application/json;as=Table;v=v1beta1;g=meta.k8s.io") == "v1beta1"
    assert table_version("application/json") is None
    assert table_version("application/json;as=Table;v=v2;g=meta.k8s.io,application/json") is None


def test_plain_json_unless_a_table_is_asked_for(cluster: FakeCluster, kube: client.ApiClient) -> None:
    assert get(kube, "/api/v1/nodes")["kind"] == "NodeList"
    table = get(kube, "/api/v1/nodes", TABLE)
    assert (table["kind"], table["apiVersion"]) == ("Table", "meta.k8s.io/v1")
    assert table["metadata"]["resourceVersion"]
    beta = get(kube, "/api/v1/nodes", "application/json;as=Table;v=v1beta1;g=meta.k8s.io")
    assert beta["apiVersion"] == "meta.k8s.io/v1beta1"


def test_node_table(cluster: FakeCluster, kube: client.ApiClient) -> None:
    core = client.CoreV1Api(kube)
    core.create_node(node_body("w1", labels={"node-role.kubernetes.io/worker": ""}))
    core.create_node(node_body("nr", fake=False))
    ready_nodes(core, "w1")
    core.patch_node("w1", {"spec": {"unschedulable": True}})
    table = get(kube, "/api/v1/nodes", TABLE)
    assert columns(table) == ["Name", "Status", "Roles", "Age", "Version"]
    assert columns(table, wide=True)[5:] == [
        "Internal-IP",
        "External-IP",
        "OS-Image",
        "Kernel-Version",
        "Container-Runtime",
    ]
    w1 = cells(table, "w1")
    assert (w1["Status"], w1["Roles"]) == ("Ready,SchedulingDisabled", "worker")
    assert w1["Age"].endswith("s") and w1["Internal-IP"].startswith("10.")
    assert (cells(table, "nr")["Status"], cells(table, "nr")["Roles"]) == ("Unknown", "<none>")
    # One object, as `kubectl get node w1` asks for it.
    single = get(kube, "/api/v1/nodes/w1", TABLE)
    assert single["kind"] == "Table" and [r["cells"][0] for r in single["rows"]] == ["w1"]


def test_pod_deployment_and_namespace_tables(cluster: FakeCluster, kube: client.ApiClient) -> None:
    core, apps = client.CoreV1Api(kube), client.AppsV1Api(kube)
    core.create_node(node_body("host", cpu="8"))
    apps.create_namespaced_deployment("default", deployment_body("web", 2, image="img:1"))
    core.create_namespaced_pod("default", pod_body("stuck", cpu="100"))  # fits nowhere
    eventually(lambda: ready_replicas(apps, "web") == 2, message="deployment ready")
    pods = get(kube, "/api/v1/namespaces/default/pods", TABLE)
    assert columns(pods) == ["Name", "Ready", "Status", "Restarts", "Age"]
    assert columns(pods, wide=True)[5:] == ["IP", "Node", "Nominated Node", "Readiness Gates"]
    web = next(r["object"]["metadata"]["name"] for r in pods["rows"] if r["cells"][0].startswith("web-"))
    assert {k: cells(pods, web)[k] for k in ("Ready", "Status", "Restarts", "Node")} == {
        "Ready": "1/1",
        "Status": "Running",
        "Restarts": 0,
        "Node": "host",
    }
    assert {k: cells(pods, "stuck")[k] for k in ("Ready", "Status", "Node")} == {
        "Ready": "0/1",
        "Status": "Pending",
        "Node": "<none>",
    }
    deployments = get(kube, "/apis/apps/v1/namespaces/default/deployments", TABLE)
    assert columns(deployments) == ["Name", "Ready", "Up-to-date", "Available", "Age"]
    assert {k: cells(deployments, "web")[k] for k in ("Ready", "Up-to-date", "Available", "Images", "Selector")} == {
        "Ready": "2/2",
        "Up-to-date": 2,
        "Available": 2,
        "Images": "img:1",
        "Selector": "app=web",
    }
    namespaces = get(kube, "/api/v1/namespaces", TABLE)
    assert columns(namespaces) == ["Name", "Status", "Age"] and cells(namespaces, "default")["Status"] == "Active"
    config_maps = get(kube, "/api/v1/namespaces/kube-public/configmaps", TABLE)
    assert columns(config_maps) == ["Name", "Age"]  # any other kind: the default table


def test_event_table(kube: client.ApiClient) -> None:
    client.CoreV1Api(kube).create_namespaced_event(
        "default",
        {
            "metadata": {"name": "e1"},
            "type": "Warning",
            "reason": "NotTriggerScaleUp",
            "message": "no group",
            "involvedObject": {"kind": "Pod", "name": "p1", "namespace": "default"},
            "lastTimestamp": "2020-01-01T00:00:00Z",
            "count": 3,
            "source": {"component": "growth"},
        },
    )
    table = get(kube, "/api/v1/namespaces/default/events", TABLE)
    assert columns(table) == ["Last Seen", "Type", "Reason", "Object", "Message"]
    row = cells(table, "e1")
    assert {k: row[k] for k in ("Type", "Reason", "Object", "Message", "Count", "Source")} == {
        "Type": "Warning",
        "Reason": "NotTriggerScaleUp",
        "Object": "pod/p1",
        "Message": "no group",
        "Count": 3,
        "Source": "growth",
    }
    assert re.fullmatch(r"\d+y(\d+d)?", row["Last Seen"])  # years ago


def test_crd_printer_columns(kube: client.ApiClient) -> None:
    apply_crd(kube)
    custom = client.CustomObjectsApi(kube)
    custom.create_cluster_custom_object(
        GROUP,
        VERSION,
        PLURAL,
        {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "NodeGroupWithPriority",
            "metadata": {"name": "g1"},
            "spec": {"pools": []},
        },
    )
    custom.patch_cluster_custom_object_status(
        GROUP, VERSION, PLURAL, "g1", {"status": {"valid": False, "message": "pools: empty"}}
    )
    custom.create_cluster_custom_object(
        GROUP,
        VERSION,
        PLURAL,
        {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "NodeGroupWithPriority",
            "metadata": {"name": "g2"},
            "spec": {"pools": []},
        },
    )
    table = get(kube, f"/apis/{GROUP}/{VERSION}/{PLURAL}", TABLE)
    assert columns(table) == ["Name", "Valid", "Message"]  # the CRD's additionalPrinterColumns
    assert cells(table, "g1") == {"Name": "g1", "Valid": False, "Message": "pools: empty"}
    assert cells(table, "g2") == {"Name": "g2", "Valid": None, "Message": None}  # kubectl: <none>
    crds = get(kube, "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", TABLE)
    assert columns(crds) == ["Name", "Created At"]


def test_row_objects_follow_include_object(kube: client.ApiClient) -> None:
    client.CoreV1Api(kube).create_node(node_body("n1", labels={"team": "a"}))
    meta = get(kube, "/api/v1/nodes", TABLE)["rows"][0]["object"]
    assert meta["kind"] == "PartialObjectMetadata" and meta["metadata"]["labels"] == {"team": "a"}
    full = get(kube, "/api/v1/nodes", TABLE, includeObject="Object")["rows"][0]["object"]
    assert full["kind"] == "Node" and "status" in full
    assert "object" not in get(kube, "/api/v1/nodes", TABLE, includeObject="None")["rows"][0]


def test_table_watch_sends_columns_once(cluster: FakeCluster, kube: client.ApiClient) -> None:
    core = client.CoreV1Api(kube)
    start = core.list_node().metadata.resource_version
    core.create_node(node_body("wn"))
    ready_nodes(core, "wn")
    response = request(kube, "/api/v1/nodes", TABLE, watch="true", resourceVersion=start, timeoutSeconds="60")
    events: list[dict[str, Any]] = []
    buffer = b""

    def turned_ready() -> bool:
        return len(events) > 1 and events[-1]["object"]["rows"][0]["cells"][:2] == ["wn", "Ready"]

    # The node lifecycle controller's taint writes come between (MODIFIED too): read to the Ready one.
    for chunk in response.stream(4096):
        buffer += chunk
        while b"\n" in buffer and not turned_ready():
            line, buffer = buffer.split(b"\n", 1)
            events.append(json.loads(line))
        if turned_ready():
            break
    response.release_conn()
    added, later = events[0], events[1:]
    assert added["type"] == "ADDED" and added["object"]["kind"] == "Table"
    assert [c["name"] for c in added["object"]["columnDefinitions"]][:5] == [
        "Name",
        "Status",
        "Roles",
        "Age",
        "Version",
    ]
    assert later and all(e["type"] == "MODIFIED" and e["object"]["columnDefinitions"] == [] for e in later)
    assert later[-1]["object"]["rows"][0]["cells"][:2] == ["wn", "Ready"]


def test_human_ages_and_json_paths() -> None:
    assert [
        human_duration(s)
        for s in (
            -5,
            0,
            45,
            119,
            150,
            600,
            3 * 3600 + 60,
            7 * 3600,
            30 * 3600,
            3 * 86400 + 3600,
            40 * 86400,
            800 * 86400,
        )
    ] == ["<invalid>", "0s", "45s", "119s", "2m30s", "10m", "3h1m", "7h", "30h", "3d1h", "40d", "2y70d"]
    obj = {"status": {"valid": True, "pools": [{"n": "a"}, {"n": "b"}]}, "metadata": {"labels": {"a.io/b": "x"}}}
    assert json_path(obj, ".status.valid") == [True]
    assert json_path(obj, "{.status.pools[*].n}") == ["a", "b"]
    assert json_path(obj, ".status.pools[1].n") == ["b"]
    assert json_path(obj, r".metadata.labels.a\.io/b") == ["x"]
    assert json_path(obj, ".status.missing") == []


# ---- OpenAPI --------------------------------------------------------------------------------


def test_openapi_v3_lists_every_group_version_with_field_validation(kube: client.ApiClient) -> None:
    apply_crd(kube)
    root = get(kube, "/openapi/v3")["paths"]
    assert {"api/v1", "apis/apps/v1", "apis/policy/v1", f"apis/{GROUP}/{VERSION}"} <= set(root)
    url = root[f"apis/{GROUP}/{VERSION}"]["serverRelativeURL"]
    assert url.startswith(f"/openapi/v3/apis/{GROUP}/{VERSION}?hash=")
    doc = get(kube, url.split("?")[0])
    item = doc["paths"][f"/apis/{GROUP}/{VERSION}/{PLURAL}/{{name}}"]
    # What kubectl looks for before it leaves validation to the server (fieldValidation=Strict).
    assert item["patch"]["x-kubernetes-group-version-kind"] == {
        "group": GROUP,
        "version": VERSION,
        "kind": "NodeGroupWithPriority",
    }
    assert any(p["name"] == "fieldValidation" and p["in"] == "query" for p in item["patch"]["parameters"])
    # No strategic merge patch advertised: kubectl then uses its compiled-in patch metadata.
    assert "application/strategic-merge-patch+json" not in item["patch"]["requestBody"]["content"]
    schema = doc["components"]["schemas"]["dev.autoscaling.growth.v1alpha1.NodeGroupWithPriority"]
    assert schema["properties"]["status"]["properties"]["valid"] == {"type": "boolean"}  # the CRD's own schema
    core = get(kube, "/openapi/v3/api/v1")
    assert (
        core["paths"]["/api/v1/namespaces/{namespace}/pods/{name}"]["patch"]["x-kubernetes-group-version-kind"]["kind"]
        == "Pod"
    )


def test_openapi_v3_hash_changes_with_the_crds(kube: client.ApiClient) -> None:
    before = get(kube, "/openapi/v3")["paths"]
    apply_crd(kube)
    after = get(kube, "/openapi/v3")["paths"]
    assert f"apis/{GROUP}/{VERSION}" not in before and f"apis/{GROUP}/{VERSION}" in after
    assert before["api/v1"] == after["api/v1"]  # unchanged documents keep their hash (cacheable)


def test_openapi_v2_protobuf_and_json(cluster: FakeCluster) -> None:
    status, body, content_type = raw(cluster, "/openapi/v2", token=cluster.token, accept=openapi.OPENAPI_V2_PROTOBUF)
    assert status == 200 and body == openapi.V2_PROTOBUF and content_type == "application/octet-stream"
    status, body, _ = raw(cluster, "/openapi/v2", token=cluster.token)
    assert status == 200 and json.loads(body)["swagger"] == "2.0"


# ---- the real kubectl (when installed) ------------------------------------------------------


def kubectl(kubeconfig: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    assert KUBECTL is not None
    env = {**os.environ, "KUBECONFIG": str(kubeconfig), "HOME": str(kubeconfig.parent)}  # its cache stays here
    done = subprocess.run([KUBECTL, *args], env=env, capture_output=True, text=True, timeout=120, cwd=REPO)
    if check:
        assert done.returncode == 0, done.stderr
    return done


def header(output: str) -> list[str]:
    return output.splitlines()[0].split()


@needs_kubectl
def test_kubectl_get_nodes_and_pods(cluster: FakeCluster, kubeconfig: Path) -> None:
    core = client.CoreV1Api(cluster.api_client())
    core.create_node(node_body("k1"))
    core.create_namespaced_pod("default", pod_body("p1", node_name="k1"))
    ready_nodes(core, "k1")
    eventually(lambda: core.read_namespaced_pod("p1", "default").status.phase == "Running", message="p1 Running")
    nodes = kubectl(kubeconfig, "get", "nodes").stdout
    assert header(nodes) == ["NAME", "STATUS", "ROLES", "AGE", "VERSION"]
    assert nodes.splitlines()[1].split()[:3] == ["k1", "Ready", "<none>"]
    pods = kubectl(kubeconfig, "get", "pods", "-o", "wide").stdout
    assert header(pods)[:6] == ["NAME", "READY", "STATUS", "RESTARTS", "AGE", "IP"]
    assert pods.splitlines()[1].split()[:4] == ["p1", "1/1", "Running", "0"]
    assert "k1" in pods.splitlines()[1].split()
    everything = kubectl(kubeconfig, "get", "nodes,pods", "-A").stdout
    assert "node/k1" in everything and "pod/p1" in everything


@needs_kubectl
def test_kubectl_apply_validates_without_flags(cluster: FakeCluster, kubeconfig: Path, tmp_path: Path) -> None:
    # Every CRD file (deploy/crds/ also holds the kustomize base's kustomization.yaml).
    crds = sorted(
        str(p.relative_to(REPO)) for p in (REPO / "deploy" / "crds").glob("*.yaml") if p.name != "kustomization.yaml"
    )
    kubectl(kubeconfig, "apply", *[arg for path in crds for arg in ("-f", path)])
    eventually(
        lambda: "nodegroupswithpriority" in kubectl(kubeconfig, "api-resources").stdout, message="the CRD is discovered"
    )
    applied = kubectl(kubeconfig, "apply", "-f", "deploy/examples/nodegroups.yaml")
    assert "nodegroupwithpriority.growth.autoscaling.dev/general created" in applied.stdout
    groups = kubectl(kubeconfig, "get", "nodegroupswithpriority").stdout
    assert header(groups) == ["NAME", "VALID", "MESSAGE"]
    assert [line.split()[0] for line in groups.splitlines()[1:]] == ["general", "kwok"]
    manifest = tmp_path / "app.yaml"
    manifest.write_text(
        yaml.safe_dump_all(
            [
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "demo"}},
                {
                    "apiVersion": "apps/v1",
                    "kind": "Deployment",
                    **deployment_body("web", 1, image="registry.k8s.io/pause:3.9"),
                    "metadata": {"name": "web", "namespace": "demo"},
                },
            ]
        )
    )
    assert "deployment.apps/web created" in kubectl(kubeconfig, "apply", "-f", str(manifest)).stdout
    manifest.write_text(manifest.read_text().replace("replicas: 1", "replicas: 2"))
    assert "deployment.apps/web configured" in kubectl(kubeconfig, "apply", "-f", str(manifest)).stdout
    apps = client.AppsV1Api(cluster.api_client())
    assert apps.read_namespaced_deployment("web", "demo").spec.replicas == 2
    assert header(kubectl(kubeconfig, "get", "deployments", "-n", "demo").stdout) == [
        "NAME",
        "READY",
        "UP-TO-DATE",
        "AVAILABLE",
        "AGE",
    ]


@needs_kubectl
def test_kubectl_without_the_token_is_refused(cluster: FakeCluster, kubeconfig: Path) -> None:
    cfg = yaml.safe_load(kubeconfig.read_text())
    cfg["users"][0]["user"] = {"token": "not-the-cluster-token"}
    anonymous = kubeconfig.parent / "anonymous"
    anonymous.write_text(yaml.safe_dump(cfg))
    done = kubectl(anonymous, "get", "nodes", check=False)
    assert done.returncode != 0 and "provide credentials" in done.stderr  # kubectl's words for a 401
    cfg["clusters"][0]["cluster"]["certificate-authority-data"] = tls.generate().ca_data  # another CA
    cfg["users"][0]["user"] = {"token": cluster.token}
    distrusting = kubeconfig.parent / "distrusting"
    distrusting.write_text(yaml.safe_dump(cfg))
    done = kubectl(distrusting, "get", "nodes", check=False)
    assert done.returncode != 0 and "certificate" in done.stderr


@needs_kubectl
def test_kubectl_get_nodes_watch(cluster: FakeCluster, kubeconfig: Path) -> None:
    assert KUBECTL is not None
    core = client.CoreV1Api(cluster.api_client())
    core.create_node(node_body("early"))
    ready_nodes(core, "early")
    env = {**os.environ, "KUBECONFIG": str(kubeconfig), "HOME": str(kubeconfig.parent)}
    proc = subprocess.Popen(
        [KUBECTL, "get", "nodes", "-w"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    lines: list[str] = []
    timer = threading.Timer(60, proc.kill)  # a generous deadline; the test ends as soon as it sees Ready
    timer.start()
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            if line.split()[:1] == ["early"]:  # the list is printed: the watch is next
                core.create_node(node_body("late"))
            if line.split()[:2] == ["late", "Ready"]:
                break
    finally:
        timer.cancel()
        proc.kill()
        proc.wait()
    assert lines and lines[0].split() == ["NAME", "STATUS", "ROLES", "AGE", "VERSION"]
    assert any(line.split()[:2] == ["late", "Ready"] for line in lines), lines


# ---- server-side field validation (what kubectl's fieldValidation=Strict relies on) ---------

WIDGETS = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.example.dev"},
    "spec": {
        "group": "example.dev",
        "scope": "Namespaced",
        "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "spec": {
                                "type": "object",
                                "properties": {
                                    "size": {"type": "integer"},
                                    "parts": {
                                        "type": "array",
                                        "items": {"type": "object", "properties": {"name": {"type": "string"}}},
                                    },
                                    "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                                    "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                                },
                            }
                        },
                    }
                },
            }
        ],
    },
}


def widget(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "example.dev/v1", "kind": "Widget", "metadata": {"name": name}, "spec": spec}


def test_unknown_fields_follow_the_structural_schema() -> None:
    from sim.kube.validation import unknown_fields

    schema = WIDGETS["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    ok = widget("w", size=1, parts=[{"name": "a"}], labels={"any": "key"}, free={"x": {"y": 1}})
    assert unknown_fields(ok, schema) == []
    bad = widget("w", size=1, colour="red", parts=[{"name": "a", "weight": 2}])
    assert unknown_fields(bad, schema) == ["spec.colour", "spec.parts[0].weight"]
    assert unknown_fields({**ok, "extra": 1}, schema) == ["extra"]


def test_strict_field_validation_of_custom_resources(kube: client.ApiClient) -> None:
    client.ApiextensionsV1Api(kube).create_custom_resource_definition(WIDGETS)
    custom = client.CustomObjectsApi(kube)
    with pytest.raises(client.ApiException) as err:
        custom.create_namespaced_custom_object(
            "example.dev", "v1", "default", "widgets", widget("w1", size=1, colour="red"), field_validation="Strict"
        )
    assert err.value.status == 400 and 'unknown field \\"spec.colour\\"' in err.value.body
    custom.create_namespaced_custom_object(
        "example.dev", "v1", "default", "widgets", widget("w1", size=1, colour="red"), field_validation="Warn"
    )
    custom.create_namespaced_custom_object(
        "example.dev", "v1", "default", "widgets", widget("w2", size=2), field_validation="Strict"
    )
    with pytest.raises(client.ApiException) as err:
        custom.patch_namespaced_custom_object(
            "example.dev", "v1", "default", "widgets", "w2", {"spec": {"weight": 3}}, field_validation="Strict"
        )
    assert err.value.status == 400


@needs_kubectl
def test_kubectl_apply_reports_unknown_fields(cluster: FakeCluster, kubeconfig: Path, tmp_path: Path) -> None:
    client.ApiextensionsV1Api(cluster.api_client()).create_custom_resource_definition(WIDGETS)
    manifest = tmp_path / "widget.yaml"
    manifest.write_text(
        yaml.safe_dump({**widget("w1", size=1, colour="red"), "metadata": {"name": "w1", "namespace": "default"}})
    )
    done = kubectl(kubeconfig, "apply", "-f", str(manifest), check=False)
    assert done.returncode != 0 and 'unknown field "spec.colour"' in done.stderr
    manifest.write_text(manifest.read_text().replace("colour: red", "parts: [{name: a}]"))
    assert "widget.example.dev/w1 created" in kubectl(kubeconfig, "apply", "-f", str(manifest)).stdout
