"""The components loop's activities, run as activities against the sim over HTTP with the real
clients: objects, the graceful group lifecycle, metrics sources and their failures, capacity."""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from kubernetes import client
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from activities.components import build_activities
from activities.components.activities import ComponentActivities
from activities.components.settings import ComponentsSettings
from activities.kube.client import ClusterClients
from activities.settings import Settings
from scaling.components import contracts
from sim.kube.tls import ServingCerts, generate
from sim.tidb.world import FakeTidb
from starters.kube import apply_crds, apply_node_group, node_group
from tests.activities.components.conftest import NS, TAC, TC, G, V, running, tc_body
from tests.polling import eventually
from tests.sim.conftest import node_body, ready_nodes

ENV = ActivityEnvironment()


@pytest.fixture
def acts(world: FakeTidb, api: client.ApiClient) -> Iterator[ComponentActivities]:
    settings = ComponentsSettings(prometheus_url=world.prometheus_url, pd_url=world.pd_url_template, http_timeout_s=2)
    made = ComponentActivities(ClusterClients(shared=api), settings)
    yield made
    made.close()


@pytest.fixture
def basic(world: FakeTidb, custom: client.CustomObjectsApi, control: httpx.Client) -> None:
    custom.create_namespaced_custom_object(G, V, NS, TC, tc_body("basic", tikv=3, tidb=2))
    running(control, 5)


def run(fn, arg):  # type: ignore[no-untyped-def]
    return ENV.run(fn, arg)


def unavailable(fn, arg, kind: str) -> ApplicationError:  # type: ignore[no-untyped-def]
    with pytest.raises(ApplicationError) as info:
        run(fn, arg)
    assert info.value.type == kind and info.value.non_retryable
    return info.value


def create_input(**over: object) -> contracts.CreateAutoClusterInput:
    fields: dict[str, object] = dict(
        namespace=NS,
        base_cluster="basic",
        name="auto-bcdf",
        autoscaler="tas",
        component="tikv",
        group="auto-bcdf",
        replicas=1,
        cpu="4",
        memory="8Gi",
        labels={"group": "auto-bcdf", "specialUse": "hotRegion"},
    )
    fields.update(over)
    return contracts.CreateAutoClusterInput(**fields)  # type: ignore[arg-type]


def test_build_activities_registers_every_contract_name() -> None:
    names = {a.__temporal_activity_definition.name for a in build_activities(Settings())}
    assert names == contracts.ACTIVITY_NAMES


# ---- TidbClusterAutoScaler ---------------------------------------------------------------------


def test_autoscaler_read_status_and_events(
    acts: ComponentActivities, custom: client.CustomObjectsApi, api: client.ApiClient
) -> None:
    body = {
        "apiVersion": f"{G}/{V}",
        "kind": "TidbClusterAutoScaler",
        "metadata": {"name": "tas"},
        "spec": {"cluster": {"name": "basic"}, "tikv": {"rules": {"cpu": {"max_threshold": 0.8}}}},
    }
    made = custom.create_namespaced_custom_object(G, V, NS, TAC, body)
    refs = run(acts.list_autoscalers, contracts.ListAutoscalersInput())
    assert refs == [contracts.AutoscalerRef(namespace=NS, name="tas")]
    assert run(acts.list_autoscalers, contracts.ListAutoscalersInput(namespace="default")) == []
    obj = run(acts.get_autoscaler, refs[0])
    assert obj.found and obj.uid == made["metadata"]["uid"] and obj.generation == 1
    assert obj.spec == body["spec"] and not obj.deleting
    assert not run(acts.get_autoscaler, contracts.AutoscalerRef(namespace=NS, name="nope")).found
    status = {
        "tikv": {"auto-bcdf": {"currentReplicas": 1, "lastAutoScalingTimestamp": "2026-11-22T19:00:00Z"}},
        "conditions": [{"type": "SpecValid", "status": "True"}],
    }
    assert run(acts.write_autoscaler_status, contracts.WriteStatusInput(namespace=NS, name="tas", status=status)).found
    assert custom.get_namespaced_custom_object(G, V, NS, TAC, "tas")["status"] == status
    assert not run(acts.write_autoscaler_status, contracts.WriteStatusInput(namespace=NS, name="nope", status={})).found
    run(
        acts.emit_autoscaler_event,
        contracts.AutoscalerEvent(
            namespace=NS,
            name="tas",
            uid=obj.uid,
            reason="InvalidSpec",
            message="tikv.rules.cpu: min must be < max",
            type="Warning",
        ),
    )
    events = client.CoreV1Api(api).list_namespaced_event(NS).items
    assert [(e.reason, e.type, e.involved_object.kind, e.involved_object.uid) for e in events] == [
        ("InvalidSpec", "Warning", "TidbClusterAutoScaler", obj.uid)
    ]


