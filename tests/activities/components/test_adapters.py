"""The components loop's adapters against the sim over HTTP: Prometheus, PD, the external
recommender, and TidbCluster / TidbClusterAutoScaler objects through the official client."""

from __future__ import annotations

import httpx
import pytest
from kubernetes import client

from activities.components.external import RecommenderUnavailable, endpoint_url, recommended_replicas
from activities.components.kube import TidbKube
from activities.components.pd import PdClient, PdUnavailable, parse_byte_size, pod_of_address
from activities.components.prometheus import MetricsUnavailable, PrometheusClient
from activities.components.tidbcluster import LABEL_AUTO_INSTANCE, auto_cluster_body, owned_by
from sim.tidb.crds import tidb_crds
from sim.tidb.pd import byte_size
from sim.tidb.world import FakeTidb
from tests.activities.components.conftest import NS, TAC, TC, G, V, running, tc_body
from tests.polling import eventually


@pytest.fixture
def basic(world: FakeTidb, custom: client.CustomObjectsApi, control: httpx.Client) -> None:
    custom.create_namespaced_custom_object(G, V, NS, TC, tc_body("basic", tikv=3, tidb=2))
    running(control, 5)


# ---- Prometheus ------------------------------------------------------------------------------


def test_cpu_usage_and_quota_per_instance(world: FakeTidb, basic: None) -> None:
    world.load.set_demand(NS, "basic", "tikv", 4.5)
    world.load.set_pod_cpu(NS, "basic-tidb-1", 3.0)
    prom = PrometheusClient(world.prometheus_url)
    assert prom.cpu_usage(NS, "tikv", 60) == pytest.approx({f"basic-tikv-{i}": 1.5 for i in range(3)})
    assert prom.cpu_usage(NS, "tidb", 60) == pytest.approx({"basic-tidb-0": 0.0, "basic-tidb-1": 3.0})
    assert prom.cpu_quota(NS, "tikv") == {f"basic-tikv-{i}": 2.0 for i in range(3)}
    assert prom.cpu_quota(NS, "tidb") == {"basic-tidb-0": 4.0, "basic-tidb-1": 4.0}
    assert prom.cpu_usage("elsewhere", "tikv", 60) == {}  # the namespace matcher filters


def test_store_sizes(world: FakeTidb, basic: None) -> None:
    world.load.set_storage(NS, "basic", "150Gi")
    sizes = PrometheusClient(world.prometheus_url).store_sizes(NS)
    assert sizes == {f"basic-tikv-{i}": (100 * 2**30, 50 * 2**30) for i in range(3)}


@pytest.mark.parametrize("fault", [{"mode": "error", "times": 1}, {"mode": "error", "times": 1, "status": 500}])
def test_prometheus_errors_raise_metrics_unavailable(
    world: FakeTidb, basic: None, control: httpx.Client, fault: dict[str, object]
) -> None:
    control.post("/sim/v1/faults", json={"prometheus": fault})
    with pytest.raises(MetricsUnavailable, match="HTTP 5"):
        PrometheusClient(world.prometheus_url).cpu_usage(NS, "tikv", 60)


def test_unreachable_or_slow_prometheus_is_metrics_unavailable(
    world: FakeTidb, basic: None, control: httpx.Client
) -> None:
    with pytest.raises(MetricsUnavailable, match="ConnectError"):
        PrometheusClient("http://127.0.0.1:9").cpu_quota(NS, "tikv")
    control.post("/sim/v1/faults", json={"prometheus": {"mode": "delay", "seconds": 2, "times": 1}})
    with pytest.raises(MetricsUnavailable, match="Timeout"):
        PrometheusClient(world.prometheus_url, timeout_s=0.5).cpu_quota(NS, "tikv")


def test_malformed_answers_are_metrics_unavailable() -> None:
    def answer(request: httpx.Request) -> httpx.Response:
        bodies = {
            "scalar": {"status": "success", "data": {"resultType": "scalar", "result": [0, "1"]}},
            "garbage": {"status": "success", "data": {"resultType": "vector", "result": [{"metric": {}}]}},
        }
        return httpx.Response(200, json=bodies[request.url.params["query"]])

    prom = PrometheusClient("http://prom", transport=httpx.MockTransport(answer))
    for query in ("scalar", "garbage"):
        with pytest.raises(MetricsUnavailable):
            prom.query(query)
    html = PrometheusClient("http://prom", transport=httpx.MockTransport(lambda r: httpx.Response(502, text="<html>")))
    with pytest.raises(MetricsUnavailable, match="HTTP 502"):
        html.query("up")


# ---- PD --------------------------------------------------------------------------------------

STRATEGY = {
    "rules": [
        {"component": "tikv", "cpu_rule": {"max_threshold": 0.8, "min_threshold": 0.2, "resource_types": ["big"]}}
    ],
    "resources": [{"resource_type": "big", "cpu": 4000, "memory": 8 * 2**30, "storage": 0, "count": 3}],
}


