"""Benchmark: one worker serving many TidbClusterAutoScalers on the real stack (issue 21 item 6).

python -m bench.components_scale [--autoscalers 200] [--seconds 180]   (`make bench-components`)

The Temporal dev server, the simulated cluster with the sim's TiDB world (operator, fake
Prometheus, fake PD) and one growth worker process, started as `make demo SCENARIO=components`
starts them. N TidbClusters (TiKV 3 x 2 cores), `--per-namespace` to a namespace, each with a
TidbClusterAutoScaler (CPU 0.2-0.8, out/in intervals) and a ComponentAutoscaler workflow. Load:
every cluster at 50% of its TiKV quota; a third of them go hot (95%) for the first half, so they
scale out, and drop to 10% for the second half, so they scale back in. A real Prometheus, when
one is installed, scrapes the pods every `--scrape-interval` (5 s; the demo's 1 s) and the CPU
window is four scrapes; with `--metrics-source sim` it scrapes only the worker.

Figures:
- round duration p50/p99: per workflow from its history, a timer's firing (or the run's start)
  to the next timer started, so the wait for a workflow task under load counts;
- Prometheus queries per round, and per autoscaler per round, from the sim's request counts (or,
  with `--metrics-source prometheus`, the real Prometheus's own prometheus_http_requests_total);
- interval violations: per autoscaler and component, two change rounds (ScaledOut/ScaledIn
  Events on the object) closer than the later change's interval, counted without the workflow;
  `interval_violations_recorded` counts the same from the histories (when each change's write
  landed), which are the times the guard counts from;
- the machine's load average and the worker's CPU seconds beside them (the machine is shared),
  and CPU seconds per round begun (a timer's firing or the run's start);
- per activity (the writes; the reads are local activities, inside the workflow task), the wait
  for a worker slot and the run time, and the same for the workflow tasks.
The last line is JSON with `autoscalers`, `round_p99_s` and `interval_violations`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
from kubernetes import client
from kubernetes.client.rest import ApiException
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter

from bench import runtime
from scaling.components.contracts import CREATE_AUTO_CLUSTER, PATCH_REPLICAS
from scaling.components.state import ComponentAutoscalerInput, ComponentAutoscalerSettings
from scaling.components.trail import event_said
from starters import prometheus
from starters.components_demo import TASK_QUEUE, ComponentsDemo
from starters.history import decode_events
from starters.kube import kube_client
from starters.scenarios.components import G, V, _event_time, add_nodes, autoscaler, base_cluster, interval_violations
from workflows.components.autoscaler import ComponentAutoscalerWorkflow, workflow_id

AIM_ROUND_P99_S = 5.0
TIKV_QUOTA = 3 * 2.0  # base_cluster(): 3 TiKV x 2 cores
PROM_ROUTES = ("/api/v1/query", "/api/v1/query_range")


def cpu_window_s(scrape_interval: float) -> int:
    """The CPU query's window: four scrapes, as Prometheus advises for rate() (at least two)."""
    return max(1, round(4 * scrape_interval))


def percentile(xs: list[float], q: float) -> float:
    if not xs:
        return 0.0
    xs = sorted(xs)
    return xs[min(len(xs) - 1, max(0, round(q * (len(xs) - 1))))]


def cpu_seconds(pid: int) -> float:
    """User + system CPU of a process (Linux /proc), 0 when it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def round_durations(events: list[Any], since: datetime) -> list[float]:
    """From one run's history: each round, from its wake-up to the timer it sleeps on."""
    out: list[float] = []
    woke: datetime | None = None
    for ev in events:
        at = ev.event_time.ToDatetime(tzinfo=UTC)
        if ev.event_type in (EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED, EventType.EVENT_TYPE_TIMER_FIRED):
            woke = at
        elif ev.event_type == EventType.EVENT_TYPE_TIMER_STARTED and woke is not None:
            if woke >= since:
                out.append((at - woke).total_seconds())
            woke = None
    return out


# The writes a change is made of: a group's create, a replicas patch (activities).
CHANGE_WRITES = (CREATE_AUTO_CLUSTER, PATCH_REPLICAS)


def recorded_changes(events: list[Any]) -> list[tuple[datetime, str, str]]:
    """From one run's history: (when its write landed, component, reason) of each ScaledOut and
    ScaledIn change. The interval guard counts from the change's last replicas or group write
    (issue 20: `_written_at` in workflows/components/autoscaler.py), so these times are the
    guard's own: the completion of the write made since the change before, or, without one, of
    the Event's own write (an activity, or a local activity's marker). The API's Event times are
    later: when the Event was last written."""
    out: list[tuple[datetime, str, str]] = []
    landed: datetime | None = None
    for e in decode_events("", events):
        if e.name in CHANGE_WRITES and e.completed_at is not None:
            landed = e.completed_at
            continue
        said = event_said(e)
        if said is None or e.completed_at is None or said.get("reason") not in ("ScaledOut", "ScaledIn"):
            continue
        component = str(said.get("message") or "").split(" ", 1)[0]
        out.append(((landed or e.completed_at).replace(tzinfo=UTC), component, said["reason"]))
        landed = None
    return out