# ---- TidbCluster and groups ----------------------------------------------------------------------


def test_cluster_view(acts: ComponentActivities, basic: None, custom: client.CustomObjectsApi) -> None:
    def ready() -> contracts.TidbClusterView | None:
        view = run(acts.get_tidb_cluster, contracts.GetClusterInput(namespace=NS, name="basic"))
        return view if view.components["tikv"].ready == 3 and view.components["tidb"].ready == 2 else None

    view = eventually(ready, message="status caught up")
    assert view.found and view.uid
    assert view.components["tikv"] == contracts.ComponentView(
        replicas=3, pods=3, ready=3, cpu="2", memory="4Gi", storage="100Gi"
    )
    assert set(view.components) == {"tikv", "tidb"}
    assert not run(acts.get_tidb_cluster, contracts.GetClusterInput(namespace=NS, name="nope")).found


def test_create_group_twice_makes_one_cluster(
    acts: ComponentActivities, basic: None, custom: client.CustomObjectsApi, control: httpx.Client
) -> None:
    first = run(acts.create_auto_cluster, create_input())
    # The worker died after the create, before the workflow recorded it: the retry finds it.
    again = run(acts.create_auto_cluster, create_input(replicas=5))
    assert first.created and not again.created
    assert again.uid == first.uid and again.replicas == 1
    found = custom.list_namespaced_custom_object(G, V, NS, TC)["items"]
    assert sorted(o["metadata"]["name"] for o in found) == ["auto-bcdf", "basic"]
    running(control, 4, "tikv")
    groups = run(
        acts.list_auto_clusters, contracts.ListAutoClustersInput(namespace=NS, autoscaler="tas", component="tikv")
    )
    assert [(g.name, g.group, g.base_tc, g.labels) for g in groups.items] == [
        ("auto-bcdf", "auto-bcdf", "basic", {"group": "auto-bcdf", "specialUse": "hotRegion"})
    ]
    assert groups.items[0].component.replicas == 1 and groups.items[0].component.cpu == "4"
    assert groups.items[0].component.storage == "100Gi"  # the base cluster's
    assert (
        run(
            acts.list_auto_clusters, contracts.ListAutoClustersInput(namespace=NS, autoscaler="tas", component="tidb")
        ).items
        == []
    )


def test_create_refuses_a_foreign_name_and_a_missing_base(
    acts: ComponentActivities, basic: None, custom: client.CustomObjectsApi
) -> None:
    custom.create_namespaced_custom_object(G, V, NS, TC, tc_body("auto-bcdf"))
    unavailable(acts.create_auto_cluster, create_input(), "NameTaken")
    unavailable(acts.create_auto_cluster, create_input(name="auto-zzzz", base_cluster="nope"), "BaseClusterMissing")


def test_graceful_scale_in_then_delete(acts: ComponentActivities, basic: None, control: httpx.Client) -> None:
    made = run(acts.create_auto_cluster, create_input(replicas=2))
    running(control, 5, "tikv")
    patched = run(
        acts.patch_replicas,
        contracts.PatchReplicasInput(namespace=NS, cluster="auto-bcdf", component="tikv", replicas=0),
    )
    assert patched == contracts.PatchReplicasResult(found=True, replicas=0)
    listing = contracts.ListAutoClustersInput(namespace=NS, autoscaler="tas", component="tikv")
    eventually(lambda: run(acts.list_auto_clusters, listing).items[0].component.pods == 0, message="drained")
    gone = contracts.DeleteAutoClusterInput(namespace=NS, name="auto-bcdf", uid=made.uid)
    assert run(acts.delete_auto_cluster, gone).deleted
    assert not run(acts.delete_auto_cluster, gone).deleted  # a retry: already done
    assert run(acts.list_auto_clusters, listing).items == []
    missing = contracts.PatchReplicasInput(namespace=NS, cluster="auto-bcdf", component="tikv", replicas=1)
    assert run(acts.patch_replicas, missing) == contracts.PatchReplicasResult(found=False)


