"""Kubernetes activities and the KWOK provider against the simulated cluster, over HTTP with the
official client (no monkeypatching)."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from kubernetes import client
from temporalio.testing import ActivityEnvironment

from activities.kube.client import api_client
from activities.nodes.kube import API_READ_EVERY, KubeActivities
from activities.nodes.providers.kwok import KwokProvider
from activities.settings import KubeSettings, load_settings
from scaling.kube.models import LABEL_ARCH, LABEL_HOSTNAME, LABEL_REGION, LABEL_ZONE
from scaling.nodes.catalogue import catalogue_index
from scaling.nodes.contracts import (
    CreateNodeInput,
    DeleteNodeInput,
    GroupStatusInput,
    NodeWait,
    ObserveInput,
    PodEvent,
    PodEventsInput,
    WaitNodesReadyInput,
    WaitReadyInput,
)
from scaling.nodes.matching import node_labels_for
from scaling.nodes.models import CRD_GROUP, CRD_VERSION, LABEL_POOL, Pool
from scaling.nodes.nodegroups import flatten_pools, parse_node_group
from scaling.nodes.providers.kwok import kwok_catalogue
from scaling.nodes.scale_up.requests import request_labels
from sim.cluster import FakeCluster
from starters.kube import apply_crds, apply_node_group, deployment, node_group
from tests.polling import eventually


@pytest.fixture
def sim(tmp_path: Path) -> Iterator[FakeCluster]:
    with FakeCluster(node_ready_delay=0.3, pod_start_delay=0.05, scheduler_interval=0.05) as s:
        yield s


@pytest.fixture
def api(sim: FakeCluster, tmp_path: Path) -> client.ApiClient:
    # Built the way the worker builds it: from a kubeconfig file.
    return api_client(KubeSettings(kubeconfig=str(sim.write_kubeconfig(tmp_path / "kubeconfig"))))


def pool(name: str = "kwok-cx22", server_type: str = "cx22") -> Pool:
    return Pool(group="general", name=name, provider="kwok", server_type=server_type, priority=10)


async def test_kwok_create_is_idempotent_per_request_attempt(api: client.ApiClient) -> None:
    provider = KwokProvider(api)
    inp = CreateNodeInput(
        cluster="c1", request_id="nodes/c1/request/000001-ab", attempt=0, pool=pool(), labels={LABEL_POOL: "kwok-cx22"}
    )
    first = await provider.create_node(inp)
    again = await provider.create_node(inp)  # a retried or replayed activity
    assert first.outcome == again.outcome == "created"
    assert first.node_name == again.node_name
    nodes = client.CoreV1Api(api).list_node().items
    assert [n.metadata.name for n in nodes] == [first.node_name]
    node = nodes[0]
    assert node.metadata.annotations["kwok.x-k8s.io/node"] == "fake"
    assert node.metadata.labels["node.kubernetes.io/instance-type"] == "cx22"
    assert node.spec.provider_id == f"kwok://{first.node_name}"
    other = await provider.create_node(inp.model_copy(update={"attempt": 1}))
    assert other.node_name != first.node_name


async def test_kwok_nodes_carry_the_labels_the_planner_expects(api: client.ApiClient) -> None:
    group = parse_node_group(
        {
            "metadata": {"name": "general"},
            "spec": {
                "labels": {"team": "a"},
                "pools": [{"provider": "kwok", "serverType": "cax21", "priority": 10, "config": {"zone": "kwok-b"}}],
            },
        },
        {"kwok"},
    )
    (arm,) = flatten_pools(group)
    labels = {**group.labels, **request_labels("c1", group.name, arm, "r9")}  # as NodeRequest passes them
    created = await KwokProvider(api).create_node(
        CreateNodeInput(cluster="c1", request_id="r9", attempt=0, pool=arm, labels=labels)
    )
    labels = client.CoreV1Api(api).read_node(created.node_name).metadata.labels
    expected = node_labels_for(group, arm, catalogue_index(kwok_catalogue())[("kwok", "cax21")])
    assert {k: labels.get(k) for k in expected} == expected
    assert labels[LABEL_HOSTNAME] == created.node_name
    assert (labels[LABEL_REGION], labels[LABEL_ZONE], labels[LABEL_ARCH]) == ("kwok", "kwok-b", "arm64")


async def test_kwok_capacity_limit_reports_no_capacity(api: client.ApiClient) -> None:
    provider = KwokProvider(api, {"capacity": {"kwok-cx22": 1}})
    base = CreateNodeInput(cluster="c1", request_id="r1", attempt=0, pool=pool(), labels={LABEL_POOL: "kwok-cx22"})
    assert (await provider.create_node(base)).outcome == "created"
    full = await provider.create_node(base.model_copy(update={"request_id": "r2"}))
    assert full.outcome == "no_capacity" and "kwok-cx22" in full.message
    # The first request retried still finds its node: idempotency wins over the limit.
    assert (await provider.create_node(base)).outcome == "created"


async def test_kwok_capacity_limit_holds_when_a_burst_creates_at_once(api: client.ApiClient) -> None:
    provider = KwokProvider(api, {"capacity": {"kwok-cx22": 3}})
    base = CreateNodeInput(cluster="c1", request_id="r", attempt=0, pool=pool(), labels={LABEL_POOL: "kwok-cx22"})
    results = await asyncio.gather(
        *(provider.create_node(base.model_copy(update={"request_id": f"burst-{i}"})) for i in range(12))
    )
    assert sorted(r.outcome for r in results) == ["created"] * 3 + ["no_capacity"] * 9
    assert len(client.CoreV1Api(api).list_node(label_selector=f"{LABEL_POOL}=kwok-cx22").items) == 3


async def test_kwok_delete_is_idempotent(api: client.ApiClient) -> None:
    provider = KwokProvider(api)
    made = await provider.create_node(CreateNodeInput(cluster="c1", request_id="r1", attempt=0, pool=pool()))
    gone = DeleteNodeInput(cluster="c1", provider="kwok", node_name=made.node_name)
    await provider.delete_node(gone)
    await provider.delete_node(gone)  # 404 = done
    assert client.CoreV1Api(api).list_node().items == []


async def test_wait_node_ready_asks_the_api_server_only_every_few_polls(
    api: client.ApiClient, sim: FakeCluster
) -> None:
    """At 1,000 requests in flight a GET per poll was ~500 a second: the watch-fed cache answers
    most polls, and the API server is read every API_READ_EVERY-th (a stuck watch costs a few)."""
    sim.control_request("POST", "/sim/v1/faults", {"never_ready_nodes": ["*-stuck-*"]})
    kube = KubeActivities(api, known_providers=["kwok"])
    stuck = await KwokProvider(api).create_node(
        CreateNodeInput(cluster="c1", request_id="r2", attempt=0, pool=pool("kwok-stuck-cx22"))
    )
    env = ActivityEnvironment()
    polls: list = []
    env.on_heartbeat = lambda *a: polls.append(a)  # one heartbeat per poll
    sim.control_request("DELETE", "/sim/v1/stats")
    wait = WaitReadyInput(cluster="c1", node_name=stuck.node_name, timeout_s=3, poll_s=0.05)
    assert await env.run(kube.wait_node_ready, wait) is False
    gets = sim.control_request("GET", "/sim/v1/stats")["by_verb"].get("get", 0)
    assert len(polls) >= 2 * API_READ_EVERY  # enough polls that a GET each would show
    assert 1 <= gets <= len(polls) // API_READ_EVERY + 1


async def test_wait_node_ready_true_after_kwok_and_false_on_timeout(api: client.ApiClient, sim: FakeCluster) -> None:
    sim.control_request("POST", "/sim/v1/faults", {"never_ready_nodes": ["*-stuck-*"]})
    provider = KwokProvider(api)
    kube = KubeActivities(api, known_providers=["kwok"])
    ok = await provider.create_node(CreateNodeInput(cluster="c1", request_id="r1", attempt=0, pool=pool()))
    stuck = await provider.create_node(
        CreateNodeInput(cluster="c1", request_id="r2", attempt=0, pool=pool("kwok-stuck-cx22"))
    )
    env = ActivityEnvironment()
    heartbeats: list = []
    env.on_heartbeat = lambda *a: heartbeats.append(a)
    # Ready, and labelled before the wait returns (no label activity after it).
    labels = {"growth.autoscaling.dev/request": "r1", "team": "a"}
    ready = WaitReadyInput(cluster="c1", node_name=ok.node_name, timeout_s=60, poll_s=0.05, labels=labels)
    assert await env.run(kube.wait_node_ready, ready) is True
    assert labels.items() <= (client.CoreV1Api(api).read_node(ok.node_name).metadata.labels or {}).items()
    stuck_wait = WaitReadyInput(
        cluster="c1", node_name=stuck.node_name, timeout_s=0.5, poll_s=0.05, labels={"team": "a"}
    )
    assert await env.run(kube.wait_node_ready, stuck_wait) is False
    assert "team" not in (client.CoreV1Api(api).read_node(stuck.node_name).metadata.labels or {})
    assert heartbeats  # a dead worker is noticed through missed heartbeats
    # A node that has not registered yet (404) is waited for, not an error.
    assert (
        await env.run(
            kube.wait_node_ready, WaitReadyInput(cluster="c1", node_name="not-yet", timeout_s=0.3, poll_s=0.05)
        )
        is False
    )


async def test_wait_node_ready_waits_for_the_not_ready_taint_to_go(api: client.ApiClient, sim: FakeCluster) -> None:
    """The kubelet reports Ready before the node lifecycle controller lifts node.kubernetes.io/not-ready;
    the scheduler places nothing there until it does. A successor is Ready (and its old node cordoned)
    only then: the wait reads readiness as Cluster Autoscaler does (GetReadinessState)."""
    sim.control_request("POST", "/sim/v1/settings", {"node_taint_lag": 3600})
    created = await KwokProvider(api).create_node(
        CreateNodeInput(cluster="c1", request_id="r1", attempt=0, pool=pool())
    )
    core = client.CoreV1Api(api)

    def condition_ready() -> bool:
        node = core.read_node(created.node_name)
        return any(c.type == "Ready" and c.status == "True" for c in node.status.conditions or [])

    eventually(condition_ready, timeout=30, message="the Ready condition")
    assert "node.kubernetes.io/not-ready" in [t.key for t in core.read_node(created.node_name).spec.taints or []]
    env, kube = ActivityEnvironment(), KubeActivities(api, known_providers=["kwok"])
    short = WaitReadyInput(cluster="c1", node_name=created.node_name, timeout_s=0.5, poll_s=0.05)
    assert await env.run(kube.wait_node_ready, short) is False
    batch = WaitNodesReadyInput(
        cluster="c1", nodes=[NodeWait(node_name=created.node_name, deadline=time.time() + 0.5)], poll_s=0.05
    )
    assert await env.run(kube.wait_nodes_ready, batch) == {created.node_name: False}
    sim.control_request("POST", "/sim/v1/settings", {"node_taint_lag": 0})
    long = short.model_copy(update={"timeout_s": 60})
    assert await env.run(kube.wait_node_ready, long) is True


async def test_wait_nodes_ready_settles_each_node_of_a_batch(api: client.ApiClient, sim: FakeCluster) -> None:
    """A NodeRequestBatch's round: it returns once some node is settled, with the Ready ones
    labelled and those past their deadline False; a node neither Ready nor late is left out, and
    a round with nothing to say ends after round_s."""
    sim.control_request("POST", "/sim/v1/faults", {"never_ready_nodes": ["*-stuck-*"]})
    provider = KwokProvider(api)
    kube = KubeActivities(api, known_providers=["kwok"])
    ok = [
        await provider.create_node(CreateNodeInput(cluster="c1", request_id=f"b#{i}", attempt=0, pool=pool()))
        for i in range(2)
    ]
    stuck = await provider.create_node(
        CreateNodeInput(cluster="c1", request_id="b#2", attempt=0, pool=pool("kwok-stuck-cx22"))
    )
    env = ActivityEnvironment()
    core = client.CoreV1Api(api)
    far = time.time() + 600
    nodes = [
        NodeWait(node_name=n.node_name, labels={"team": "a", "member": str(i)}, deadline=far) for i, n in enumerate(ok)
    ]
    waiting = [*nodes, NodeWait(node_name=stuck.node_name, labels={"team": "a"}, deadline=far)]
    settled: dict[str, bool] = {}
    while len(settled) < 2:  # both KWOK nodes turn Ready within a round or two
        answer = await env.run(kube.wait_nodes_ready, WaitNodesReadyInput(cluster="c1", nodes=waiting, poll_s=0.05))
        assert answer and all(answer.values()) and stuck.node_name not in answer
        settled |= answer
        waiting = [w for w in waiting if w.node_name not in answer]
    for i, n in enumerate(ok):
        assert {"team": "a", "member": str(i)}.items() <= (core.read_node(n.node_name).metadata.labels or {}).items()
    idle = WaitNodesReadyInput(cluster="c1", nodes=waiting, poll_s=0.05, round_s=1.5)
    polls: list = []
    env.on_heartbeat = lambda *a: polls.append(a)  # one heartbeat per poll
    sim.control_request("DELETE", "/sim/v1/stats")
    assert await env.run(kube.wait_nodes_ready, idle) == {}  # nothing settled within the round
    gets = sim.control_request("GET", "/sim/v1/stats")["by_verb"].get("get", 0)
    # The cache answers; the API server only from the fifth poll on (a round restarts often).
    assert len(polls) >= API_READ_EVERY and 1 <= gets <= len(polls) // API_READ_EVERY
    late = WaitNodesReadyInput(
        cluster="c1", nodes=[waiting[0].model_copy(update={"deadline": time.time() + 0.2})], poll_s=0.05
    )
    assert await env.run(kube.wait_nodes_ready, late) == {stuck.node_name: False}
    assert "team" not in (core.read_node(stuck.node_name).metadata.labels or {})


def test_observe_reads_pending_pods_nodes_and_groups_from_crs(api: client.ApiClient) -> None:
    apply_crds(api)
    apply_node_group(api, node_group("general", [{"provider": "kwok", "serverType": ["cx22"], "priority": 10}]))
    apply_node_group(api, node_group("broken", [{"provider": "nowhere", "serverType": ["cx22"], "priority": 10}]))
    client.AppsV1Api(api).create_namespaced_deployment("default", deployment("web", 2, cpu="250m", memory="64Mi"))
    kube = KubeActivities(api, known_providers=["kwok"])
    obs = eventually(
        lambda: (o := kube.observe_cluster("c1")) and o.demand.unschedulable == 2 and o,
        timeout=60,
        message="pods unschedulable",
    )
    # Two replicas, one shape: what crosses history is the shape and its count.
    [shape] = obs.demand.shapes
    assert shape.count == 2 and shape.requests.cpu_m == 250
    assert all(p.name.startswith("web-") for p in shape.pods) and len(shape.pods) == 2
    assert [g.name for g in obs.groups] == ["general"]
    assert [(p.name, p.field) for p in obs.invalid_groups] == [("broken", "spec.pools[0].provider")]
    kube.report_node_group_status(GroupStatusInput(cluster="c1", problems=obs.invalid_groups))
    custom = client.CustomObjectsApi(api)
    broken = custom.get_cluster_custom_object(CRD_GROUP, CRD_VERSION, "nodegroupswithpriority", "broken")
    good = custom.get_cluster_custom_object(CRD_GROUP, CRD_VERSION, "nodegroupswithpriority", "general")
    assert broken["status"] == {
        "valid": False,
        "field": "spec.pools[0].provider",
        "message": obs.invalid_groups[0].message,
    }
    assert good["status"]["valid"] is True


async def test_observe_says_which_requests_in_flight_already_have_a_ready_node(
    api: client.ApiClient, sim: FakeCluster
) -> None:
    """The loop sends its in-flight requests; the observation names those whose node is Ready
    (KWOK nodes carry their request's label from creation)."""
    provider = KwokProvider(api)
    rid, other = "nodes/c1/request/000001-ab", "nodes/c1/request/000002-cd"
    created = await provider.create_node(
        CreateNodeInput(
            cluster="c1", request_id=rid, attempt=0, pool=pool(), labels=request_labels("c1", "general", pool(), rid)
        )
    )
    kube = KubeActivities(api, known_providers=["kwok"])
    asking = ObserveInput(cluster="c1", requests={rid: created.node_name, other: ""})
    obs = eventually(
        lambda: (o := kube.observe_cluster(asking)) and o.requests_with_ready_node and o,
        timeout=60,
        message="the request's node Ready",
    )
    assert obs.requests_with_ready_node == [rid]
    assert kube.observe_cluster("c1").requests_with_ready_node == []  # a loop that does not ask


def test_observe_counts_nodes_and_ignores_daemonset_pods(api: client.ApiClient) -> None:
    core = client.CoreV1Api(api)
    provider = KwokProvider(api)
    import asyncio

    asyncio.run(provider.create_node(CreateNodeInput(cluster="c1", request_id="r1", attempt=0, pool=pool())))
    client.AppsV1Api(api).create_namespaced_deployment("default", deployment("web", 2, cpu="300m", memory="64Mi"))
    kube = KubeActivities(api, known_providers=["kwok"])
    obs = eventually(
        lambda: (o := kube.observe_cluster("c1")) and o.pods_running == 2 and o, timeout=60, message="pods running"
    )
    assert obs.demand.nodes.total == 1 and obs.demand.unschedulable == 0
    core.create_namespaced_pod(
        "default",
        {
            "metadata": {
                "name": "ds-pod",
                "ownerReferences": [
                    {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "ds", "uid": "u1", "controller": True}
                ],
            },
            "spec": {"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "50"}}}]},
        },
    )
    eventually(
        lambda: any(
            c.reason == "Unschedulable" for c in (core.read_namespaced_pod("ds-pod", "default").status.conditions or [])
        ),
        timeout=60,
        message="ds pod marked",
    )
    assert kube.observe_cluster("c1").demand.unschedulable == 0  # DaemonSet pods are never demand


def test_observe_leaves_anti_affinity_replicas_beyond_one_per_node_as_demand(api: client.ApiClient) -> None:
    import asyncio

    for i in range(2):
        asyncio.run(
            KwokProvider(api).create_node(CreateNodeInput(cluster="c1", request_id=f"r{i}", attempt=0, pool=pool()))
        )
    anti = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"topologyKey": LABEL_HOSTNAME, "labelSelector": {"matchLabels": {"app": "web"}}}
            ]
        }
    }
    # Five small replicas: two nodes with room for all of them take one each (the sim's
    # scheduler honours the rule), three stay pending, and the observer sees all three as demand.
    client.AppsV1Api(api).create_namespaced_deployment(
        "default", deployment("web", 5, cpu="100m", memory="64Mi", affinity=anti)
    )
    kube = KubeActivities(api, known_providers=["kwok"])
    obs = eventually(
        lambda: (o := kube.observe_cluster("c1")) and o.pods_running == 2 and o.demand.unschedulable == 3 and o,
        timeout=60,
        message="two replicas running, three unschedulable",
    )
    assert obs.demand.fits_existing == 0
    (shape,) = obs.demand.shapes
    assert shape.count == 3 and [s.limit for s in shape.spreads] == [1]


