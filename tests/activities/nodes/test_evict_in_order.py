"""evict_in_order against the simulated cluster: its scheduler (LeastAllocated, as the kube-scheduler's
default profile) and its ReplicaSet controller, which makes a new pod for each one evicted.

x holds an api (1 CPU, 2 GiB) and a cache (500m, 3 GiB) and is cordoned; d has 2.1 GiB free, m
3.1 GiB (tests/scaling/nodes/disruption/test_multi_node.py's stranding_cluster). The api's new pod,
scheduled first, goes to m (the emptier) and the cache's then fits nowhere; the cache's first, it
takes m and the api d. Evicted one at a time, each once the one before is bound again, the pods
arrive in the order given."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
import time
from collections.abc import Iterator

import pytest
from kubernetes import client, watch
from temporalio.testing import ActivityEnvironment

from activities.nodes.scale_down import ScaleDownActivities
from scaling.nodes.contracts import EvictInOrderInput, OrderedEviction
from sim.cluster import FakeCluster
from starters.kube import deployment
from tests.polling import eventually

pytestmark = pytest.mark.timeout(180)
GI = 1024**3


@pytest.fixture
def cluster() -> Iterator[FakeCluster]:
    with FakeCluster(node_ready_delay=0.0, pod_start_delay=0.0, scheduler_interval=0.05) as c:
        yield c


def add_node(core: client.CoreV1Api, name: str, cpu: str, memory: str) -> None:
    q = {"cpu": cpu, "memory": memory, "pods": "110"}
    core.create_node(
        {
            "metadata": {"name": name, "annotations": {"kwok.x-k8s.io/node": "fake"}},
            "status": {"allocatable": q, "capacity": q, "conditions": [{"type": "Ready", "status": "True"}]},
        }
    )


def filler(core: client.CoreV1Api, node: str, cpu: str, memory: int) -> None:
    core.create_namespaced_pod(
        "default",
        {
            "metadata": {"name": f"{node}-filler"},
            "spec": {
                "nodeName": node,
                "containers": [
                    {"name": "c", "image": "pause", "resources": {"requests": {"cpu": cpu, "memory": str(memory)}}}
                ],
            },
        },
    )


def outcomes(done: list[OrderedEviction]) -> list[tuple[str, str]]:
    return [(d.pod, d.outcome) for d in done]


def placed(core: client.CoreV1Api) -> dict[str, str | None]:
    """Each deployment pod's app and node (None: pending), the evicted ones gone."""
    pods = core.list_namespaced_pod("default").items
    return {
        p.metadata.labels["app"]: p.spec.node_name for p in pods if p.metadata.labels and "app" in p.metadata.labels
    }