def test_homogeneous_patch_of_the_base(acts: ComponentActivities, basic: None, control: httpx.Client) -> None:
    run(acts.patch_replicas, contracts.PatchReplicasInput(namespace=NS, cluster="basic", component="tidb", replicas=3))
    running(control, 3, "tidb")


# ---- metrics ---------------------------------------------------------------------------------------


def metrics_input(**over: object) -> contracts.MetricsInput:
    fields: dict[str, object] = dict(
        namespace=NS,
        base_cluster="basic",
        component="tikv",
        clusters={"basic": "", "auto-bcdf": "auto-bcdf"},
        hot_threshold=0.8,
        storage=True,
    )
    fields.update(over)
    return contracts.MetricsInput(**fields)  # type: ignore[arg-type]


def test_query_metrics_aggregates_per_group(
    acts: ComponentActivities, world: FakeTidb, basic: None, control: httpx.Client
) -> None:
    run(acts.create_auto_cluster, create_input(replicas=1))
    running(control, 4, "tikv")
    world.load.set_demand(NS, "basic", "tikv", 2.0)
    world.load.set_pod_cpu(NS, "basic-tikv-2", 1.9)  # hot: 0.95 of 2 cores
    world.load.set_storage(NS, "basic", "100Gi")
    metrics = run(acts.query_metrics, metrics_input())
    assert metrics.component == "tikv" and metrics.missing == 0
    base, group = metrics.groups  # "" sorts first
    assert (base.group, base.instances, group.group, group.instances) == ("", 3, "auto-bcdf", 1)
    assert base.cpu_quota == pytest.approx(6.0) and group.cpu_quota == pytest.approx(4.0)
    # The pinned pod aside, 2 cores are shared over quotas 2+2+4: 0.5, 0.5 and the group's 1.0.
    assert base.cpu_used == pytest.approx(2.9) and group.cpu_used == pytest.approx(1.0)
    assert (base.hot_instances, base.hot_cpu_used, base.max_ratio) == (1, pytest.approx(1.9), pytest.approx(0.95))
    assert base.storage_capacity == 3 * 100 * 2**30 and group.storage_capacity == 100 * 2**30
    assert base.storage_used + group.storage_used == pytest.approx(100 * 2**30)
    tidb = run(acts.query_metrics, metrics_input(component="tidb", clusters={"basic": ""}, storage=False))
    assert [(g.group, g.instances, g.cpu_quota) for g in tidb.groups] == [("", 2, 8.0)]


def test_metrics_failures_are_unavailable_never_empty(
    acts: ComponentActivities, world: FakeTidb, basic: None, control: httpx.Client
) -> None:
    control.post("/sim/v1/faults", json={"prometheus": {"mode": "error", "times": 1}})
    err = unavailable(acts.query_metrics, metrics_input(), contracts.METRICS_UNAVAILABLE)
    assert "HTTP 503" in err.message
    control.post("/sim/v1/faults", json={"prometheus": {"mode": "empty", "times": 4}})
    unavailable(acts.query_metrics, metrics_input(), contracts.METRICS_UNAVAILABLE)
    control.delete("/sim/v1/faults")
    unavailable(acts.query_metrics, metrics_input(clusters={"other": ""}), contracts.METRICS_UNAVAILABLE)
    assert run(acts.query_metrics, metrics_input()).groups  # recovered
    no_prom = ComponentActivities(acts.clusters, ComponentsSettings(prometheus_url=None))
    unavailable(no_prom.query_metrics, metrics_input(), contracts.METRICS_UNAVAILABLE)


# ---- PD and external ----------------------------------------------------------------------------------

PD_STRATEGY = contracts.PdStrategy(
    rules=[
        contracts.PdComponentRule(
            component="tikv", cpu_rule=contracts.PdRule(max_threshold=0.8, min_threshold=0.2, resource_types=["big"])
        )
    ],
    resources=[contracts.PdResource(resource_type="big", cpu=4000, memory=8 * 2**30, count=2)],
)


def test_ask_pd(acts: ComponentActivities, world: FakeTidb, basic: None, control: httpx.Client) -> None:
    ask = contracts.AskPdInput(namespace=NS, cluster="basic", strategy=PD_STRATEGY)
    world.load.set_demand(NS, "basic", "tikv", 3.0)
    assert run(acts.ask_pd_autoscaling, ask) == contracts.PdAnswer(answered=False)  # null: undecidable
    world.load.set_demand(NS, "basic", "tikv", 5.9)
    answer = run(acts.ask_pd_autoscaling, ask)
    assert answer.answered and [(p.component, p.count, p.resource_type) for p in answer.plans] == [("tikv", 1, "big")]
    assert answer.plans[0].labels["group"] == "pd-auto-scaling-tikv"
    control.post("/sim/v1/faults", json={"pd": {"mode": "error", "times": 1}})
    unavailable(acts.ask_pd_autoscaling, ask, contracts.PD_UNAVAILABLE)
    unavailable(acts.ask_pd_autoscaling, ask.model_copy(update={"cluster": "nope"}), contracts.PD_UNAVAILABLE)


