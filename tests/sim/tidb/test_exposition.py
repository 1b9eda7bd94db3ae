"""The TiDB world as a real Prometheus sees it: HTTP service discovery, TidbMonitor's relabeling and
TiKV/TiDB's exposition (sim/tidb/exposition.py).

The pure tests pin the exposition (per-thread counters that sum to the instance's CPU, no
instance label in it) and the discovery document; `promtool check metrics` lints the text when
promtool is on PATH. The real tier starts Debian's `prometheus` (skipped without it, saying how to
get it) and reads the world through growth's own PrometheusClient: per-thread sums per pod,
quotas, store sizes, namespaces kept apart, and a removed pod's series gone."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from kubernetes import client

from activities.components.prometheus import PrometheusClient
from sim.tidb.exposition import TIKV_THREADS, exposition, targets
from sim.tidb.load import Instance
from sim.tidb.world import FakeTidb
from starters import prometheus
from starters.processes import Processes
from tests.polling import eventually
from tests.sim.tidb.conftest import NS, running, tc_body

G, V, TC = "pingcap.com", "v1alpha1", "tidbclusters"
TIKV = Instance("tidb", "basic-tikv-0", "uid-1", "basic", "tidb", "basic", "tikv", 2.0, cpu=1.0,
                capacity=100, used=40, cpu_seconds=120.0)  # fmt: skip
TIDB = Instance("tidb", "basic-tidb-0", "uid-2", "basic", "tidb", "basic", "tidb", 4.0, cpu_seconds=30.0)


def samples(text: str) -> dict[str, float]:
    return {line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line[:1] != "#"}


def test_tikv_exposes_per_thread_cpu_that_sums_to_the_instance() -> None:
    found = samples(exposition(TIKV))
    threads = {k: v for k, v in found.items() if k.startswith("tikv_thread_cpu_seconds_total{")}
    assert len(threads) == len(TIKV_THREADS) and sum(threads.values()) == pytest.approx(120.0)
    assert all('name="' in k and 'tid="' in k for k in threads)
    assert found["tikv_server_cpu_cores_quota"] == 2.0
    assert found['tikv_store_size_bytes{type="capacity"}'] == 100
    assert found['tikv_store_size_bytes{type="available"}'] == 60
    # instance, namespace and component come from the scrape's relabeling, never from the target.
    assert "instance=" not in exposition(TIKV) and "kubernetes_namespace" not in exposition(TIKV)


def test_tidb_exposes_process_cpu_and_maxprocs() -> None:
    assert samples(exposition(TIDB)) == {"process_cpu_seconds_total": 30.0, "tidb_server_maxprocs": 4.0}


def test_discovery_gives_kubernetes_sd_labels_and_a_path_per_pod() -> None:
    (group,) = targets([TIKV], "127.0.0.1:9")
    assert group["targets"] == ["127.0.0.1:9"]
    assert group["labels"]["__metrics_path__"] == "/metrics/tidb/basic-tikv-0"
    assert group["labels"]["__meta_kubernetes_pod_name"] == "basic-tikv-0"
    assert group["labels"]["__meta_kubernetes_pod_label_app_kubernetes_io_component"] == "tikv"


@pytest.mark.skipif(shutil.which("promtool") is None, reason=prometheus.INSTALL_HINT)
@pytest.mark.parametrize("inst", [TIKV, TIDB], ids=["tikv", "tidb"])
def test_promtool_accepts_the_exposition(inst: Instance) -> None:
    proc = subprocess.run(["promtool", "check", "metrics"], input=exposition(inst), capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.fixture
def real_prometheus(world: FakeTidb, tmp_path: Path) -> Iterator[PrometheusClient]:
    if prometheus.binary() is None:
        pytest.skip(prometheus.INSTALL_HINT)
    procs = Processes(tmp_path)
    try:
        url = prometheus.start(procs, tmp_path, prometheus.scrape_config(world.server.url, None))
        prom = PrometheusClient(url)
        yield prom
        prom.close()
    finally:
        procs.stop_all()


def test_a_real_prometheus_reads_the_world_as_tidbmonitor_relabels_it(
    world: FakeTidb,
    http: httpx.Client,
    custom: client.CustomObjectsApi,
    core: client.CoreV1Api,
    real_prometheus: PrometheusClient,
) -> None:
    core.create_namespace({"metadata": {"name": "other"}})
    custom.create_namespaced_custom_object(G, V, NS, TC, tc_body("basic", tikv=3, tidb=1, tikv_cpu="2", tidb_cpu="4"))
    custom.create_namespaced_custom_object(G, V, "other", TC, tc_body("basic", tikv=3, tidb=0, tikv_cpu="2"))
    running(http, 7)
    world.load.set_demand(NS, "basic", "tikv", 3.0)  # 1 core on each TiKV
    world.load.set_demand(NS, "basic", "tidb", 2.0)
    world.load.set_storage(NS, "basic", "30Gi")
    prom = real_prometheus
    pods = {f"basic-tikv-{i}" for i in range(3)}

    def usage() -> dict[str, float] | None:
        used = prom.cpu_usage(NS, "tikv", 5)
        return used if set(used) == pods and all(abs(v - 1.0) < 0.15 for v in used.values()) else None

    # Per-thread counters summed per pod, over a window of real scrapes (Prometheus extrapolates).
    eventually(usage, timeout=30)
    assert prom.cpu_quota(NS, "tikv") == {p: 2.0 for p in pods}
    assert prom.cpu_quota(NS, "tidb") == {"basic-tidb-0": 4.0}
    sizes = prom.store_sizes(NS)
    assert set(sizes) == pods and sum(used for _, used in sizes.values()) == pytest.approx(30 * 2**30)
    assert eventually(lambda: (u := prom.cpu_usage(NS, "tidb", 5)) and abs(u["basic-tidb-0"] - 2.0) < 0.3 and u)
    # Same pod names in another namespace: kept apart by kubernetes_namespace, idle there.
    other = eventually(lambda: (u := prom.cpu_usage("other", "tikv", 5)) and set(u) == pods and u)
    assert all(v == pytest.approx(0.0) for v in other.values())
    # A pod that stops is dropped from discovery: its series go stale, the instance leaves the answer.
    custom.patch_namespaced_custom_object(G, V, NS, TC, "basic", {"spec": {"tikv": {"replicas": 2}}})
    eventually(lambda: set(prom.cpu_quota(NS, "tikv")) == {"basic-tikv-0", "basic-tikv-1"}, timeout=30)
