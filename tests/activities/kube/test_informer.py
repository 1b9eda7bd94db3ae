"""The watch-fed cache (activities.kube.informer, activities.kube.cache) against the simulated
API server over HTTPS with the official client: a watch dropped mid-burst, an API server that
restarts while writes go on (its store kept, as etcd outlives a kube-apiserver restart) and
410 Gone, bookmarks, and a reader that needs a newer view than its replica's watch has."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client

from activities.kube.cache import ClusterCache
from activities.kube.client import ClusterClients, api_client
from activities.kube.informer import Informer
from activities.nodes.kube import KubeActivities
from activities.settings import KubeSettings
from scaling.nodes.contracts import ObserveInput
from sim.cluster import FakeCluster
from sim.kube.apiserver import ApiServer
from tests.polling import eventually


@pytest.fixture
def sim() -> Iterator[FakeCluster]:
    with FakeCluster(run_scheduler=False, run_kwok=False, run_controllers=False) as s:
        yield s


@pytest.fixture
def api(sim: FakeCluster, tmp_path: Path) -> Iterator[client.ApiClient]:
    a = api_client(KubeSettings(kubeconfig=str(sim.write_kubeconfig(tmp_path / "kubeconfig"))))
    yield a
    a.close()


def pod(name: str, node: str = "") -> dict:
    spec: dict = {"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "100m"}}}]}
    if node:
        spec["nodeName"] = node
    return {"metadata": {"name": name, "namespace": "default", "labels": {"app": "burst"}}, "spec": spec}


def store_pods(sim: FakeCluster) -> dict[str, str]:
    """key -> resourceVersion of every pod the server holds."""
    items, _ = sim.store.list(sim.store.builtin("pods"), None, [], [])
    return {f"{p['metadata']['namespace']}/{p['metadata']['name']}": p["metadata"]["resourceVersion"] for p in items}


def cached_pods(inf: Informer) -> dict[str, str]:
    with inf.cond:
        return {k: p["metadata"]["resourceVersion"] for k, p in inf.items.items()}


def drop_connections(server: ApiServer) -> int:
    """Cut every open connection from the server's side (a load balancer or the server itself
    going away); the informer's watch is one of them."""
    with server.conn_lock:
        conns = list(server.connections)
    for conn in conns:
        try:
            conn.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
    return len(conns)


def burst(sim: FakeCluster, names: range, every: int = 0, at_every: object = None) -> None:
    """Create pods straight in the store (no HTTP: the cut must only hit the watch)."""
    pods = sim.store.builtin("pods")
    for i in names:
        sim.store.create(pods, "default", pod(f"p{i}"))
        if every and i % every == every - 1 and callable(at_every):
            at_every()


def test_a_watch_dropped_mid_burst_relists_and_loses_nothing(sim: FakeCluster, api: client.ApiClient) -> None:
    cache = ClusterCache(api)
    try:
        inf = cache.read(["pods"])["pods"]
        assert inf.lists == 1
        drops: list[int] = []
        watches = [0]

        def cut() -> None:
            # Cut a live watch: wait until the server answers a new watch after the last cut.
            eventually(
                lambda: sim.apiserver.watches_started > watches[0], timeout=20, message="the informer to watch again"
            )
            watches[0] = sim.apiserver.watches_started
            drops.append(drop_connections(sim.apiserver))

        # 600 pods, the watch cut after every 150: each cut relists, the rest streams.
        burst(sim, range(600), 150, cut)
        assert all(d >= 1 for d in drops), drops
        eventually(
            lambda: cached_pods(inf) == store_pods(sim),
            timeout=20,
            message="the cache to hold every pod at its version",
        )
        assert inf.lists >= 2, "a watch dropped mid-stream must relist"
        assert len(cache.pod_index.by_node) == 0 and len(cache.pod_index.unschedulable) == 0
    finally:
        cache.close()


def test_an_api_server_restart_with_writes_in_between_gets_410_and_relists(
    sim: FakeCluster, api: client.ApiClient
) -> None:
    # A kept event window smaller than what happens while the server is away: the informer's
    # resume point is gone when it comes back (410 Gone), so it must list again.
    sim.store.event_log_size = 50
    cache = ClusterCache(api)
    try:
        inf = cache.read(["pods"])["pods"]
        burst(sim, range(20))
        eventually(lambda: cached_pods(inf) == store_pods(sim), timeout=20, message="the first 20 pods")
        lists_before = inf.lists
        host, port = sim.apiserver.httpd.server_address[:2]
        sim.apiserver.stop()
        burst(sim, range(20, 400))  # while the API server is down: 380 writes, 3 windows' worth
        with sim.store.lock:
            sim.store.events[:] = sim.store.events[-50:]
        restarted = ApiServer(sim.store, sim.control, sim.token, host, port, sim.certs)
        restarted.start()
        sim.apiserver = restarted
        eventually(lambda: cached_pods(inf) == store_pods(sim), timeout=40, message="every pod after the restart")
        assert inf.lists > lists_before, "a resume point older than the server's window must relist"
        # And it watches again: a later pod arrives without another list.
        lists = inf.lists
        burst(sim, range(400, 401))
        eventually(lambda: "default/p400" in cached_pods(inf), timeout=20, message="a pod after the restart")
        assert inf.lists == lists
    finally:
        cache.close()


