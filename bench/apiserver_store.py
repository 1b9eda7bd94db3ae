"""What keeping the simulated API server's store on disk costs, at 10,000 pods.

python -m bench.apiserver_store   (figures per mode, then one JSON line over all)

Modes: memory (no data dir), journal (every commit written before it is visible: survives
SIGKILL), journal+fsync (also fsynced before a write is acknowledged: survives an OS crash; the
default with --data-dir). Each pod goes through create, bind and Running (three commits, as the
scheduler and KWOK do), with the store's sync() after each, as the API server calls it before
answering. Then: a restart from the log alone, the snapshot (compaction) that replaces the log,
a restart from the snapshot, and 1,000 creates over HTTPS with the official client.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from kubernetes import client

from sim.cluster import FakeCluster
from sim.kube.journal import SNAPSHOT, WAL
from sim.kube.store import Store

PODS = 10_000
HTTP_PODS = 1_000


def pod(name: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {"app": "bench"}},
        "spec": {"containers": [{"name": "c", "image": "nginx", "resources": {"requests": {"cpu": "100m"}}}]},
    }


def churn(store: Store, pods: int) -> float:
    """Seconds for `pods` pods' create, bind and Running, each commit synced as if acknowledged."""
    rt = store.builtin("pods")

    def running(obj: dict[str, Any]) -> dict[str, Any]:
        obj["status"]["phase"] = "Running"
        return obj

    started = time.perf_counter()
    for i in range(pods):
        store.create(rt, "default", pod(f"p{i}"))
        store.sync()
        store.bind("default", f"p{i}", f"node-{i % 100}")
        store.sync()
        store.mutate(rt, "default", f"p{i}", running, "status")
        store.sync()
    return time.perf_counter() - started


def size_mb(path: Path) -> float:
    return round(path.stat().st_size / 1e6, 1) if path.exists() else 0.0


def run_mode(mode: str) -> dict[str, Any]:
    tmp = Path(tempfile.mkdtemp(prefix="bench-store-"))
    try:
        data = None if mode == "memory" else tmp / "data"
        store = Store(data_dir=data, fsync=mode == "journal+fsync", compact_after=10**9)
        seconds = churn(store, PODS)
        commits = 3 * PODS
        out: dict[str, Any] = {
            "mode": mode,
            "pods": PODS,
            "commits": commits,
            "churn_s": round(seconds, 2),
            "us_per_commit": round(1e6 * seconds / commits, 1),
        }
        if data is not None:
            store.close()
            out["wal_mb"] = size_mb(data / WAL)
            started = time.perf_counter()
            again = Store(data_dir=data, compact_after=10**9)
            out["restart_from_log_s"] = round(time.perf_counter() - started, 2)
            assert len(again.all(again.builtin("pods"))) == PODS and again.rv == store.rv
            started = time.perf_counter()
            with again.lock:
                again.journal.compact(again._snapshot())  # the stall a compaction puts on writers
            out["snapshot_s"] = round(time.perf_counter() - started, 2)
            out["snapshot_mb"] = size_mb(data / SNAPSHOT)
            again.close()
            started = time.perf_counter()
            third = Store(data_dir=data)
            out["restart_from_snapshot_s"] = round(time.perf_counter() - started, 2)
            assert len(third.all(third.builtin("pods"))) == PODS
            third.close()
        out["http_ms_per_create"] = http_create_ms(tmp / "http", data is not None, mode == "journal+fsync")
        return out
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def http_create_ms(tmp: Path, on_disk: bool, fsync: bool) -> float:
    """Mean ms per pod create over HTTPS with the official client (the scheduler and KWOK off)."""
    with FakeCluster(
        data_dir=tmp if on_disk else None, fsync=fsync, run_scheduler=False, run_kwok=False, run_controllers=False
    ) as cluster:
        core = client.CoreV1Api(cluster.api_client())
        started = time.perf_counter()
        for i in range(HTTP_PODS):
            core.create_namespaced_pod("default", pod(f"h{i}"))
        return round(1000 * (time.perf_counter() - started) / HTTP_PODS, 2)


def main() -> None:
    results = [run_mode(mode) for mode in ("memory", "journal", "journal+fsync")]
    for r in results:
        print(json.dumps(r))
    base = results[0]["us_per_commit"]
    print(
        json.dumps(
            {
                "pods": PODS,
                **{f"{r['mode']}_us_per_commit": r["us_per_commit"] for r in results},
                **{f"{r['mode']}_http_ms_per_create": r["http_ms_per_create"] for r in results},
                "fsync_ratio_to_memory": round(results[2]["us_per_commit"] / base, 1),
                "journal_ratio_to_memory": round(results[1]["us_per_commit"] / base, 1),
                "restart_from_log_s": results[2]["restart_from_log_s"],
                "restart_from_snapshot_s": results[2]["restart_from_snapshot_s"],
                "snapshot_s": results[2]["snapshot_s"],
            }
        )
    )


if __name__ == "__main__":
    main()