def wake_ups(events: list[Any], since: datetime) -> int:
    """Rounds begun in the window, finished or not: the run's start and each timer that fired."""
    kinds = (EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED, EventType.EVENT_TYPE_TIMER_FIRED)
    return sum(1 for ev in events if ev.event_type in kinds and ev.event_time.ToDatetime(tzinfo=UTC) >= since)


def activity_times(events: list[Any], since: datetime, out: dict[str, list[tuple[float, float]]]) -> None:
    """Per activity type: (wait for a worker slot, run) seconds, from scheduled/started/closed events."""
    scheduled: dict[int, tuple[str, datetime]] = {}
    started: dict[int, datetime] = {}
    task: dict[str, datetime] = {}  # the workflow task in progress: scheduled, started
    for ev in events:
        at = ev.event_time.ToDatetime(tzinfo=UTC)
        if ev.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED:
            task = {"scheduled": at}
        elif ev.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED:
            task["started"] = at
        elif ev.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED and len(task) == 2 and at >= since:
            out["(workflow task)"].append(
                ((task["started"] - task["scheduled"]).total_seconds(), (at - task["started"]).total_seconds())
            )
        elif ev.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            scheduled[ev.event_id] = (ev.activity_task_scheduled_event_attributes.activity_type.name, at)
        elif ev.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED:
            started[ev.activity_task_started_event_attributes.scheduled_event_id] = at
        elif ev.event_type in (EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED, EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED):
            attrs = (
                ev.activity_task_completed_event_attributes
                if ev.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED
                else ev.activity_task_failed_event_attributes
            )
            name, sched = scheduled.get(attrs.scheduled_event_id, ("", at))
            start = started.get(attrs.scheduled_event_id)
            if name and start is not None and sched >= since:
                out[name].append(((start - sched).total_seconds(), (at - start).total_seconds()))


def sim_process_cpu(procs: Any) -> dict[str, float]:
    return {p.name: cpu_seconds(p.popen.pid) for p in procs.procs}


class Bench:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.names = [(f"tidb-{i // args.per_namespace}", f"db{i}") for i in range(args.autoscalers)]
        self.hot = {key for i, key in enumerate(self.names) if i % 3 == 0}

    def create_objects(self, api: client.ApiClient) -> None:
        custom, core = client.CustomObjectsApi(api), client.CoreV1Api(api)
        for ns in sorted({ns for ns, _ in self.names}):
            try:
                core.create_namespace({"metadata": {"name": ns}})
            except ApiException as exc:
                if exc.status != 409:
                    raise
        a = self.args
        for ns, name in self.names:
            for plural, body in (
                ("tidbclusters", base_cluster(name)),
                ("tidbclusterautoscalers", autoscaler(name, name, out_s=a.scale_out_s, in_s=a.scale_in_s)),
            ):
                try:
                    custom.create_namespaced_custom_object(G, V, ns, plural, body)
                except ApiException as exc:
                    if exc.status != 409:
                        raise

    def load(self, hot: float) -> dict[str, Any]:
        return {
            "demand": {
                f"{ns}/{name}/tikv": TIKV_QUOTA * (hot if (ns, name) in self.hot else 0.5) for ns, name in self.names
            },
        }

    def violations(self, api: client.ApiClient) -> tuple[int, int]:
        """(interval violations, change Events) over every autoscaler, from its Events."""
        core = client.CoreV1Api(api)
        by_object: dict[tuple[str, str], list[tuple[datetime, str, str]]] = defaultdict(list)
        for ns in sorted({ns for ns, _ in self.names}):
            for ev in core.list_namespaced_event(ns).items:
                if ev.reason not in ("ScaledOut", "ScaledIn") or ev.involved_object.kind != "TidbClusterAutoScaler":
                    continue
                at = _event_time(ev)
                if at is not None:
                    component = (ev.message or "").split(" ", 1)[0]
                    by_object[(ns, ev.involved_object.name)].append((at, component, ev.reason))
        a = self.args
        total = sum(interval_violations(evs, a.scale_out_s, a.scale_in_s) for evs in by_object.values())
        return total, sum(len(evs) for evs in by_object.values())


async def queries_so_far(sim: httpx.AsyncClient, demo: ComponentsDemo) -> int:
    """Queries the metrics source has answered: the real Prometheus's own count, or the sim's."""
    if demo.prometheus_url is not None and demo.metrics_source != "sim":
        return await asyncio.to_thread(prometheus.queries_served, demo.prometheus_url)
    stats = (await sim.get("/sim/v1/stats")).json()
    return sum(stats.get(r, 0) for r in PROM_ROUTES)