def test_observe_sends_daemonset_templates_for_the_room_they_take(api: client.ApiClient) -> None:
    template = {
        "metadata": {"labels": {"app": "agent"}},
        "spec": {
            "nodeSelector": {"kubernetes.io/os": "linux"},
            "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "150m", "memory": "32Mi"}}}],
        },
    }
    client.AppsV1Api(api).create_namespaced_daemon_set(
        "kube-system",
        {"metadata": {"name": "agent"}, "spec": {"selector": {"matchLabels": {"app": "agent"}}, "template": template}},
    )
    [agent] = KubeActivities(api, known_providers=["kwok"]).observe_cluster("c1").demand.daemonsets
    assert agent.requests.cpu_m == 150 and agent.requests.memory == 32 * 2**20
    assert agent.node_selector == {"kubernetes.io/os": "linux"}


def test_node_groups_from_a_yaml_file(api: client.ApiClient, tmp_path: Path) -> None:
    groups_file = tmp_path / "nodegroups.yaml"
    groups_file.write_text(
        yaml.safe_dump_all(
            [
                node_group("general", [{"provider": "kwok", "serverType": ["cx22", "cx32"], "priority": 10}]),
                node_group("bad", [{"provider": "kwok", "serverType": [], "priority": 10}]),
            ]
        )
    )
    config = tmp_path / "growth.yaml"
    config.write_text(yaml.safe_dump({"node_groups_file": "nodegroups.yaml", "providers": {"kwok": {}}}))
    settings = load_settings(str(config))
    assert settings.node_groups_file == str(groups_file)  # relative to the settings file
    obs = KubeActivities(api, known_providers=["kwok"], node_groups_file=settings.node_groups_file).observe_cluster(
        "c1"
    )
    assert [g.name for g in obs.groups] == ["general"]
    assert [(p.name, p.field) for p in obs.invalid_groups] == [("bad", "spec.pools[0].serverType")]


