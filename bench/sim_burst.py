"""What the simulated cluster's CPU costs in a nodes burst, without Temporal or the worker.

python -m bench.sim_burst [--sizes 10000,30000] [--wave-nodes 50] [--wave-interval 2]

This process runs an in-process FakeCluster as the demo starts it (store on disk without fsync,
nodes Ready after 2 s). A second process plays the worker and the e2e bench's harness: informers
on pods and nodes (activities/kube/informer.py: list, then watch from its resourceVersion with
bookmarks), a list of the workload's pods every pods/2500 s (as bench/e2e.py's PodWatch polls),
the burst Deployment (500m, 512Mi, the os selector and arch affinity), and then cx52 nodes as
the KWOK provider creates them, `--wave-nodes` every `--wave-interval` seconds, until every pod
is Running. Phases: `burst` (Deployment created until every pod is unschedulable) and `scale`
(first node until every pod runs). Per phase: this process's CPU-s (the simulated cluster:
the client is the other process), wall seconds, and CPU-s per thread group. Figures per size,
then the last line is JSON for the largest size.

Run it under `nice -n 19` beside other work and read the load with it: a slower run keeps pods
pending longer, and the scheduler rewrites each pending pod's Unschedulable message as the node
count changes (once per pod backoff, up to 10 s), so it writes more. Measured on 2 shared cores
(nice 19), the code before the scheduler followed the store's events and after, back to back:
10,000 pods 26.5 -> 7.3 sim CPU-s (load 5.5, 2.6), 30,000 pods 183.0 -> 32.1 (load 3.9, 3.3).
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import os
import resource
import shutil
import tempfile
import threading
import time
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from bench.machine import load_average
from sim.cluster import FakeCluster

APP = "burst"
SERVER_TYPE = "cx52"
POD_CPU_M, POD_MEMORY = 500, 512 * 1024**2


# ---- the client process: informers, the harness's poll, the workload and the nodes ---------
def _client(kubeconfig: str, pods: int, wave_nodes: int, wave_interval: float, poll: bool, out: Connection) -> None:
    from kubernetes import client, config

    from activities.kube.informer import Index, Informer
    from activities.nodes.providers.kwok import KWOK_ANNOTATION, kwok_node_name
    from scaling.kube.models import LABEL_ARCH, LABEL_HOSTNAME, LABEL_INSTANCE_TYPE, LABEL_OS, LABEL_REGION
    from scaling.nodes.matching import KWOK_REGION, KWOK_ZONE, LABEL_ZONE
    from scaling.nodes.models import LABEL_CLUSTER, LABEL_GROUP, LABEL_POOL
    from scaling.nodes.providers.kwok import kwok_catalogue
    from starters.kube import deployment

    class Counts(Index):
        """Workload pods that are unschedulable and that run, kept from the informer's events."""

        def __init__(self) -> None:
            self.unschedulable: set[str] = set()
            self.running: set[str] = set()

        def reset(self, items: dict[str, Any]) -> None:
            self.unschedulable, self.running = set(), set()
            for key, obj in items.items():
                self.changed(key, None, obj)

        def changed(self, key: str, old: Any, new: Any) -> None:
            self.unschedulable.discard(key)
            self.running.discard(key)
            if new is None or (new["metadata"].get("labels") or {}).get("app") != APP:
                return
            status = new.get("status") or {}
            if status.get("phase") == "Running":
                self.running.add(key)
            elif any(c.get("reason") == "Unschedulable" for c in status.get("conditions") or []):
                self.unschedulable.add(key)

    api = config.new_client_from_config(kubeconfig)
    core, apps = client.CoreV1Api(api), client.AppsV1Api(api)
    counts = Counts()
    pod_informer = Informer("pods", core.list_pod_for_all_namespaces, counts).start()
    node_informer = Informer("nodes", core.list_node).start()
    pod_informer.wait_synced(30)
    node_informer.wait_synced(30)
    stop = threading.Event()

    def harness_poll() -> None:
        while not stop.wait(max(0.2, pods / 2500)):
            resp = core.list_pod_for_all_namespaces(label_selector=f"app={APP}", _preload_content=False)
            json.loads(resp.data)

    if poll:
        threading.Thread(target=harness_poll, daemon=True).start()

    def until(check: Any, what: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        with pod_informer.cond:
            if not pod_informer.cond.wait_for(check, max(0.0, deadline - time.monotonic())):
                raise TimeoutError(f"{what} not reached in {timeout:.0f} s")

    cx52 = next(t for t in kwok_catalogue() if t.name == SERVER_TYPE)
    alloc = cx52.allocatable
    per_node = min(alloc.cpu_m // POD_CPU_M, alloc.memory // POD_MEMORY, alloc.pods)
    quantities = {"cpu": f"{alloc.cpu_m}m", "memory": str(alloc.memory), "pods": str(alloc.pods)}

    def node(i: int) -> dict[str, Any]:
        name = kwok_node_name("demo", "general-kwok-cx52", f"bench-{i}", 1)
        labels = {
            "growth.autoscaling.dev/demo": "true",
            LABEL_GROUP: "general",
            LABEL_POOL: "general-kwok-cx52",
            LABEL_CLUSTER: "demo",
            LABEL_INSTANCE_TYPE: SERVER_TYPE,
            LABEL_ARCH: cx52.arch,
            LABEL_OS: "linux",
            LABEL_HOSTNAME: name,
            LABEL_REGION: KWOK_REGION,
            LABEL_ZONE: KWOK_ZONE,
            "type": "kwok",
        }
        return {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "labels": labels, "annotations": {KWOK_ANNOTATION: "fake"}},
            "spec": {"providerID": f"kwok://{name}", "taints": []},
            "status": {"capacity": quantities, "allocatable": quantities},
        }

    affinity = {"key": LABEL_ARCH, "operator": "In", "values": ["amd64"]}
    workload = deployment(
        APP,
        pods,
        cpu=f"{POD_CPU_M}m",
        memory="512Mi",
        nodeSelector={LABEL_OS: "linux"},
        affinity={
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": [affinity]}]
                }
            }
        },
    )
    out.send(("start", {}))
    out.recv()
    apps.create_namespaced_deployment("default", workload)
    until(lambda: len(counts.unschedulable) == pods, "every pod unschedulable", 60 + pods / 50)
    out.send(("burst", {}))
    out.recv()
    needed = math.ceil(pods / per_node)
    created = 0
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(8) as creators:  # the worker's activities create nodes concurrently
        while created < needed:
            wave = min(wave_nodes, needed - created)
            list(creators.map(lambda i: core.create_node(node(i)), range(created, created + wave)))
            created += wave
            if created < needed:
                time.sleep(wave_interval)
    until(lambda: len(counts.running) == pods, "every pod running", 120 + pods / 20)
    stop.set()
    usage = resource.getrusage(resource.RUSAGE_SELF)
    out.send(
        (
            "scale",
            {
                "nodes": created,
                "pods_per_node": per_node,
                "client_cpu_s": round(usage.ru_utime + usage.ru_stime, 1),
                "client_events": pod_informer.events + node_informer.events,
                "client_lists": pod_informer.lists + node_informer.lists,
                "nodes_seen": len(node_informer.items),
            },
        )
    )
    pod_informer.stop()
    node_informer.stop()
    out.close()
    # An informer's watch thread can still be blocked in a read here; ending the interpreter
    # around it aborted the process once (SIGABRT), after everything was measured and sent.
    os._exit(0)