def test_pd_plans_and_null(world: FakeTidb, basic: None, control: httpx.Client) -> None:
    pd = PdClient(world.pd_url(NS, "basic"))
    world.load.set_demand(NS, "basic", "tikv", 3.0)
    assert pd.autoscaling(STRATEGY) is None  # in band, no group: PD writes null
    world.load.set_demand(NS, "basic", "tikv", 5.9)
    assert pd.autoscaling(STRATEGY) == [
        {
            "component": "tikv",
            "count": 1,
            "resource_type": "big",
            "labels": {"group": "pd-auto-scaling-tikv", "resource-type": "big", "specialUse": "hotRegion"},
        }
    ]
    control.post("/sim/v1/faults", json={"pd": {"mode": "empty", "times": 1}})
    assert pd.autoscaling(STRATEGY) is None  # metrics failure inside PD: also null
    control.post("/sim/v1/faults", json={"pd": {"mode": "error", "times": 1}})
    with pytest.raises(PdUnavailable, match="HTTP 503"):
        pd.autoscaling(STRATEGY)
    with pytest.raises(PdUnavailable, match="HTTP 404"):
        PdClient(world.pd_url(NS, "missing")).autoscaling(STRATEGY)


def test_pd_stores(world: FakeTidb, basic: None) -> None:
    world.load.set_storage(NS, "basic", "30Gi")
    stores = PdClient(world.pd_url(NS, "basic")).stores()
    assert sorted(pod_of_address(s["address"]) for s in stores) == [f"basic-tikv-{i}" for i in range(3)]
    assert {s["capacity"] for s in stores} == {100 * 2**30}
    assert {s["available"] for s in stores} == {90 * 2**30}


@pytest.mark.parametrize("value", [0, 1536, 59.99 * 2**30, 100 * 2**30, 3 * 2**40])
def test_byte_sizes_round_trip_within_pd_precision(value: float) -> None:
    assert parse_byte_size(byte_size(value)) == pytest.approx(value, rel=1e-3)


def test_byte_size_forms() -> None:
    assert parse_byte_size("1.5KiB") == 1536
    assert parse_byte_size("2gb") == 2 * 2**30  # go-units reads every unit as binary
    assert parse_byte_size(42) == 42
    with pytest.raises(ValueError):
        parse_byte_size("lots")


# ---- external recommender ----------------------------------------------------------------------


def test_external_recommendation(world: FakeTidb, control: httpx.Client) -> None:
    port = int(world.external_url.rsplit(":", 1)[1].split("/")[0])
    url = endpoint_url({"host": "127.0.0.1", "port": port, "path": "/external"})
    assert url == world.external_url
    with pytest.raises(RecommenderUnavailable, match="HTTP 404"):
        recommended_replicas(url, NS, "basic", "tikv")
    world.load.set_external(NS, "basic", "tikv", 6)
    assert recommended_replicas(url, NS, "basic", "tikv") == 6
    # tidb-operator's scheme rule: https exactly when a tlsSecret is named
    assert endpoint_url({"host": "h", "port": 1, "path": "/r", "tlsSecret": {"name": "s", "namespace": NS}}) == (
        "https://h:1/r"
    )


def test_external_answer_about_another_cluster_is_refused() -> None:
    wrong = httpx.MockTransport(
        lambda r: httpx.Response(200, json={"name": "other", "namespace": NS, "type": "tikv", "recommendedReplicas": 9})
    )
    with pytest.raises(RecommenderUnavailable, match="expected"):
        recommended_replicas("http://rec/x", NS, "basic", "tikv", transport=wrong)


# ---- TidbCluster / TidbClusterAutoScaler objects --------------------------------------------------


def tac_body(name: str = "tas") -> dict[str, object]:
    return {
        "apiVersion": f"{G}/{V}",
        "kind": "TidbClusterAutoScaler",
        "metadata": {"name": name},
        "spec": {
            "cluster": {"name": "basic"},
            "tikv": {"rules": {"cpu": {"max_threshold": 0.8, "min_threshold": 0.2}}},
        },
    }


@pytest.mark.parametrize("subresource", [False, True])
def test_status_is_written_with_or_without_a_status_subresource(
    sim: object, api: client.ApiClient, custom: client.CustomObjectsApi, subresource: bool
) -> None:
    ext = client.ApiextensionsV1Api(api)
    for crd in tidb_crds(status_subresource=subresource):
        ext.create_custom_resource_definition(crd)
    client.CoreV1Api(api).create_namespace({"metadata": {"name": NS}})
    custom.create_namespaced_custom_object(G, V, NS, TAC, tac_body())
    kube = TidbKube(api)
    status = {"tikv": {"auto-bcd": {"lastAutoScalingTimestamp": "2026-01-01T00:00:00Z"}}, "problems": []}
    assert kube.replace_status(TAC, NS, "tas", status)
    assert custom.get_namespaced_custom_object(G, V, NS, TAC, "tas")["status"] == status
    assert kube.replace_status(TAC, NS, "tas", {"tikv": {}})  # removed groups go away
    assert custom.get_namespaced_custom_object(G, V, NS, TAC, "tas")["status"] == {"tikv": {}}
    assert not kube.replace_status(TAC, NS, "gone", status)
    assert [o["metadata"]["name"] for o in kube.list_autoscalers()] == ["tas"]
    assert [o["metadata"]["name"] for o in kube.list_autoscalers(NS)] == ["tas"]


