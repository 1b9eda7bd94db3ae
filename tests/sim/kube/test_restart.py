"""Contract tests: a simulated API server on a data directory restarts as the same cluster.

A real kube-apiserver keeps its objects in etcd and its CA and token in files, so a restart
changes nothing a client holds (kubeconfig, uids, resourceVersions). Its watch cache starts
again from a fresh list, so a watch resumed from an older resourceVersion gets 410 Expired
("too old resource version: X (Y)", staging/src/k8s.io/apiserver/pkg/storage/cacher/watch_cache.go),
and the client relists. BOOKMARK events (allowWatchBookmarks) carry only kind, apiVersion and
metadata.resourceVersion.
"""

from __future__ import annotations

import signal
import threading
from pathlib import Path

import pytest
from kubernetes import client, config, watch
from kubernetes.client.exceptions import ApiException

from sim.cluster import FakeCluster
from sim.kube.journal import WAL, Journal
from starters.processes import Processes
from tests.polling import eventually
from tests.sim.conftest import pod_body

CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.example.com"},
    "spec": {
        "group": "example.com",
        "scope": "Namespaced",
        "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
        "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {}}}],
    },
}


def _core(cluster: FakeCluster) -> client.CoreV1Api:
    return client.CoreV1Api(cluster.api_client())


def test_restart_on_data_dir_is_the_same_cluster(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with FakeCluster(data_dir=data, run_scheduler=False) as first:
        first.write_kubeconfig(tmp_path / "kubeconfig")
        core = _core(first)
        pod = core.create_namespaced_pod("default", pod_body("kept", labels={"app": "a"}))
        core.create_namespaced_config_map("default", {"metadata": {"name": "gone"}})
        core.delete_namespaced_config_map("gone", "default")
        client.ApiextensionsV1Api(first.api_client()).create_custom_resource_definition(CRD)
        custom = client.CustomObjectsApi(first.api_client())
        widget = custom.create_namespaced_custom_object(
            "example.com",
            "v1",
            "default",
            "widgets",
            {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}},
        )
        url, last_rv = first.url, first.store.rv
    with FakeCluster(data_dir=data, run_scheduler=False) as second:
        assert second.url == url  # same port, so the old kubeconfig still points at it
        # The kubeconfig written before the restart still works: same CA, same token.
        api = config.new_client_from_config(str(tmp_path / "kubeconfig"))
        core = client.CoreV1Api(api)
        again = core.read_namespaced_pod("kept", "default")
        assert again.metadata.uid == pod.metadata.uid
        assert again.metadata.resource_version == pod.metadata.resource_version
        assert [c.metadata.name for c in core.list_namespaced_config_map("default").items] == []
        got = client.CustomObjectsApi(api).get_namespaced_custom_object("example.com", "v1", "default", "widgets", "w")
        assert got["metadata"]["uid"] == widget["metadata"]["uid"]  # the CRD is served again
        assert len(core.list_namespaced_config_map("kube-public").items) == 1  # cluster-info once
        new = core.create_namespaced_config_map("default", {"metadata": {"name": "after"}})
        assert int(new.metadata.resource_version) == last_rv + 1  # resourceVersions continue upward
        assert int(core.list_namespace().metadata.resource_version) == last_rv + 1