def test_pod_events(api: client.ApiClient) -> None:
    core = client.CoreV1Api(api)
    kube = KubeActivities(api, known_providers=["kwok"])
    pod = core.create_namespaced_pod(
        "default", {"metadata": {"name": "p1"}, "spec": {"containers": [{"name": "c", "image": "x"}]}}
    )
    kube.emit_pod_events(
        PodEventsInput(
            cluster="c1",
            events=[
                PodEvent(
                    namespace="default",
                    pod_name="p1",
                    pod_uid=pod.metadata.uid,
                    reason="TriggeredScaleUp",
                    message="pod triggered scale-up",
                )
            ],
        )
    )
    events = core.list_namespaced_event("default", field_selector="involvedObject.name=p1").items
    assert [(e.reason, e.involved_object.uid, e.source.component) for e in events] == [
        ("TriggeredScaleUp", pod.metadata.uid, "growth")
    ]


def test_a_retried_pod_events_write_writes_each_event_once(api: client.ApiClient) -> None:
    """Each Event is named from the activity's run, id and its index in the batch, the same in
    every attempt (client-go names Events `<object>.<hex>`): an attempt made again after a lost
    answer gets AlreadyExists for what the first one wrote. Outside an activity (above) the
    API server generates the name."""
    core = client.CoreV1Api(api)
    kube = KubeActivities(api, known_providers=["kwok"])
    for name in ("p1", "p2"):
        core.create_namespaced_pod(
            "default", {"metadata": {"name": name}, "spec": {"containers": [{"name": "c", "image": "x"}]}}
        )
    batch = PodEventsInput(
        cluster="c1",
        events=[
            PodEvent(namespace="default", pod_name=name, pod_uid="", reason="TriggeredScaleUp", message=name)
            for name in ("p1", "p2")
        ],
    )
    env = ActivityEnvironment()
    env.info = dataclasses.replace(env.info, workflow_run_id="run-1", activity_id="5")
    env.run(kube.emit_pod_events, batch)
    env.info = dataclasses.replace(env.info, attempt=2)  # the same activity, tried again
    env.run(kube.emit_pod_events, batch)

    def written(pod: str) -> list[str]:
        return [e.metadata.name for e in core.list_namespaced_event("default").items if e.involved_object.name == pod]

    first = {pod: written(pod) for pod in ("p1", "p2")}
    assert all(len(names) == 1 and names[0].startswith(f"{pod}.") for pod, names in first.items()), first
    assert first["p1"][0].split(".")[1] != first["p2"][0].split(".")[1]  # one key per Event of the batch
    env.info = dataclasses.replace(env.info, activity_id="9", attempt=1)  # another write: Events of its own
    env.run(kube.emit_pod_events, batch)
    assert [len(written(pod)) for pod in ("p1", "p2")] == [2, 2]