def test_list_autoscalers_without_crd_is_empty(sim: object, api: client.ApiClient) -> None:
    assert TidbKube(api).list_autoscalers() == []


def test_create_auto_cluster_is_idempotent_and_graceful_delete(
    world: FakeTidb, basic: None, api: client.ApiClient, custom: client.CustomObjectsApi, control: httpx.Client
) -> None:
    kube = TidbKube(api)
    base = kube.get(TC, NS, "basic")
    assert base is not None
    body = auto_cluster_body(
        base,
        name="auto-xyz",
        autoscaler="tas",
        component="tikv",
        group="auto-xyz",
        replicas=2,
        cpu="4",
        memory="8Gi",
        labels={"group": "g", "specialUse": "hotRegion"},
    )
    made, created = kube.create_cluster(NS, body)
    again, created_again = kube.create_cluster(NS, body)  # a retried activity
    assert created and not created_again
    assert again["metadata"]["uid"] == made["metadata"]["uid"]
    assert owned_by(again, "tas", "tikv") and not owned_by(again, "other", "tikv")
    assert len(kube.list_clusters(NS, f"{LABEL_AUTO_INSTANCE}=tas")) == 1
    running(control, 5, "tikv")
    pods = kube.pods(NS, "app.kubernetes.io/instance=auto-xyz")
    assert sorted(p["metadata"]["name"] for p in pods) == ["auto-xyz-tikv-0", "auto-xyz-tikv-1"]
    assert pods[0]["spec"]["containers"][0]["resources"]["requests"] == {"cpu": "4", "memory": "8Gi"}
    assert kube.set_replicas(NS, "auto-xyz", "tikv", 0) is not None
    eventually(lambda: kube.pods(NS, "app.kubernetes.io/instance=auto-xyz") == [], message="drained")
    assert kube.delete_cluster(NS, "auto-xyz", uid=made["metadata"]["uid"])
    assert not kube.delete_cluster(NS, "auto-xyz")  # already gone
    assert kube.set_replicas(NS, "auto-xyz", "tikv", 1) is None


def test_delete_with_a_stale_uid_leaves_the_new_incarnation(world: FakeTidb, api: client.ApiClient) -> None:
    kube = TidbKube(api)
    first, _ = kube.create_cluster(NS, tc_body("auto-abc"))
    assert kube.delete_cluster(NS, "auto-abc")
    second, _ = kube.create_cluster(NS, tc_body("auto-abc"))
    assert not kube.delete_cluster(NS, "auto-abc", uid=first["metadata"]["uid"])
    assert kube.get(TC, NS, "auto-abc")["metadata"]["uid"] == second["metadata"]["uid"]


def test_events_on_the_autoscaler(world: FakeTidb, api: client.ApiClient, custom: client.CustomObjectsApi) -> None:
    tac = custom.create_namespaced_custom_object(G, V, NS, TAC, tac_body())
    TidbKube(api).autoscaler_event(NS, "tas", tac["metadata"]["uid"], "ScaledOut", "tikv 3 -> 4")
    events = client.CoreV1Api(api).list_namespaced_event(NS).items
    assert [(e.reason, e.message, e.involved_object.kind, e.involved_object.name) for e in events] == [
        ("ScaledOut", "tikv 3 -> 4", "TidbClusterAutoScaler", "tas")
    ]
    assert events[0].source.component == "growth"


def test_an_event_written_again_with_its_key_is_one_event(
    world: FakeTidb, api: client.ApiClient, custom: client.CustomObjectsApi
) -> None:
    """A retried write, or one a replaying worker makes again, names the Event from the workflow's
    key: the API server refuses the second create (AlreadyExists) and the write counts as done."""
    tac = custom.create_namespaced_custom_object(G, V, NS, TAC, tac_body())
    kube = TidbKube(api)
    for _ in range(2):
        kube.autoscaler_event(NS, "tas", tac["metadata"]["uid"], "ScaledOut", "tikv 3 -> 4", key="0a1b2c3d4e5f6789")
    kube.autoscaler_event(NS, "tas", tac["metadata"]["uid"], "ScaledOut", "tikv 4 -> 5", key="0a1b2c3d4e5f678a")
    events = client.CoreV1Api(api).list_namespaced_event(NS).items
    assert sorted((e.metadata.name, e.message) for e in events) == [
        ("tas.0a1b2c3d4e5f6789", "tikv 3 -> 4"),
        ("tas.0a1b2c3d4e5f678a", "tikv 4 -> 5"),
    ]
    # Without a key (the API's generateName), each write is an Event of its own.
    kube.autoscaler_event(NS, "tas", tac["metadata"]["uid"], "ScaledIn", "tikv 5 -> 4")
    kube.autoscaler_event(NS, "tas", tac["metadata"]["uid"], "ScaledIn", "tikv 5 -> 4")
    assert len(client.CoreV1Api(api).list_namespaced_event(NS).items) == 4
