"""The fake Prometheus answers PD's autoscaling queries over the HTTP API with the scripted load.

Pinned: response shapes of /api/v1/query and /api/v1/query_range (vector, matrix, scalar),
bad_data errors for unsupported queries, load shared across a family's instances by quota,
pinned hot pods, storage gauges, and injected failures."""

from __future__ import annotations

import httpx
import pytest
from kubernetes import client

from sim.tidb.world import FakeTidb
from tests.sim.tidb.conftest import NS, running, tc_body

G, V, TC = "pingcap.com", "v1alpha1", "tidbclusters"
TIKV_CPU = "sum(increase(tikv_thread_cpu_seconds_total[60s])) by (instance, kubernetes_namespace)"
TIDB_CPU = 'sum(increase(process_cpu_seconds_total{component="tidb"}[60s])) by (instance, kubernetes_namespace)'


def vector(http: httpx.Client, query: str, **params: str) -> dict[str, float]:
    resp = http.get("/api/v1/query", params={"query": query, **params})
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert body["status"] == "success" and body["data"]["resultType"] == "vector"
    return {s["metric"].get("instance", ""): float(s["value"][1]) for s in body["data"]["result"]}


@pytest.fixture
def basic(world: FakeTidb, custom: client.CustomObjectsApi, http: httpx.Client) -> None:
    custom.create_namespaced_custom_object(G, V, NS, TC, tc_body("basic", tikv=3, tidb=2, tikv_cpu="2", tidb_cpu="4"))
    running(http, 5)


def test_pd_cpu_queries_answer_per_instance_usage_over_the_window(
    world: FakeTidb, basic: None, http: httpx.Client
) -> None:
    world.load.set_demand(NS, "basic", "tikv", 3.0)  # 3 cores over 3 tikv of 2 cores: 1 each
    world.load.set_demand(NS, "basic", "tidb", 2.0)
    assert vector(http, TIKV_CPU) == {"basic-tikv-0": 60.0, "basic-tikv-1": 60.0, "basic-tikv-2": 60.0}
    assert vector(http, TIDB_CPU) == {"basic-tidb-0": 60.0, "basic-tidb-1": 60.0}
    resp = http.get("/api/v1/query", params={"query": TIKV_CPU, "time": "1700000000"})
    sample = resp.json()["data"]["result"][0]
    assert sample["metric"] == {"instance": "basic-tikv-0", "kubernetes_namespace": NS}
    assert sample["value"] == [1700000000.0, "60"]


def test_quota_series_are_the_cpu_limits(world: FakeTidb, basic: None, http: httpx.Client) -> None:
    assert vector(http, "tikv_server_cpu_cores_quota") == {f"basic-tikv-{i}": 2.0 for i in range(3)}
    assert vector(http, "tidb_server_maxprocs") == {"basic-tidb-0": 4.0, "basic-tidb-1": 4.0}


def test_demand_is_shared_so_more_instances_lower_usage(
    world: FakeTidb, basic: None, http: httpx.Client, custom: client.CustomObjectsApi
) -> None:
    world.load.set_demand(NS, "basic", "tikv", 5.4)
    before = vector(http, "sum(rate(tikv_thread_cpu_seconds_total[1m])) by (instance)")
    assert before == pytest.approx({f"basic-tikv-{i}": 1.8 for i in range(3)})
    custom.patch_namespaced_custom_object(G, V, NS, TC, "basic", {"spec": {"tikv": {"replicas": 6}}})
    running(http, 6, "tikv")
    after = vector(http, "sum(rate(tikv_thread_cpu_seconds_total[1m])) by (instance)")
    assert after == pytest.approx({f"basic-tikv-{i}": 0.9 for i in range(6)})


def test_usage_never_exceeds_quota(world: FakeTidb, basic: None, http: httpx.Client) -> None:
    world.load.set_demand(NS, "basic", "tikv", 100.0)
    assert vector(http, "sum(rate(tikv_thread_cpu_seconds_total[1m])) by (instance)") == {
        f"basic-tikv-{i}": 2.0 for i in range(3)
    }


def test_heterogeneous_cluster_shares_its_base_family_load(
    world: FakeTidb, basic: None, http: httpx.Client, custom: client.CustomObjectsApi
) -> None:
    custom.create_namespaced_custom_object(
        G, V, NS, TC, tc_body("auto-abc", tikv=1, tidb=0, pd=None, tikv_cpu="4", base="basic")
    )
    running(http, 4, "tikv")
    world.load.set_demand(NS, "basic", "tikv", 5.0)  # quotas 2+2+2+4 = 10: half of each
    usage = vector(http, "sum(rate(tikv_thread_cpu_seconds_total[1m])) by (instance)")
    assert usage == pytest.approx(
        {"basic-tikv-0": 1.0, "basic-tikv-1": 1.0, "basic-tikv-2": 1.0, "auto-abc-tikv-0": 2.0}
    )


def test_pinned_hot_pod_keeps_its_usage_and_the_rest_share(world: FakeTidb, basic: None, http: httpx.Client) -> None:
    resp = http.post("/sim/v1/load", json={"demand": {f"{NS}/basic/tikv": 1.0}, "pods": {f"{NS}/basic-tikv-1": 1.9}})
    assert resp.status_code == 200 and resp.json()["pods"] == {f"{NS}/basic-tikv-1": 1.9}
    usage = vector(http, 'sum(rate(tikv_thread_cpu_seconds_total{kubernetes_namespace="tidb"}[1m])) by (instance)')
    assert usage == pytest.approx({"basic-tikv-0": 0.5, "basic-tikv-1": 1.9, "basic-tikv-2": 0.5})
    http.post("/sim/v1/load", json={"pods": {f"{NS}/basic-tikv-1": None}})
    usage = vector(http, "sum(rate(tikv_thread_cpu_seconds_total[1m])) by (instance)")
    assert usage == pytest.approx({f"basic-tikv-{i}": 1 / 3 for i in range(3)})