@pytest.fixture
def setup(cluster: FakeCluster) -> tuple[client.CoreV1Api, dict[str, str]]:
    core = client.CoreV1Api(cluster.api_client())
    add_node(core, "x", "8", "16Gi")
    apps = client.AppsV1Api(cluster.api_client())
    apps.create_namespaced_deployment("default", deployment("api", 1, cpu="1", memory=str(2 * GI)))
    apps.create_namespaced_deployment("default", deployment("cache", 1, cpu="500m", memory=str(3 * GI)))
    eventually(lambda: placed(core) == {"api": "x", "cache": "x"}, timeout=60, message="both on x")
    for name in ("d", "m"):
        add_node(core, name, "3920m", str(6 * GI))
    filler(core, "d", "1", 4 * GI - GI // 10)
    filler(core, "m", "500m", 3 * GI - GI // 10)
    core.patch_node("x", {"spec": {"unschedulable": True}})
    keys = {
        p.metadata.labels["app"]: f"default/{p.metadata.name}"
        for p in core.list_namespaced_pod("default").items
        if p.metadata.labels and "app" in p.metadata.labels
    }
    return core, keys


async def test_pods_evicted_in_order_are_placed_in_it(cluster: FakeCluster, setup) -> None:  # noqa: ANN001
    core, keys = setup
    acts = ScaleDownActivities(cluster.api_client(), known_providers=["kwok"])
    order = EvictInOrderInput(cluster="c", pods=[keys["cache"], keys["api"]], nodes=["x"], poll_s=0.05)
    done = await ActivityEnvironment().run(acts.evict_in_order, order)
    assert outcomes(done) == [(keys["cache"], "evicted"), (keys["api"], "evicted")]
    assert done[0].at < done[1].at
    # It returned once the api's new pod was bound too.
    assert placed(core) == {"cache": "m", "api": "d"}


async def test_the_other_order_strands_the_cache_and_the_wait_ends_at_its_bound(cluster: FakeCluster, setup) -> None:  # noqa: ANN001
    core, keys = setup
    acts = ScaleDownActivities(cluster.api_client(), known_providers=["kwok"])
    order = EvictInOrderInput(
        cluster="c", pods=[keys["api"], keys["cache"]], nodes=["x"], bound_timeout_s=1.0, poll_s=0.05
    )
    done = await ActivityEnvironment().run(acts.evict_in_order, order)
    assert outcomes(done) == [(keys["api"], "evicted"), (keys["cache"], "evicted")]
    assert placed(core) == {"api": "m", "cache": None}


async def test_pods_on_nodes_not_named_and_pods_gone_are_left_alone(cluster: FakeCluster, setup) -> None:  # noqa: ANN001
    core, keys = setup
    acts = ScaleDownActivities(cluster.api_client(), known_providers=["kwok"])
    env = ActivityEnvironment()
    kept = EvictInOrderInput(cluster="c", pods=[keys["cache"]], nodes=["d"], poll_s=0.05)  # x kept by its re-check
    assert outcomes(await env.run(acts.evict_in_order, kept)) == [(keys["cache"], "gone")]
    assert placed(core) == {"api": "x", "cache": "x"}
    gone = EvictInOrderInput(cluster="c", pods=["default/nothing"], nodes=["x"], poll_s=0.05)
    assert outcomes(await env.run(acts.evict_in_order, gone)) == [("default/nothing", "gone")]


@pytest.fixture
def slow_start() -> Iterator[FakeCluster]:
    """A pod is Running and Ready a second after it is bound (the bench's 0.2 s, stretched)."""
    with FakeCluster(node_ready_delay=0.0, pod_start_delay=1.0, scheduler_interval=0.05) as c:
        yield c


def two_caches_and_an_api(cluster: FakeCluster) -> tuple[client.CoreV1Api, list[str], str]:
    """Two caches behind a PDB of minAvailable 1 and an api, Ready on x, which is then cordoned; m has
    room for all. The caches' keys and the api's."""
    core = client.CoreV1Api(cluster.api_client())
    add_node(core, "x", "8", "16Gi")
    apps = client.AppsV1Api(cluster.api_client())
    apps.create_namespaced_deployment("default", deployment("cache", 2, cpu="500m", memory=str(GI)))
    apps.create_namespaced_deployment("default", deployment("api", 1, cpu="500m", memory=str(GI)))
    pdb = {"metadata": {"name": "cache"}, "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "cache"}}}}
    client.PolicyV1Api(cluster.api_client()).create_namespaced_pod_disruption_budget("default", pdb)

    def ready_on_x() -> list[str]:
        return sorted(
            f"default/{p.metadata.name}"
            for p in core.list_namespaced_pod("default").items
            if p.spec.node_name == "x"
            and any(c.type == "Ready" and c.status == "True" for c in p.status.conditions or [])
        )

    eventually(lambda: len(ready_on_x()) == 3, timeout=60, message="all three Ready on x")
    add_node(core, "m", "8", "16Gi")
    core.patch_node("x", {"spec": {"unschedulable": True}})
    names = ready_on_x()
    return core, [k for k in names if "/cache-" in k], next(k for k in names if "/api-" in k)


@pytest.mark.parametrize("retry_s", [30.0, 0.0])
async def test_an_eviction_a_pdb_refuses_is_asked_again_before_the_next_pod_goes(
    slow_start: FakeCluster, retry_s: float
) -> None:
    """Evicted cache, cache, api: the first cache's new pod is bound and not Ready for a second, and the
    budget refuses the second cache then. Left at once to the drain (retry 0, as before), the api went
    before it (the consolidation bench, seed 11: the api took the room the order kept for the cache,
    which went pending). Asked again, it goes once the budget allows, and the api after it."""
    _, caches, api = two_caches_and_an_api(slow_start)
    acts = ScaleDownActivities(slow_start.api_client(), known_providers=["kwok"])
    order = EvictInOrderInput(
        cluster="c", pods=[*caches, api], nodes=["x"], poll_s=0.05, refused_retry_s=retry_s, refused_poll_s=0.2
    )
    done = await ActivityEnvironment().run(acts.evict_in_order, order)
    if retry_s:
        assert outcomes(done) == [(caches[0], "evicted"), (caches[1], "evicted"), (api, "evicted")]
        assert done[1].at - done[0].at >= 0.9  # refused until the first cache's new pod was Ready
    else:
        assert outcomes(done) == [(caches[0], "evicted"), (caches[1], "refused"), (api, "evicted")]


def pod_events(core: client.CoreV1Api, since: str, until_done: threading.Event) -> list[tuple[str, str, str | None]]:
    """The API server's pod events from resourceVersion ``since``: (type, app, node) each, in order."""
    seen: list[tuple[str, str, str | None]] = []
    w = watch.Watch()
    for ev in w.stream(core.list_namespaced_pod, "default", resource_version=since, timeout_seconds=60):
        p = ev["object"]
        app = (p.metadata.labels or {}).get("app")
        if app:
            seen.append((ev["type"], app, p.spec.node_name))
        if until_done.is_set():
            w.stop()
    return seen


def resumed_after_the_cache(core: client.CoreV1Api, keys: dict[str, str]) -> tuple[ActivityEnvironment, object]:
    """An activity environment whose heartbeat says the last attempt was to evict the cache (and
    wait for its new pod); the cache pod as it is now."""
    cache = core.read_namespaced_pod(keys["cache"].split("/")[1], "default")
    rs = cache.metadata.owner_references[0].uid
    env = ActivityEnvironment()
    waiting = {"namespace": "default", "pod": cache.metadata.uid, "uid": rs, "bound": 1, "since": time.time()}
    env.info = dataclasses.replace(
        env.info,
        heartbeat_details=[{"done": [{"pod": keys["cache"], "outcome": "evicted", "at": 0.0}], "waiting": waiting}],
    )
    return env, cache


async def test_a_retry_resumes_where_the_heartbeat_says_the_last_attempt_was(cluster: FakeCluster, setup) -> None:  # noqa: ANN001
    """A worker killed after the cache's eviction: the retry waits for the cache's new pod to be
    bound, as the first attempt would have, and only then evicts the api (the API server's events
    say which came first)."""
    core, keys = setup
    acts = ScaleDownActivities(cluster.api_client(), known_providers=["kwok"])
    since = core.list_namespaced_pod("default").metadata.resource_version
    done = threading.Event()
    events = asyncio.create_task(asyncio.to_thread(pod_events, core, since, done))
    env, cache = resumed_after_the_cache(core, keys)
    core.delete_namespaced_pod(cache.metadata.name, "default")  # the first attempt's eviction
    order = EvictInOrderInput(cluster="c", pods=[keys["cache"], keys["api"]], nodes=["x"], poll_s=0.05)
    assert outcomes(await env.run(acts.evict_in_order, order)) == [(keys["cache"], "evicted"), (keys["api"], "evicted")]
    assert placed(core) == {"cache": "m", "api": "d"}
    done.set()
    core.create_namespaced_pod(
        "default",
        {
            "metadata": {"name": "last", "labels": {"app": "last"}},
            "spec": {"containers": [{"name": "c", "image": "pause"}]},
        },
    )
    seen = await events
    cache_bound = seen.index(("MODIFIED", "cache", "m"))
    api_gone = next(i for i, e in enumerate(seen) if e[0] == "DELETED" and e[1] == "api")
    assert cache_bound < api_gone, seen


async def test_a_retry_evicts_again_the_pod_the_last_attempt_stopped_before(cluster: FakeCluster, setup) -> None:  # noqa: ANN001
    """Killed after telling its heartbeat it would evict the cache, before the eviction: the cache is
    still there, so the retry evicts it, waits for its new pod, then evicts the api."""
    core, keys = setup
    acts = ScaleDownActivities(cluster.api_client(), known_providers=["kwok"])
    env, cache = resumed_after_the_cache(core, keys)
    order = EvictInOrderInput(cluster="c", pods=[keys["cache"], keys["api"]], nodes=["x"], poll_s=0.05)
    assert outcomes(await env.run(acts.evict_in_order, order)) == [(keys["cache"], "evicted"), (keys["api"], "evicted")]
    assert placed(core) == {"cache": "m", "api": "d"}
    assert cache.metadata.uid not in {p.metadata.uid for p in core.list_namespaced_pod("default").items}