def test_ask_external(acts: ComponentActivities, world: FakeTidb, control: httpx.Client) -> None:
    port = int(world.server.url.rsplit(":", 1)[1])
    ask = contracts.AskExternalInput(
        namespace=NS,
        cluster="basic",
        component="tidb",
        endpoint=contracts.ExternalEndpoint(host="127.0.0.1", port=port, path="/external"),
    )
    unavailable(acts.ask_external_endpoint, ask, contracts.RECOMMENDER_UNAVAILABLE)  # nothing scripted: 404
    world.load.set_external(NS, "basic", "tidb", 4)
    assert run(acts.ask_external_endpoint, ask) == contracts.ExternalAnswer(recommended_replicas=4)


@pytest.fixture
def https_recommender() -> Iterator[tuple[ServingCerts, int]]:
    """A recommender over HTTPS on 127.0.0.1 answering as tidb-operator expects."""
    certs = generate()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            q = {k: v[0] for k, v in parse_qs(urlsplit(self.path).query).items()}
            body = json.dumps({**q, "recommendedReplicas": 3}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - quiet
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.socket = certs.server_context().wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield certs, server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def _tls_secret(core: client.CoreV1Api, name: str, certs: ServingCerts, **drop: bool) -> None:
    data = {"ca.crt": certs.ca_pem, "tls.crt": certs.cert_pem, "tls.key": certs.key_pem}
    body = {k: base64.b64encode(v).decode() for k, v in data.items() if not drop.get(k.replace(".", "_"))}
    core.create_namespaced_secret(NS, {"metadata": {"name": name}, "type": "kubernetes.io/tls", "data": body})


def test_ask_external_over_https_with_the_tls_secret(
    acts: ComponentActivities, api: client.ApiClient, https_recommender: tuple[ServingCerts, int]
) -> None:
    certs, port = https_recommender
    core = client.CoreV1Api(api)
    _tls_secret(core, "rec-tls", certs)
    _tls_secret(core, "other-ca", generate())  # a CA that did not sign the server's certificate
    _tls_secret(core, "no-key", certs, tls_key=True)

    def ask(secret: str) -> contracts.AskExternalInput:
        endpoint = contracts.ExternalEndpoint(
            host="127.0.0.1", port=port, path="/recommend", tls_secret=contracts.SecretRef(name=secret, namespace=NS)
        )
        return contracts.AskExternalInput(namespace=NS, cluster="basic", component="tikv", endpoint=endpoint)

    assert run(acts.ask_external_endpoint, ask("rec-tls")) == contracts.ExternalAnswer(recommended_replicas=3)
    untrusted = unavailable(acts.ask_external_endpoint, ask("other-ca"), contracts.RECOMMENDER_UNAVAILABLE)
    assert "https://127.0.0.1" in str(untrusted)  # https, and the server was not trusted
    missing = unavailable(acts.ask_external_endpoint, ask("no-key"), contracts.RECOMMENDER_UNAVAILABLE)
    assert f"Secret {NS}/no-key lacks tls.key" in str(missing)
    gone = unavailable(acts.ask_external_endpoint, ask("absent"), contracts.RECOMMENDER_UNAVAILABLE)
    assert f"Secret {NS}/absent not found" in str(gone)
    key = certs.key_pem.decode().splitlines()[1]
    for err in (untrusted, missing, gone):  # the key material never leaves the activity
        assert key not in str(err) and base64.b64encode(certs.key_pem).decode()[:40] not in str(err)


# ---- capacity -------------------------------------------------------------------------------------------


def test_observe_capacity_counts_free_room_per_shape(
    acts: ComponentActivities, basic: None, api: client.ApiClient
) -> None:
    shapes = {
        "big": contracts.Shape(cpu_milli=8000, memory_bytes=16 * 2**30),
        "small": contracts.Shape(cpu_milli=1000, memory_bytes=0),
    }
    core = client.CoreV1Api(api)
    eventually(lambda: all(p.spec.node_name for p in core.list_namespaced_pod(NS).items), message="pd pod bound")
    answer = run(acts.observe_capacity, contracts.CapacityInput(shapes=shapes))
    # Three 32-core nodes hold the cluster's 3x2 + 2x4 + 1 = 15 cores: 81 cores free in all.
    assert answer.fits["small"] == 81
    assert 8 <= answer.fits["big"] <= 10  # per node, not pooled: fragments are not counted
    assert not answer.growth_manages_nodes
    core.create_node(node_body("tainted", cpu="64", taints=[{"key": "k", "effect": "NoSchedule"}]))
    core.create_node(node_body("cordoned", cpu="64"))
    core.patch_node("cordoned", {"spec": {"unschedulable": True}})
    ready_nodes(core, "tainted", "cordoned")
    assert run(acts.observe_capacity, contracts.CapacityInput(shapes=shapes)).fits["small"] == 81
    apply_crds(api)
    apply_node_group(api, node_group("general", [{"name": "kwok-cx22", "provider": "kwok", "serverType": "cx22"}]))
    assert run(acts.observe_capacity, contracts.CapacityInput(shapes=shapes)).growth_manages_nodes


def test_batched_prometheus_serves_every_namespace_from_one_query_each(
    world: FakeTidb, api: client.ApiClient, custom: client.CustomObjectsApi, control: httpx.Client, basic: None
) -> None:
    # The same TidbCluster name in a second namespace: its pods have the same instance names.
    client.CoreV1Api(api).create_namespace({"metadata": {"name": "other"}})
    custom.create_namespaced_custom_object(G, V, "other", TC, tc_body("basic", tikv=2, tidb=1))
    running(control, 8)
    world.load.set_demand(NS, "basic", "tikv", 3.0)
    world.load.set_demand("other", "basic", "tikv", 1.0)
    world.load.set_storage(NS, "basic", "100Gi")
    settings = ComponentsSettings(prometheus_url=world.prometheus_url, http_timeout_s=2, prometheus_batch_s=60)
    batched = ComponentActivities(ClusterClients(shared=api), settings)
    plain = ComponentActivities(ClusterClients(shared=api), settings.model_copy(update={"prometheus_batch_s": 0}))
    try:
        queries = lambda: control.get("/sim/v1/stats").json().get("/api/v1/query", 0)  # noqa: E731
        before = queries()
        mine = run(batched.query_metrics, metrics_input(clusters={"basic": ""}))
        theirs = run(batched.query_metrics, metrics_input(namespace="other", clusters={"basic": ""}))
        assert queries() - before == 4  # usage, quota, capacity, available: once for both namespaces
        assert [g.instances for g in mine.groups] == [3] and [g.instances for g in theirs.groups] == [2]
        # The same figures as the per-namespace queries PD would send (the load moves on in
        # between, so CPU is compared loosely; quotas and stores exactly).
        for ns, got in ((NS, mine), ("other", theirs)):
            want = run(plain.query_metrics, metrics_input(namespace=ns, clusters={"basic": ""}))
            (g,), (w,) = got.groups, want.groups
            assert (g.cpu_quota, g.storage_capacity, g.storage_used) == (
                w.cpu_quota,
                w.storage_capacity,
                w.storage_used,
            )
            assert g.cpu_used == pytest.approx(w.cpu_used, rel=0.2)
    finally:
        batched.close()
        plain.close()


def test_shared_capacity_is_read_once_for_its_max_age(
    acts: ComponentActivities, basic: None, api: client.ApiClient
) -> None:
    shapes = {"small": contracts.Shape(cpu_milli=1000, memory_bytes=0)}
    core = client.CoreV1Api(api)
    eventually(lambda: all(p.spec.node_name for p in core.list_namespaced_pod(NS).items), message="pd pod bound")
    shared = ComponentActivities(
        ClusterClients(shared=api), acts.settings.model_copy(update={"capacity_max_age_s": 60})
    )
    assert run(shared.observe_capacity, contracts.CapacityInput(shapes=shapes)).fits["small"] == 81
    core.create_node(node_body("more", cpu="16"))
    ready_nodes(core, "more")
    # Within its age the listing serves every autoscaler as it was; a reader that shares nothing sees the node.
    assert run(shared.observe_capacity, contracts.CapacityInput(shapes=shapes)).fits["small"] == 81
    assert run(acts.observe_capacity, contracts.CapacityInput(shapes=shapes)).fits["small"] == 97
    shared.close()