async def test_kwok_gpu_nodes_carry_their_extended_resources(api: client.ApiClient) -> None:
    gpu = pool("kwok-gpu4", "gpu4").model_copy(update={"config": {"resources": {"example.com/foo": 2}}})
    created = await KwokProvider(api).create_node(CreateNodeInput(cluster="c1", request_id="g1", attempt=0, pool=gpu))
    status = client.CoreV1Api(api).read_node(created.node_name).status
    assert status.allocatable["nvidia.com/gpu"] == "4" and status.capacity["example.com/foo"] == "2"
    assert int(status.allocatable["ephemeral-storage"]) > 0


def test_observe_carries_what_the_scheduler_filters_read(api: client.ApiClient) -> None:
    """A pending pod whose anti-affinity (namespaceSelector) repels a running pod's zone: the
    observer reads the namespace labels and the running pods, and the shape carries the zone
    counts (never per-pod lists) for the planner."""
    asyncio.run(KwokProvider(api).create_node(CreateNodeInput(cluster="c1", request_id="r0", attempt=0, pool=pool())))
    core = client.CoreV1Api(api)
    core.create_namespace({"metadata": {"name": "data", "labels": {"tier": "data"}}})
    client.AppsV1Api(api).create_namespaced_deployment(
        "data", deployment("db", 1, cpu="100m", memory="64Mi", namespace="data")
    )
    anti = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "topologyKey": LABEL_ZONE,
                    "labelSelector": {"matchLabels": {"app": "db"}},
                    "namespaceSelector": {"matchLabels": {"tier": "data"}},
                }
            ]
        }
    }
    kube = KubeActivities(api, known_providers=["kwok"])
    eventually(lambda: kube.observe_cluster("c1").pods_running == 1, timeout=60, message="db running")
    client.AppsV1Api(api).create_namespaced_deployment(
        "default", deployment("batch", 2, cpu="100m", memory="64Mi", affinity=anti)
    )
    obs = eventually(
        lambda: (o := kube.observe_cluster("c1")) and o.demand.unschedulable == 2 and o,
        timeout=60,
        message="two batch pods unschedulable",
    )
    assert obs.demand.fits_existing == 0  # the node has room, but the db's zone repels them
    (shape,) = obs.demand.shapes
    assert shape.scheduling is not None and shape.scheduling.affinity is not None
    assert shape.scheduling.affinity.anti_counts == {LABEL_ZONE: {"kwok-a": 1}}


