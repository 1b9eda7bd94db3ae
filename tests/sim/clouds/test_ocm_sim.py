"""FakeOcm's contract: the clusters_mgmt shapes and codes growth's OCM client relies on, seen
through httpx, plus the sim's clock and fault injection. The clock is moved with `advance`, so
no test waits on wall-clock time for a state change."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from activities.answers import verified_context
from sim.clouds.ocm import API, FakeOcm, Timings

TOKEN = "sim-ocm-token"
# Long states: only advance() moves a cluster on, so a slow machine cannot race a test.
SLOW = Timings(pending_s=100, installing_s=100, uninstalling_s=100, addon_install_s=100, ingress_delay_s=0)


@pytest.fixture
def ocm() -> Iterator[FakeOcm]:
    with FakeOcm(TOKEN, timings=Timings(**vars(SLOW))) as sim:
        yield sim


@pytest.fixture
def http(ocm: FakeOcm) -> Iterator[httpx.Client]:
    with httpx.Client(
        base_url=ocm.url + API, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=10, verify=verified_context()
    ) as c:
        yield c


def cluster_body(name: str = "gf-one", external_id: str = "c1", **kw: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "name": name,
        "external_id": external_id,
        "cloud_provider": {"id": "aws"},
        "region": {"id": "us-east-1"},
        "multi_az": True,
        "nodes": {
            "compute_machine_type": {"id": "m5.2xlarge"},
            "autoscale_compute": {"min_replicas": 6, "max_replicas": 18},
        },  # fmt: skip
    }
    body.update(kw)
    return body


def assert_ocm_error(resp: httpx.Response, status: int, *words: str) -> dict[str, Any]:
    assert resp.status_code == status, resp.text
    body = resp.json()
    assert body["kind"] == "Error"
    assert body["id"] == str(status)
    assert body["code"] == f"CLUSTERS-MGMT-{status}"
    assert body["href"].endswith(f"/errors/{status}")
    for word in words:
        assert word in body["reason"], body["reason"]
    return body


def ready_cluster(ocm: FakeOcm, http: httpx.Client, **kw: Any) -> dict[str, Any]:
    created = http.post("/clusters", json=cluster_body(**kw))
    assert created.status_code == 201, created.text
    ocm.advance(200)
    got = http.get(f"/clusters/{created.json()['id']}").json()
    assert got["state"] == "ready"
    return got


def test_bearer_token_required(ocm: FakeOcm) -> None:
    with httpx.Client(base_url=ocm.url + API) as anon:
        assert_ocm_error(anon.get("/clusters"), 401, "unauthorized")
        assert_ocm_error(anon.get("/clusters", headers={"Authorization": "Bearer wrong"}), 401)
    assert ocm.stats()["clusters_created"] == 0


def test_create_then_states_on_the_clock(ocm: FakeOcm, http: httpx.Client) -> None:
    resp = http.post("/clusters", json=cluster_body())
    assert resp.status_code == 201
    c = resp.json()
    assert c["kind"] == "Cluster" and c["name"] == "gf-one" and c["external_id"] == "c1"
    assert c["href"] == f"{API}/clusters/{c['id']}"
    assert c["state"] == "pending" and c["status"]["state"] == "pending"
    assert c["cloud_provider"]["id"] == "aws" and c["region"]["id"] == "us-east-1" and c["multi_az"] is True
    ocm.advance(100)
    assert http.get(f"/clusters/{c['id']}").json()["state"] == "installing"
    ocm.advance(100)
    status = http.get(f"/clusters/{c['id']}/status").json()
    assert status["kind"] == "ClusterStatus" and status["state"] == "ready" and status["dns_ready"] is True


def test_create_validation_names_the_field(http: httpx.Client) -> None:
    assert_ocm_error(http.post("/clusters", json=cluster_body(name="")), 400, "'name'")
    assert_ocm_error(http.post("/clusters", json=cluster_body(name="Not_A_Label")), 400, "'name'")
    assert_ocm_error(http.post("/clusters", json=cluster_body(name="a-name-far-too-long")), 400, "15")
    assert_ocm_error(http.post("/clusters", json=cluster_body(region={})), 400, "'region.id'")
    assert_ocm_error(
        http.post("/clusters", json=cluster_body(cloud_provider={"id": "moon"})), 400, "'cloud_provider.id'"
    )
    odd = {"autoscale_compute": {"min_replicas": 4, "max_replicas": 18}}
    assert_ocm_error(http.post("/clusters", json=cluster_body(nodes=odd)), 400, "min_replicas", "multiple of 3")
    assert_ocm_error(http.post("/clusters", content=b"{not json"), 400, "JSON")
    assert http.get("/clusters").json()["total"] == 0


def test_cluster_name_is_unique(ocm: FakeOcm, http: httpx.Client) -> None:
    assert http.post("/clusters", json=cluster_body()).status_code == 201
    assert_ocm_error(http.post("/clusters", json=cluster_body(external_id="other")), 400, "gf-one", "already exists")
    assert ocm.stats()["clusters_created"] == 1


def test_list_with_search_by_name_and_external_id(http: httpx.Client) -> None:
    for i in range(3):
        assert http.post("/clusters", json=cluster_body(name=f"gf-{i}", external_id=f"ext-{i}")).status_code == 201
    by_name = http.get("/clusters", params={"search": "name = 'gf-1'"}).json()
    assert by_name["kind"] == "ClusterList" and by_name["total"] == 1 and by_name["items"][0]["external_id"] == "ext-1"
    by_ext = http.get("/clusters", params={"search": "external_id = 'ext-2' and name = 'gf-2'"}).json()
    assert [c["name"] for c in by_ext["items"]] == ["gf-2"]
    assert http.get("/clusters", params={"search": "external_id = 'nope'"}).json()["items"] == []
    assert http.get("/clusters", params={"search": "name like 'gf-%'"}).json()["total"] == 3
    page = http.get("/clusters", params={"page": 2, "size": 2}).json()
    assert page["page"] == 2 and page["size"] == 1 and page["total"] == 3
    assert_ocm_error(http.get("/clusters", params={"search": "password = 'x'"}), 400, "search")


def test_cluster_that_ends_in_error(ocm: FakeOcm, http: httpx.Client) -> None:
    ocm.clusters_end_in_error(1, "no quota left")
    cid = http.post("/clusters", json=cluster_body()).json()["id"]
    ok = http.post("/clusters", json=cluster_body(name="gf-two", external_id="c2")).json()["id"]
    ocm.advance(200)
    failed = http.get(f"/clusters/{cid}").json()
    assert failed["state"] == "error" and failed["status"]["provision_error_message"] == "no quota left"
    assert http.get(f"/clusters/{ok}").json()["state"] == "ready"


def test_delete_uninstalls_then_404(ocm: FakeOcm, http: httpx.Client) -> None:
    c = ready_cluster(ocm, http)
    assert http.delete(f"/clusters/{c['id']}").status_code == 204
    assert http.get(f"/clusters/{c['id']}").json()["state"] == "uninstalling"
    assert http.delete(f"/clusters/{c['id']}").status_code == 204  # a repeated delete is accepted
    assert ocm.stats()["delete_requests"] == 1
    ocm.advance(100)
    assert_ocm_error(http.get(f"/clusters/{c['id']}"), 404, c["id"])
    assert_ocm_error(http.delete(f"/clusters/{c['id']}"), 404)
    stats = ocm.stats()
    assert stats["clusters_created"] == 1 and stats["clusters_deleted"] == 1 and stats["clusters_live"] == 0
    # The name is free again once the cluster is gone.
    assert http.post("/clusters", json=cluster_body()).status_code == 201


def test_machine_pools(ocm: FakeOcm, http: httpx.Client) -> None:
    cid = http.post("/clusters", json=cluster_body()).json()["id"]
    pool = {
        "id": "kafka-standard",
        "instance_type": "r5.xlarge",
        "autoscaling": {"min_replicas": 3, "max_replicas": 18},
        "labels": {"bf2.org/kafkaInstanceProfileType": "standard"},
        "taints": [{"key": "bf2.org/kafkaInstanceProfileType", "value": "standard", "effect": "NoExecute"}],
        "availability_zones": ["us-east-1a", "us-east-1b", "us-east-1c"],
    }
    assert_ocm_error(http.post(f"/clusters/{cid}/machine_pools", json=pool), 400, "not ready")
    ocm.advance(200)
    created = http.post(f"/clusters/{cid}/machine_pools", json=pool)
    assert created.status_code == 201
    got = created.json()
    assert got["kind"] == "MachinePool" and got["autoscaling"] == {"min_replicas": 3, "max_replicas": 18}
    assert got["labels"] == pool["labels"] and got["taints"] == pool["taints"]
    assert_ocm_error(http.post(f"/clusters/{cid}/machine_pools", json=pool), 409, "already exists")
    odd = {**pool, "id": "odd", "autoscaling": {"min_replicas": 1, "max_replicas": 18}}
    assert_ocm_error(http.post(f"/clusters/{cid}/machine_pools", json=odd), 400, "autoscaling.min_replicas")
    both = {**pool, "id": "both", "replicas": 3}
    assert_ocm_error(http.post(f"/clusters/{cid}/machine_pools", json=both), 400, "'replicas'")
    bad_taint = {**pool, "id": "taint", "taints": [{"key": "k", "effect": "Sometimes"}]}
    assert_ocm_error(http.post(f"/clusters/{cid}/machine_pools", json=bad_taint), 400, "taints[0]")
    patched = http.patch(f"/clusters/{cid}/machine_pools/kafka-standard", json={"autoscaling": {"min_replicas": 3, "max_replicas": 30}})  # fmt: skip
    assert patched.status_code == 200 and patched.json()["autoscaling"]["max_replicas"] == 30
    listed = http.get(f"/clusters/{cid}/machine_pools").json()
    assert listed["kind"] == "MachinePoolList" and [p["id"] for p in listed["items"]] == ["kafka-standard"]
    assert http.delete(f"/clusters/{cid}/machine_pools/kafka-standard").status_code == 204
    assert_ocm_error(http.get(f"/clusters/{cid}/machine_pools/kafka-standard"), 404)


def test_addons_install_then_ready_or_failed(ocm: FakeOcm, http: httpx.Client) -> None:
    cid = ready_cluster(ocm, http)["id"]
    ocm.fail_addon("broken")
    body = {"addon": {"id": "managed-kafka"}, "parameters": {"items": [{"id": "p", "value": "v"}]}}
    resp = http.post(f"/clusters/{cid}/addons", json=body)
    assert resp.status_code == 201 and resp.json()["state"] == "installing"
    assert resp.json()["parameters"]["items"] == [{"id": "p", "value": "v"}]
    assert_ocm_error(http.post(f"/clusters/{cid}/addons", json=body), 409, "already installed")
    assert http.post(f"/clusters/{cid}/addons", json={"addon": {"id": "broken"}}).status_code == 201
    assert_ocm_error(http.post(f"/clusters/{cid}/addons", json={}), 400, "'addon.id'")
    assert_ocm_error(http.get(f"/clusters/{cid}/addons/unknown"), 404)
    ocm.advance(100)
    assert http.get(f"/clusters/{cid}/addons/managed-kafka").json()["state"] == "ready"
    failed = http.get(f"/clusters/{cid}/addons/broken").json()
    assert failed["state"] == "failed" and failed["state_description"]
    assert {a["id"] for a in http.get(f"/clusters/{cid}/addons").json()["items"]} == {"managed-kafka", "broken"}


def test_default_ingress_once_ready(ocm: FakeOcm, http: httpx.Client) -> None:
    cid = http.post("/clusters", json=cluster_body()).json()["id"]
    assert http.get(f"/clusters/{cid}/ingresses").json()["items"] == []
    assert_ocm_error(http.get(f"/clusters/{cid}/ingresses/default"), 404)
    ocm.advance(200)
    items = http.get(f"/clusters/{cid}/ingresses").json()["items"]
    assert len(items) == 1 and items[0]["default"] is True
    assert items[0]["dns_name"] == f"apps.gf-one.{ocm.base_domain}"


def test_identity_providers_already_exists(ocm: FakeOcm, http: httpx.Client) -> None:
    cid = ready_cluster(ocm, http)["id"]
    idp = {
        "type": "OpenIDIdentityProvider",
        "name": "Kafka_SRE",
        "mapping_method": "claim",
        "open_id": {"client_id": "cid", "client_secret": "s3cret", "issuer": "https://sso.example", "claims": {}},
    }
    created = http.post(f"/clusters/{cid}/identity_providers", json=idp)
    assert created.status_code == 201 and created.json()["name"] == "Kafka_SRE"
    assert "s3cret" not in created.text
    assert_ocm_error(http.post(f"/clusters/{cid}/identity_providers", json=idp), 400, "already exists")
    no_issuer = {**idp, "name": "other", "open_id": {"client_id": "c", "client_secret": "s"}}
    assert_ocm_error(http.post(f"/clusters/{cid}/identity_providers", json=no_issuer), 400, "'open_id.issuer'")
    listed = http.get(f"/clusters/{cid}/identity_providers").json()["items"]
    assert [i["name"] for i in listed] == ["Kafka_SRE"] and "s3cret" not in str(listed)


def test_syncsets(ocm: FakeOcm, http: httpx.Client) -> None:
    cid = ready_cluster(ocm, http)["id"]
    base = f"/clusters/{cid}/external_configuration/syncsets"
    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "kafka"}}
    assert http.post(base, json={"id": "ext-c1", "resources": [ns]}).status_code == 201
    assert_ocm_error(http.post(base, json={"id": "ext-c1", "resources": [ns]}), 409, "already exists")
    assert_ocm_error(http.post(base, json={"id": "bad", "resources": [{"kind": "X"}]}), 400, "resources[0]")
    patched = http.patch(f"{base}/ext-c1", json={"resources": [ns, {**ns, "metadata": {"name": "b"}}]})
    assert patched.status_code == 200 and len(patched.json()["resources"]) == 2
    assert len(http.get(f"{base}/ext-c1").json()["resources"]) == 2
    assert http.delete(f"{base}/ext-c1").status_code == 204
    assert_ocm_error(http.get(f"{base}/ext-c1"), 404)


def test_faults_rate_limit_and_5xx(ocm: FakeOcm, http: httpx.Client) -> None:
    ocm.rate_limit(1, retry_after_s=7, method="POST", path="^/clusters$")
    ocm.inject_fault(503, 1, method="POST", path="^/clusters$")
    limited = http.post("/clusters", json=cluster_body())
    assert_ocm_error(limited, 429)
    assert limited.headers["Retry-After"] == "7"
    assert_ocm_error(http.post("/clusters", json=cluster_body()), 503)
    assert http.get("/clusters").status_code == 200  # the faults matched POST only
    assert ocm.stats()["clusters_created"] == 0
    assert http.post("/clusters", json=cluster_body()).status_code == 201


def test_slow_response(ocm: FakeOcm, http: httpx.Client) -> None:
    ocm.slow_responses(0.5, 1, method="GET")
    start = time.monotonic()
    assert http.get("/clusters").status_code == 200
    assert time.monotonic() - start >= 0.5
    with pytest.raises(httpx.ReadTimeout):
        ocm.slow_responses(3.0, 1, method="GET")
        http.get("/clusters", timeout=0.5)


def test_lost_create_response_still_creates(ocm: FakeOcm, http: httpx.Client) -> None:
    ocm.lose_create_responses(1)
    with pytest.raises(httpx.TransportError):
        http.post("/clusters", json=cluster_body())
    found = http.get("/clusters", params={"search": "external_id = 'c1'"}).json()["items"]
    assert len(found) == 1 and found[0]["name"] == "gf-one"
    assert ocm.stats()["lost_responses"] == 1


def test_create_answered_503_after_it_was_made(ocm: FakeOcm, http: httpx.Client) -> None:
    ocm.lose_create_responses(1, status=503)
    assert_ocm_error(http.post("/clusters", json=cluster_body()), 503)
    found = http.get("/clusters", params={"search": "external_id = 'c1'"}).json()["items"]
    assert len(found) == 1 and ocm.stats()["lost_responses"] == 1
    with pytest.raises(ValueError, match="5xx"):
        ocm.lose_create_responses(1, status=409)  # a 4xx says it was not made: a lie here


def test_leak_counts_duplicate_external_ids(ocm: FakeOcm, http: httpx.Client) -> None:
    http.post("/clusters", json=cluster_body(name="gf-a", external_id="same"))
    http.post("/clusters", json=cluster_body(name="gf-b", external_id="same"))
    assert ocm.stats()["clusters_leaked"] == 1
    assert ocm.stats()["live_external_ids"] == ["same"]


def test_control_api_over_http(ocm: FakeOcm, http: httpx.Client) -> None:
    with httpx.Client(base_url=ocm.url + "/sim/v1") as ctl:
        assert ctl.post("/faults", json={"status": 500, "count": 1, "path": "^/clusters"}).status_code == 200
        assert_ocm_error(http.get("/clusters"), 500)
        assert ctl.post("/clusters_end_in_error", json={"count": 1, "message": "boom"}).status_code == 200
        cid = http.post("/clusters", json=cluster_body()).json()["id"]
        assert ctl.post("/advance", json={"seconds": 200}).status_code == 200
        assert http.get(f"/clusters/{cid}").json()["state"] == "error"
        assert ctl.post("/timings", json={"pending_s": 0}).status_code == 200
        assert ctl.post("/timings", json={"nope": 1}).status_code == 400
        stats = ctl.get("/stats").json()
        assert stats["clusters_created"] == 1 and stats["requests"] >= 3
        assert [c["id"] for c in ctl.get("/clusters").json()["clusters"]] == [cid]
        assert ctl.get("/nope").status_code == 404