def test_snapshot_compaction_keeps_everything(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with FakeCluster(data_dir=data, run_scheduler=False, run_kwok=False, run_controllers=False) as first:
        first.store.journal.compact_after = 7  # a snapshot every 7 commits
        core = _core(first)
        for i in range(20):
            core.create_namespaced_config_map("default", {"metadata": {"name": f"c{i}"}})
        core.delete_namespaced_config_map("c3", "default")
        before = {c.metadata.name: c.metadata.uid for c in core.list_namespaced_config_map("default").items}
        order = [first.store.order(o) for o in first.store.all(first.store.builtin("configmaps"))]
        assert (data / "snapshot.json").exists() and first.store.journal.records < 7
    with FakeCluster(data_dir=data, run_scheduler=False) as second:
        core = _core(second)
        after = {c.metadata.name: c.metadata.uid for c in core.list_namespaced_config_map("default").items}
        assert after == before and len(after) == 19
        assert sorted(order) == sorted(
            second.store.order(o) for o in second.store.all(second.store.builtin("configmaps"))
        )


def test_torn_last_record_is_dropped(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with FakeCluster(data_dir=data, run_scheduler=False) as first:
        _core(first).create_namespaced_config_map("default", {"metadata": {"name": "whole"}})
        rv = first.store.rv
    with open(data / WAL, "ab") as wal:
        wal.write(b'{"rv":999,"g":"","p":"configmaps","t":"ADDED","ns":"default","n":"torn","o":{"meta')
    with FakeCluster(data_dir=data, run_scheduler=False) as second:
        core = _core(second)
        assert [c.metadata.name for c in core.list_namespaced_config_map("default").items] == ["whole"]
        assert (
            int(core.create_namespaced_config_map("default", {"metadata": {"name": "next"}}).metadata.resource_version)
            == rv + 1
        )
    _, records = Journal(data).load()  # the log holds whole records only
    assert [r["n"] for r in records][-1] == "next"


def test_sigkill_loses_no_acknowledged_write(tmp_path: Path) -> None:
    procs = Processes(tmp_path)
    kubeconfig = tmp_path / "kubeconfig"
    try:
        _, url = procs.sim_cluster(kubeconfig, data_dir=tmp_path / "data")
        api = config.new_client_from_config(str(kubeconfig))
        core = client.CoreV1Api(api)
        acknowledged: dict[str, tuple[str, str]] = {}
        stop = threading.Event()

        def writer() -> None:
            i = 0
            while not stop.is_set():
                try:
                    cm = core.create_namespaced_config_map("default", {"metadata": {"name": f"cm-{i}"}})
                except Exception:
                    return  # the server died under us: the write was not acknowledged
                acknowledged[cm.metadata.name] = (cm.metadata.uid, cm.metadata.resource_version)
                i += 1

        thread = threading.Thread(target=writer)
        thread.start()
        eventually(lambda: len(acknowledged) >= 50, message="writes acknowledged before the kill")
        _, again = procs.restart_sim_cluster(signal.SIGKILL)  # killed mid-write, started on its data dir
        stop.set()
        thread.join(30)
        assert again == url
        core = client.CoreV1Api(config.new_client_from_config(str(kubeconfig)))
        stored = {
            c.metadata.name: (c.metadata.uid, c.metadata.resource_version)
            for c in core.list_namespaced_config_map("default").items
        }
        assert {n: stored.get(n) for n in acknowledged} == acknowledged
    finally:
        procs.stop_all()


# ---- watches across a restart -------------------------------------------------------------


def test_watch_resumes_from_restart_version_and_410s_before_it(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with FakeCluster(data_dir=data, run_scheduler=False) as first:
        core = _core(first)
        old = core.list_namespaced_config_map("default").metadata.resource_version
        core.create_namespaced_config_map("default", {"metadata": {"name": "before"}})
        current = core.list_namespaced_config_map("default").metadata.resource_version
    with FakeCluster(data_dir=data, run_scheduler=False) as second:
        core = _core(second)
        core.create_namespaced_config_map("default", {"metadata": {"name": "after"}})
        events = [
            (e["type"], e["object"].metadata.name)
            for e in watch.Watch().stream(
                core.list_namespaced_config_map, "default", resource_version=current, timeout_seconds=1
            )
        ]
        assert events == [("ADDED", "after")]  # nothing happened in between: the watch resumes
        with pytest.raises(ApiException) as info:
            list(
                watch.Watch().stream(
                    core.list_namespaced_config_map, "default", resource_version=old, timeout_seconds=1
                )
            )
        assert info.value.status == 410
        assert info.value.reason == f"Expired: too old resource version: {old} ({current})"


def test_open_watch_ends_when_the_server_stops(tmp_path: Path) -> None:
    cluster = FakeCluster(data_dir=tmp_path / "data", run_scheduler=False).start()
    core = _core(cluster)
    started, ended = threading.Event(), threading.Event()

    def watcher() -> None:
        for _ in watch.Watch().stream(core.list_namespaced_config_map, "default", timeout_seconds=60):
            started.set()
        ended.set()

    core.create_namespaced_config_map("default", {"metadata": {"name": "seen"}})
    threading.Thread(target=watcher, daemon=True).start()
    assert started.wait(30)
    cluster.stop()
    assert ended.wait(30)  # the stream ends (the client then resumes or relists)


# ---- bookmarks ----------------------------------------------------------------------------


def test_bookmarks_only_when_allowed(cluster: FakeCluster, core: client.CoreV1Api) -> None:
    cluster.control.watch_bookmark_interval = 0.2
    start = core.list_namespaced_config_map("default").metadata.resource_version
    core.create_namespaced_config_map("default", {"metadata": {"name": "b"}})
    w = watch.Watch()
    events = list(
        w.stream(
            core.list_namespaced_config_map,
            "default",
            resource_version=start,
            allow_watch_bookmarks=True,
            timeout_seconds=1,
        )
    )
    bookmarks = [e["raw_object"] for e in events if e["type"] == "BOOKMARK"]
    assert events[0]["type"] == "ADDED" and bookmarks
    assert bookmarks[0] == {
        "kind": "ConfigMap",
        "apiVersion": "v1",
        "metadata": {"resourceVersion": str(cluster.store.rv)},
    }
    assert w.resource_version == str(cluster.store.rv)  # the client resumes from the bookmark
    plain = list(
        watch.Watch().stream(core.list_namespaced_config_map, "default", resource_version=start, timeout_seconds=1)
    )
    assert [e["type"] for e in plain] == ["ADDED"]


def test_watch_from_a_version_never_reached_is_504_too_large(tmp_path: Path) -> None:
    # A cluster restored from an older copy of its data dir (etcd restored from a backup): a
    # client still holds resourceVersions the store never reached.
    data = tmp_path / "data"
    with FakeCluster(data_dir=data, run_scheduler=False) as first:
        core = _core(first)
        core.create_namespaced_config_map("default", {"metadata": {"name": "a"}})
        future = first.store.rv + 10
    with FakeCluster(data_dir=data, run_scheduler=False) as second:
        core = _core(second)
        with pytest.raises(ApiException) as info:
            list(
                watch.Watch().stream(
                    core.list_namespaced_config_map, "default", resource_version=str(future), timeout_seconds=10
                )
            )
        assert info.value.status == 504
        assert info.value.reason == f"Timeout: Too large resource version: {future}, current: {second.store.rv}"