def test_bookmarks_move_the_version_on_when_nothing_of_the_kind_changes(
    sim: FakeCluster, api: client.ApiClient
) -> None:
    sim.control.watch_bookmark_interval = 0.3
    cache = ClusterCache(api)
    try:
        nodes = cache.read(["nodes"])["nodes"]
        before, generation = nodes.rv, nodes.generation
        burst(sim, range(5))  # pods only: no node event
        target = sim.store.rv
        assert nodes.wait_for(target, 10), f"nodes stayed at {nodes.rv}, the server is at {target}"
        assert nodes.rv is not None and before is not None and nodes.rv > before
        assert nodes.lists == 1
        # ...but not its generation: readers can tell that no node changed.
        assert nodes.generation == generation
        pods = cache.read(["pods"], {"pods": str(target)})["pods"]
        generation = pods.generation
        burst(sim, range(5, 6))
        assert pods.wait_for(sim.store.rv, 10) and pods.generation == generation + 1
    finally:
        cache.close()


def test_a_reader_needing_a_newer_view_than_its_watch_lists(sim: FakeCluster, api: client.ApiClient) -> None:
    # Bookmarks a minute apart (the apiserver's pace): a node watch cannot show that nothing
    # happened to nodes, so a reader that saw a newer version elsewhere (another replica)
    # waits briefly, then lists.
    cache = ClusterCache(api)
    try:
        nodes = cache.read(["nodes"])["nodes"]
        burst(sim, range(3))
        newer = str(sim.store.rv)
        t0 = time.monotonic()
        read = cache.read(["nodes"], {"nodes": newer})["nodes"]
        assert read.rv is not None and read.rv >= int(newer)
        assert nodes.lists == 2
        assert time.monotonic() - t0 < 10
        # Already that new: no wait, no list.
        cache.read(["nodes"], {"nodes": newer})
        assert nodes.lists == 2
    finally:
        cache.close()


def test_pods_by_node_and_node_infos_follow_the_watch(sim: FakeCluster, api: client.ApiClient) -> None:
    nodes_rt, pods_rt = sim.store.builtin("nodes"), sim.store.builtin("pods")
    sim.store.create(
        nodes_rt,
        "",
        {"metadata": {"name": "n1"}, "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}}},
    )
    cache = ClusterCache(api)
    try:
        infs = cache.read(["pods", "nodes"])
        assert cache.node_infos(infs["nodes"], infs["pods"])[0].requested.cpu_m == 0
        sim.store.create(pods_rt, "default", pod("a", node="n1"))
        sim.store.create(pods_rt, "default", pod("b", node="n1"))

        def requested() -> int:
            return cache.node_infos(infs["nodes"], infs["pods"])[0].requested.cpu_m

        eventually(lambda: requested() == 200, timeout=10, message="two pods on n1")
        sim.store.delete(pods_rt, "default", "a")
        eventually(lambda: requested() == 100, timeout=10, message="one pod left on n1")
        assert [p.name for p in cache.pod_infos(infs["pods"])] == ["b"]
    finally:
        cache.close()


def test_each_replica_keeps_its_own_cache_and_a_lagging_one_never_answers_older(
    sim: FakeCluster, tmp_path: Path
) -> None:
    kubeconfig = str(sim.write_kubeconfig(tmp_path / "kubeconfig"))
    replicas = [
        KubeActivities(ClusterClients(shared=api_client(KubeSettings(kubeconfig=kubeconfig))), known_providers=["kwok"])
        for _ in range(2)
    ]
    a, b = replicas
    try:
        assert a.clusters.caches("c") is not b.clusters.caches("c")
        assert b.observe_cluster(ObserveInput(cluster="c")).pods_total == 0
        # B's watch stalls (as a replica whose watch lags or hangs): B's cache stays behind.
        b.clusters.caches("c").informer("pods").stop()
        burst(sim, range(5))
        seen = eventually(
            lambda: (o := a.observe_cluster(ObserveInput(cluster="c"))) and o.pods_total == 5 and o,
            timeout=20,
            message="replica A to see the pods",
        )
        # The loop's next observation lands on B with what A showed: B catches up (it lists).
        later = b.observe_cluster(ObserveInput(cluster="c", fresh=seen.resource_versions))
        assert later.pods_total == 5
        assert int(later.resource_versions["pods"]) >= int(seen.resource_versions["pods"])
    finally:
        for r in replicas:
            r.clusters.close()


def test_a_kind_still_absent_at_each_retry_keeps_its_generation(sim: FakeCluster, api: client.ApiClient) -> None:
    """Longhorn's CRDs are not installed: each retry finds them absent again, and that is no change
    (an idle loop's scale-down evaluation is reused while its kinds keep their generations)."""
    cache = ClusterCache(api)
    try:
        volumes = cache.read(["volumes"])["volumes"]
        assert volumes.absent
        generation = volumes.generation
        volumes._mark_absent()  # what the informer does at each retry
        assert volumes.generation == generation
    finally:
        cache.close()