def test_store_size_gauges_follow_scripted_storage(world: FakeTidb, basic: None, http: httpx.Client) -> None:
    http.post("/sim/v1/load", json={"storage": {f"{NS}/basic": "240Gi"}})
    gib = 2**30
    assert vector(http, 'tikv_store_size_bytes{type="capacity"}') == {f"basic-tikv-{i}": 100.0 * gib for i in range(3)}
    assert vector(http, 'tikv_store_size_bytes{type="used"}') == {f"basic-tikv-{i}": 80.0 * gib for i in range(3)}
    assert vector(http, 'sum(tikv_store_size_bytes{type="available"})') == {"": 60.0 * gib}


def test_counter_is_cumulative_and_matchers_filter(world: FakeTidb, basic: None, http: httpx.Client) -> None:
    world.load.set_demand(NS, "basic", "tidb", 8.0)
    first = vector(http, 'process_cpu_seconds_total{component="tidb",instance=~"basic-tidb-.*"}')
    assert set(first) == {"basic-tidb-0", "basic-tidb-1"}
    assert vector(http, 'process_cpu_seconds_total{component="tidb",instance!~"basic-tidb-0"}').keys() == {
        "basic-tidb-1"
    }
    second = vector(http, 'process_cpu_seconds_total{component="tidb"}')
    assert all(second[k] >= first[k] for k in first)
    assert vector(http, 'count(process_cpu_seconds_total{component!="tidb"})') == {"": 3.0}


def test_query_range_answers_a_matrix_and_post_forms_work(world: FakeTidb, basic: None, http: httpx.Client) -> None:
    world.load.set_demand(NS, "basic", "tikv", 3.0)
    resp = http.get("/api/v1/query_range", params={"query": TIKV_CPU, "start": "1000", "end": "1120", "step": "60"})
    data = resp.json()["data"]
    assert data["resultType"] == "matrix" and len(data["result"]) == 3
    assert data["result"][0]["values"] == [[1000.0, "60"], [1060.0, "60"], [1120.0, "60"]]
    posted = http.post("/api/v1/query", data={"query": "sum(tikv_server_cpu_cores_quota)"})
    assert posted.json()["data"]["result"][0]["value"][1] == "6"
    scalar = http.get("/api/v1/query", params={"query": "1.5"}).json()["data"]
    assert scalar["resultType"] == "scalar" and scalar["result"][1] == "1.5"


@pytest.mark.parametrize(
    "query",
    [
        "",
        "sum(",
        "tikv_server_cpu_cores_quota / 2",
        "histogram_quantile(0.9, x)",
        'up{job=~"("}',
        "tikv_thread_cpu_seconds_total[1m]",
    ],
)
def test_unsupported_or_malformed_queries_are_bad_data(world: FakeTidb, http: httpx.Client, query: str) -> None:
    resp = http.get("/api/v1/query", params={"query": query})
    assert resp.status_code == 400
    body = resp.json()
    assert body["status"] == "error" and body["errorType"] == "bad_data" and body["error"]


def test_range_parameters_are_checked(world: FakeTidb, http: httpx.Client) -> None:
    resp = http.get("/api/v1/query_range", params={"query": "up", "start": "10", "end": "5", "step": "1"})
    assert resp.status_code == 400 and resp.json()["errorType"] == "bad_data"
    resp = http.get("/api/v1/query_range", params={"query": "up", "start": "0", "end": "100000", "step": "1"})
    assert resp.status_code == 400 and "11,000" in resp.json()["error"]


def test_pending_instances_report_nothing(
    world: FakeTidb, basic: None, http: httpx.Client, custom: client.CustomObjectsApi
) -> None:
    # 40 cores of tikv do not fit on three 32-core nodes already holding the cluster.
    custom.patch_namespaced_custom_object(G, V, NS, TC, "basic", {"spec": {"tikv": {"replicas": 40}}})
    running(http, 2, "tidb")
    assert len(vector(http, "tikv_server_cpu_cores_quota")) < 40


def test_injected_failures_then_recovery(world: FakeTidb, basic: None, http: httpx.Client) -> None:
    world.load.set_demand(NS, "basic", "tikv", 3.0)
    assert http.post("/sim/v1/faults", json={"prometheus": {"mode": "error", "times": 2}}).status_code == 200
    for _ in range(2):
        resp = http.get("/api/v1/query", params={"query": TIKV_CPU})
        assert resp.status_code == 503 and resp.json()["status"] == "error"
    assert len(vector(http, TIKV_CPU)) == 3
    http.post("/sim/v1/faults", json={"prometheus": {"mode": "empty"}})
    assert vector(http, TIKV_CPU) == {} and vector(http, TIKV_CPU) == {}  # until cleared
    http.delete("/sim/v1/faults")
    assert len(vector(http, TIKV_CPU)) == 3
    # A lost answer: the connection closes with nothing sent, once; the next query answers.
    http.post("/sim/v1/faults", json={"prometheus": {"mode": "drop", "times": 1}})
    with pytest.raises(httpx.RemoteProtocolError):
        http.get("/api/v1/query", params={"query": TIKV_CPU})
    assert len(vector(http, TIKV_CPU)) == 3


def test_bad_load_documents_are_refused(world: FakeTidb, http: httpx.Client) -> None:
    assert http.post("/sim/v1/load", json={"demand": {"only-two/parts": 1}}).status_code == 400
    assert http.post("/sim/v1/load", json={"weather": {}}).status_code == 400
    assert http.post("/sim/v1/faults", json={"prometheus": {"mode": "sometimes"}}).status_code == 400