async def run(args: argparse.Namespace) -> dict[str, Any]:
    bench = Bench(args)
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="growth-bench-components-"))
    demo = ComponentsDemo(
        argparse.Namespace(
            temporal_port=0,
            ui_port=0,
            metrics_port=0,
            workdir=str(workdir),
            headless=True,
            metrics_source=args.metrics_source,
            scrape_interval=f"{args.scrape_interval:g}s",
            components_settings={
                "prometheus_batch_s": args.prometheus_batch_s,
                "capacity_max_age_s": args.capacity_max_age_s,
                "cpu_window_s": cpu_window_s(args.scrape_interval),
            },
        )
    )
    api = None
    try:
        demo.start_processes()
        worker_pid = next(p.popen.pid for p in demo.procs.procs if p.name == "worker")
        api = kube_client(demo.kubeconfig)
        nodes = max(3, args.autoscalers * 22 // 120 + 2)  # 11 cores a cluster, room to double TiKV
        print(f"adding {nodes} 128-core fake nodes; creating {args.autoscalers} TidbClusters", flush=True)
        await asyncio.to_thread(add_nodes, api, nodes, "128", "512Gi", 120.0)
        await asyncio.to_thread(bench.create_objects, api)
        temporal = await Client.connect(f"127.0.0.1:{demo.temporal_port}", data_converter=pydantic_data_converter)
        async with httpx.AsyncClient(base_url=demo.control_url, timeout=60) as sim:
            (await sim.put("/sim/v1/load", json=bench.load(0.5))).raise_for_status()
            deadline = time.monotonic() + 300
            while True:
                found = (await sim.get("/sim/v1/instances")).json()["instances"]
                running = sum(1 for i in found if i["component"] == "tikv")
                if running >= 3 * args.autoscalers:
                    break
                if time.monotonic() > deadline:
                    raise TimeoutError(f"only {running} TiKV instances running")
                await asyncio.sleep(1)
            print(f"{running} TiKV instances running; starting {args.autoscalers} ComponentAutoscalers", flush=True)
            handles = []
            for ns, name in bench.names:
                settings = ComponentAutoscalerSettings(
                    namespace=ns,
                    name=name,
                    scan_interval_s=args.scan_interval,
                    iterations_per_run=10_000,  # one run per workflow over the bench: one history to read
                    activity_timeout_s=30,
                )
                handles.append(
                    await temporal.start_workflow(
                        ComponentAutoscalerWorkflow.run,
                        ComponentAutoscalerInput(settings=settings),
                        id=workflow_id(ns, name),
                        task_queue=TASK_QUEUE,
                    )
                )
            # Warm-up: every loop's first round (the start-up burst) is left out of the figures.
            await asyncio.sleep(args.scan_interval * 2)
            since = datetime.now(UTC)
            stats0 = await queries_so_far(sim, demo)
            cpu0, load0, procs0 = cpu_seconds(worker_pid), os.getloadavg(), sim_process_cpu(demo.procs)
            t0 = time.monotonic()
            print(f"a third go hot (95% of TiKV quota) for {args.seconds / 2:.0f} s", flush=True)
            (await sim.put("/sim/v1/load", json=bench.load(0.95))).raise_for_status()
            await asyncio.sleep(args.seconds / 2)
            print(f"load drops to 10% for {args.seconds / 2:.0f} s", flush=True)
            (await sim.put("/sim/v1/load", json=bench.load(0.1))).raise_for_status()
            await asyncio.sleep(args.seconds / 2)
            elapsed = time.monotonic() - t0
            stats1 = await queries_so_far(sim, demo)
            cpu1, load1, procs1 = cpu_seconds(worker_pid), os.getloadavg(), sim_process_cpu(demo.procs)
        durations: list[float] = []
        begun = recorded = 0
        activities: dict[str, list[tuple[float, float]]] = defaultdict(list)
        for h in handles:
            events = list((await h.fetch_history()).events)
            durations += round_durations(events, since)
            recorded += interval_violations(recorded_changes(events), args.scale_out_s, args.scale_in_s)
            begun += wake_ups(events, since)
            activity_times(events, since, activities)
        for h in handles:
            await h.terminate("bench done")
        violations, changes = await asyncio.to_thread(bench.violations, api)
    finally:
        if api is not None:
            api.close()
        demo.stop()
    queries = stats1 - stats0
    rounds = len(durations)
    stack_cpu = sum(procs1[k] - procs0.get(k, 0.0) for k in procs1)
    return {
        "autoscalers": args.autoscalers,
        "metrics_source": demo.metrics_source,
        "prometheus_batch_s": args.prometheus_batch_s,
        "capacity_max_age_s": args.capacity_max_age_s,
        "scrape_interval_s": args.scrape_interval,
        "cpu_window_s": cpu_window_s(args.scrape_interval),
        "namespaces": len({ns for ns, _ in bench.names}),
        "seconds": round(elapsed, 1),
        "rounds": rounds,
        "rounds_begun": begun,
        "stack_cpu_s_per_round": round(stack_cpu / max(1, begun), 3),
        "round_p50_s": round(percentile(durations, 0.5), 3),
        "round_p99_s": round(percentile(durations, 0.99), 3),
        "round_max_s": round(max(durations, default=0.0), 3),
        "prometheus_queries": queries,
        "queries_per_round": round(queries / max(1, rounds / args.autoscalers), 1),
        "queries_per_autoscaler_round": round(queries / max(1, rounds), 2),
        "change_events": changes,
        "interval_violations": violations,
        "interval_violations_recorded": recorded,
        "worker_cpu_s": round(cpu1 - cpu0, 1),
        "worker_cpu_s_per_round": round((cpu1 - cpu0) / max(1, begun), 4),
        "process_cpu_percent": {k: round(100 * (procs1[k] - procs0.get(k, 0.0)) / elapsed, 1) for k in procs1},
        "activity_wait_run_p99_s": {
            name: [round(percentile([w for w, _ in xs], 0.99), 2), round(percentile([r for _, r in xs], 0.99), 2)]
            for name, xs in sorted(activities.items())
        },
        "worker_cpu_percent": round(100 * (cpu1 - cpu0) / elapsed, 1),
        "loadavg_1m": [round(load0[0], 2), round(load1[0], 2)],
        "cores": os.cpu_count(),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench.components_scale", description=__doc__.splitlines()[0])
    parser.add_argument("--autoscalers", type=int, default=200)
    parser.add_argument("--per-namespace", type=int, default=10, help="TidbClusters to a namespace")
    parser.add_argument("--seconds", type=float, default=180.0, help="measured time: half hot, half cool")
    parser.add_argument("--scan-interval", type=float, default=10.0)
    parser.add_argument("--scale-out-s", type=int, default=20)
    parser.add_argument("--scale-in-s", type=int, default=30)
    parser.add_argument(
        "--prometheus-batch-s",
        type=float,
        default=5.0,
        help="the worker's components.prometheus_batch_s (0: every autoscaler queries for itself, as PD does)",
    )
    parser.add_argument(
        "--capacity-max-age-s",
        type=float,
        default=5.0,
        help="the worker's components.capacity_max_age_s (0: every round lists every pod and node)",
    )
    parser.add_argument(
        "--metrics-source",
        choices=["auto", "sim", "prometheus"],
        default=None,
        help="a real Prometheus or the sim's PromQL (default GROWTH_METRICS_SOURCE, else auto)",
    )
    parser.add_argument(
        "--scrape-interval",
        type=float,
        default=5.0,
        help="the real Prometheus's scrape interval in seconds (TidbMonitor's default is 15; the demo's 1 s over "
        "a thousand pods takes a core of a small machine); the CPU window is four of them",
    )
    parser.add_argument("--workdir", default=None)
    args = parser.parse_args(argv)
    result = runtime.run(run(args))
    print(
        f"{result['autoscalers']} autoscalers, {result['rounds']} rounds in {result['seconds']} s: "
        f"round p50 {result['round_p50_s']} s, p99 {result['round_p99_s']} s (aim < {AIM_ROUND_P99_S} s), "
        f"max {result['round_max_s']} s"
    )
    print(
        f"Prometheus ({result['metrics_source']}): {result['prometheus_queries']} queries, {result['queries_per_round']} per round of all "
        f"autoscalers, {result['queries_per_autoscaler_round']} per autoscaler round"
    )
    print(
        f"changes {result['change_events']}, interval violations {result['interval_violations']} (aim 0; "
        f"{result['interval_violations_recorded']} from the histories' times)"
    )
    print(
        f"worker CPU {result['worker_cpu_s']} s ({result['worker_cpu_percent']}% of a core); "
        f"load average {result['loadavg_1m'][0]} -> {result['loadavg_1m'][1]} on {result['cores']} cores"
    )
    print(f"CPU by process (% of a core): {result['process_cpu_percent']}")
    print(
        f"{result['rounds_begun']} rounds begun: {result['stack_cpu_s_per_round']} CPU-s a round over the whole "
        f"stack (Temporal, sim, worker), {result['worker_cpu_s_per_round']} in the worker"
    )
    for name, (wait, ran) in result["activity_wait_run_p99_s"].items():
        print(f"  {name}: p99 wait for a slot {wait} s, run {ran} s")
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