# ---- this process: the simulated cluster, measured ----------------------------------------
def thread_cpu() -> dict[str, float]:
    """CPU-s per live thread group of this process (sim-<actor>, apiserver handlers, other)."""
    tick = os.sysconf("SC_CLK_TCK")
    out: dict[str, float] = {}
    for t in threading.enumerate():
        try:
            fields = Path(f"/proc/self/task/{t.native_id}/stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, TypeError):
            continue
        group = t.name if t.name.startswith("sim-") else "handlers" if "process_request" in t.name else "other"
        out[group] = out.get(group, 0.0) + (int(fields[11]) + int(fields[12])) / tick
    return out


def run(pods: int, wave_nodes: int, wave_interval: float, poll: bool) -> dict[str, Any]:
    tmp = Path(tempfile.mkdtemp(prefix="bench-sim-burst-"))
    ctx = multiprocessing.get_context("spawn")
    here, there = ctx.Pipe()
    try:
        with FakeCluster(node_ready_delay=2.0, data_dir=tmp / "sim", fsync=False) as cluster:
            kubeconfig = cluster.write_kubeconfig(tmp / "kubeconfig")
            proc = ctx.Process(target=_client, args=(str(kubeconfig), pods, wave_nodes, wave_interval, poll, there))
            proc.start()
            result: dict[str, Any] = {"pods": pods}
            marks: list[tuple[str, float, float, dict[str, float]]] = []
            while True:
                if not here.poll(3600):
                    raise TimeoutError("the client process went silent")
                phase, facts = here.recv()
                marks.append((phase, time.process_time(), time.perf_counter(), thread_cpu()))
                result.update(facts)
                if phase == "scale":
                    break
                here.send("go")
            proc.join(30)
            if proc.exitcode not in (0, None):
                raise RuntimeError(f"client process exited {proc.exitcode}")
        for (_, cpu0, wall0, threads0), (phase, cpu1, wall1, threads1) in zip(marks, marks[1:], strict=False):
            result[f"{phase}_cpu_s"] = round(cpu1 - cpu0, 1)
            result[f"{phase}_wall_s"] = round(wall1 - wall0, 1)
            result[f"{phase}_cpu_s_by_thread"] = {
                k: round(v - threads0.get(k, 0.0), 1)
                for k, v in sorted(threads1.items())
                if v - threads0.get(k, 0.0) >= 0.05
            }
        result["sim_cpu_s"] = round(marks[-1][1] - marks[0][1], 1)
        result["load_average"] = load_average()
        return result
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(prog="bench.sim_burst", description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,30000", help="comma-separated pod counts")
    parser.add_argument("--wave-nodes", type=int, default=50, help="nodes created per wave")
    parser.add_argument("--wave-interval", type=float, default=2.0, help="seconds between waves")
    parser.add_argument("--no-poll", dest="poll", action="store_false", help="no harness list of the pods")
    args = parser.parse_args()
    results = []
    for size in (int(s) for s in args.sizes.split(",")):
        r = run(size, args.wave_nodes, args.wave_interval, args.poll)
        results.append(r)
        print(
            f"{size} pods on {r['nodes']} nodes: sim CPU {r['sim_cpu_s']} s "
            f"(burst {r['burst_cpu_s']} s in {r['burst_wall_s']} s wall, scale {r['scale_cpu_s']} s in "
            f"{r['scale_wall_s']} s wall); by thread: burst {r['burst_cpu_s_by_thread']}, "
            f"scale {r['scale_cpu_s_by_thread']}; client CPU {r['client_cpu_s']} s; load {r['load_average']}",
            flush=True,
        )
    print(json.dumps(results[-1]))


if __name__ == "__main__":
    main()