def test_observations_read_nodes_ca_made_as_their_migrated_pools(api: client.ApiClient, tmp_path: Path) -> None:
    """The loop's and scale-down's observations adopt the Nodes of servers Cluster Autoscaler made
    for a migrated group (hetzner_node_group.go newNodeName `<group>-%x`, providerID hcloud://<id>)."""
    from activities.nodes.scale_down import ScaleDownActivities
    from scaling.nodes.migrate_ca import CaSettings, migrate
    from scaling.nodes.models import LABEL_GROUP

    groups_file = tmp_path / "nodegroups.yaml"
    migrated = migrate(CaSettings(args=["--nodes=1:3:cx22:fsn1:pool1"]))
    groups_file.write_text(yaml.safe_dump_all(migrated.node_groups))
    core = client.CoreV1Api(api)
    for name, server_id in (("pool1-5f3a9c2e1b7d4a60", 11), ("pool1-77", 12), ("unrelated-1", 13)):
        core.create_node(
            {
                "metadata": {"name": name, "labels": {"node.kubernetes.io/instance-type": "cx22"}},
                "spec": {"providerID": f"hcloud://{server_id}"},
                "status": {"allocatable": {"cpu": "2", "memory": "4Gi", "pods": "110"}},
            }
        )
    kube = KubeActivities(api, known_providers=["hetzner"], node_groups_file=str(groups_file))
    obs = eventually(
        lambda: (o := kube.observe_cluster("c1")) and o.demand.nodes.total == 3 and o, message="nodes seen"
    )
    assert [(c.group, c.pool, c.count) for c in obs.demand.nodes.groups] == [("pool1", "pool1", 2)]
    scale_down = ScaleDownActivities(api, known_providers=["hetzner"], node_groups_file=str(groups_file))
    seen = scale_down.observe_scale_down("c1")
    assert sorted(n.name for n in seen.nodes if n.labels.get(LABEL_GROUP) == "pool1") == [
        "pool1-5f3a9c2e1b7d4a60",
        "pool1-77",
    ]
