"""`make bench-e2e`: the real stack (Temporal dev server, simulated cluster, worker) scaling up
for bursts of 1,000, 5,000, 10,000 and 30,000 pending pods with enough pool room, and the worker's
cost once the 10,000 pods run and nothing is pending (idle, over `--idle-s` seconds).

Prints one line per size; the last line is JSON for the largest size, with the idle figures.
Not a test: figures only.

python -m bench.e2e [--sizes 1000,5000,10000,30000] [--idle-s 300]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from temporalio.client import Client, WorkflowQueryFailedError
from temporalio.service import RPCError

from bench import runtime
from bench.machine import load_average
from scaling.nodes.contracts import CREATE_NODE, OBSERVE_CLUSTER, START_NODE_REQUESTS
from scaling.nodes.scale_up.requests import (
    NODE_REQUEST_BATCH_WORKFLOW,
    NODE_REQUEST_WORKFLOW,
    NodeRequestBatchStatus,
    NodeRequestStatus,
    split_request_id,
)
from starters.demo import Demo, parse_args
from starters.kube import node_group
from starters.metrics import Sample, fetch, value
from starters.scenarios.burst import BurstScenario, max_nodes_for
from starters.scenarios.progress import PodWatch, percentile, request_start
from workflows.nodes.autoscaler import autoscaler_id

LOOPS = "growth_loop_duration_seconds_count"

SIZES = (1_000, 5_000, 10_000, 30_000)
IDLE_SIZE = 10_000  # the size whose run then stays idle and is measured
KEYS = (
    "pods",
    "pods_running",
    "nodes_created",
    "seconds_to_all_running",
    "decision_latency_p50_s",
    "decision_latency_p99_s",
    "max_payload_bytes",
    "insufficient_capacity_attempts",
    "requests",
    "worker_cpu_s_per_loop",
)

# Beyond the keys: where the time goes.
EXTRA = (
    "loop_seconds_mean",
    "observe_cluster_wait_s",
    "observe_cluster_run_s",
    "child_start_s",
    "workflow_task_s",
    "workflow_task_s_total",
    "activities",
    "pods_with_a_request",
    "decided_latency_p50_s",
    "decided_latency_p99_s",
    "child_start_p99_s",
    "start_call_p50_s",
    "start_call_p99_s",
    "first_task_wait_p50_s",
    "first_task_wait_p99_s",
    "request_first_task_wait_p50_s",
    "request_first_task_wait_p99_s",
    "request_later_task_wait_p50_s",
    "request_later_task_wait_p99_s",
    "request_tasks_per_request",
    "request_workflows",
    "create_started_p50_s",
    "create_started_p99_s",
    "pod_running_p50_s",
    "pod_running_p99_s",
    "loop_task_wait_p99_s",
    "loops",
    "worker_cpu_s",
    "worker_max_rss_mb",
    "cpu_s_by_process",
    "sdk",
    "load_average",
)
IDLE = (
    "idle_worker_cpu_percent",
    "idle_seconds",
    "idle_loops",
    "idle_worker_cpu_s_per_loop",
    "idle_max_event_bytes",
    "idle_max_event",
    "idle_history_bytes_per_loop",
    "idle_history_events_per_loop",
    "idle_history_bytes_per_loop_by_event",
    "idle_load_average",
)


class RoomyBurst(BurstScenario):
    """The demo's burst with room in every pool: no capacity limit at the provider, a group limit
    that follows the burst, and types big enough that nodes number hundreds, not thousands."""

    name = "bench-e2e"

    def providers(self, workdir: Path, extra: dict[str, Any]) -> dict[str, dict[str, Any]]:
        return {"kwok": {}}

    def node_groups(self) -> list[dict[str, Any]]:
        return [
            node_group(
                "general",
                [
                    {"provider": "kwok", "serverType": ["cx52"], "priority": 100},
                    {"provider": "kwok", "serverType": ["cx42"], "priority": 50},
                ],
                labels={"growth.autoscaling.dev/demo": "true"},
                maxNodes=max_nodes_for(self.args.pods),
            )
        ]


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process so far (/proc/<pid>/stat, utime and stime)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def max_rss_mb(pid: int) -> float:
    """The process's peak resident memory so far (/proc/<pid>/status VmHWM), in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return round(int(line.split()[1]) / 1024, 1)
    return 0.0


# The SDK's own figures over the burst: whether finished requests crowded the sticky cache (a
# miss replays the whole history) and how long workflow tasks waited, sticky vs shared queue.
SDK_COUNTERS = ("sticky_cache_hit", "sticky_cache_miss", "sticky_cache_total_forced_eviction")
SDK_HISTOGRAMS = ("workflow_task_schedule_to_start_latency", "workflow_task_execution_latency")


def sdk_figures(samples: list[Sample]) -> dict[str, float]:
    out: dict[str, float] = {}
    for name in SDK_COUNTERS:
        out[name] = value(samples, f"temporal_{name}")
    for name in SDK_HISTOGRAMS:
        # Per task queue as the SDK labels it (the shared queue by its name, the sticky one by
        # the worker's own).
        sums: dict[str, list[float]] = {}
        for n, labels, v in samples:
            if n in (f"temporal_{name}_sum", f"temporal_{name}_count"):
                sums.setdefault(labels.get("task_queue", "?"), [0.0, 0.0])[n.endswith("_count")] += v
        for queue, (total, count) in sums.items():
            out[f"{name}_{queue[:24]}_count"] = int(count)
            out[f"{name}_{queue[:24]}_mean_s"] = round(total / count, 3) if count else 0.0
    return out


async def idle_history(client: Client, workflow_id: str, since: float) -> dict[str, Any]:
    """The history events written after `since` (epoch seconds), over the current run and the runs
    before it that reach back that far: the largest (its size and what it is: the event type, and
    the activity's name for an activity's events) and the bytes and events in all."""
    largest, what, total, count, run_id = 0, "", 0, 0, None
    by_what: dict[str, int] = {}
    while True:
        history = await client.get_workflow_handle(workflow_id, run_id=run_id).fetch_history()
        oldest = None
        activity_of: dict[int, str] = {}  # scheduled event id -> activity type
        for e in history.events:
            if e.HasField("activity_task_scheduled_event_attributes"):
                activity_of[e.event_id] = e.activity_task_scheduled_event_attributes.activity_type.name
            at = e.event_time.ToDatetime().timestamp()
            oldest = at if oldest is None else min(oldest, at)
            if at < since:
                continue
            size = e.ByteSize()
            total, count = total + size, count + 1
            attrs = e.WhichOneof("attributes") or ""
            sid = getattr(getattr(e, attrs, None), "scheduled_event_id", 0) or e.event_id
            kind = f"{attrs.removesuffix('_event_attributes')} {activity_of.get(sid, '')}".strip()
            by_what[kind] = by_what.get(kind, 0) + size
            if size > largest:
                largest, what = size, kind
        first = history.events[0] if history.events else None
        attrs = first.workflow_execution_started_event_attributes if first is not None else None
        if oldest is None or oldest < since or attrs is None or not attrs.continued_execution_run_id:
            top = dict(sorted(by_what.items(), key=lambda kv: -kv[1])[:5])
            return {"largest": largest, "largest_event": what, "bytes": total, "events": count, "by_event": top}
        run_id = attrs.continued_execution_run_id


def task_waits(events: Any) -> list[float]:
    """Seconds each workflow task of a history waited for a worker (scheduled to started)."""
    waits, scheduled = [], None
    for e in events:
        at = e.event_time.ToDatetime().timestamp()
        if e.HasField("workflow_task_scheduled_event_attributes"):
            scheduled = at
        elif e.HasField("workflow_task_started_event_attributes") and scheduled is not None:
            waits.append(at - scheduled)
            scheduled = None
    return waits


REQUEST_SAMPLE = 200


def request_task_waits(histories: dict[str, Any]) -> dict[str, float]:
    """How long the requests' workflow tasks waited for a worker, from a sample of their
    histories (a NodeRequest's or a batch's): the first task (on the shared queue) apart from the
    later ones (sticky)."""
    ids = sorted(histories)
    step = max(len(ids) // REQUEST_SAMPLE, 1)
    waits = [task_waits(histories[i].events) for i in ids[::step]]
    first = [w[0] for w in waits if w]
    later = [x for w in waits for x in w[1:]]
    return {
        "request_first_task_wait_p50_s": percentile(first, 0.5),
        "request_first_task_wait_p99_s": percentile(first, 0.99),
        "request_later_task_wait_p50_s": percentile(later, 0.5),
        "request_later_task_wait_p99_s": percentile(later, 0.99),
        "request_tasks_per_request": round(sum(len(w) for w in waits) / max(len(waits), 1), 2),
    }


def _request_ids(value: Any) -> list[str]:
    """Every `request_id` in an activity's input (a create names the request or batch member it is for)."""
    if isinstance(value, dict):
        own = [value["request_id"]] if isinstance(value.get("request_id"), str) else []
        return own + [i for v in value.values() for i in _request_ids(v)]
    if isinstance(value, list):
        return [i for v in value for i in _request_ids(v)]
    return []


def create_starts(events: Any) -> dict[str, float]:
    """When each request (or batch member) had its first `create_node` picked up by a worker (its
    ActivityTaskStarted), from the request's or batch's history: a batch's first activation
    cannot hide the queueing of its members' creates after it."""
    scheduled: dict[int, list[str]] = {}  # scheduled event id -> the requests it creates for
    out: dict[str, float] = {}
    for e in events:
        if e.HasField("activity_task_scheduled_event_attributes"):
            attrs = e.activity_task_scheduled_event_attributes
            if attrs.activity_type.name == CREATE_NODE:
                scheduled[e.event_id] = _request_ids(json.loads(attrs.input.payloads[0].data))
        elif e.HasField("activity_task_started_event_attributes"):
            at = e.event_time.ToDatetime().timestamp()
            for rid in scheduled.get(e.activity_task_started_event_attributes.scheduled_event_id, []):
                out.setdefault(rid, at)
    return out


async def request_histories(client: Client, ids: list[str]) -> dict[str, Any]:
    """Every request's or batch's history (workflow id -> history), ten at a time."""
    gate = asyncio.Semaphore(10)

    async def one(workflow_id: str) -> Any:
        async with gate:
            return await client.get_workflow_handle(workflow_id).fetch_history()

    return dict(zip(ids, await asyncio.gather(*(one(i) for i in ids)), strict=True))


def of_request(by_workflow: dict[str, float], request_id: str) -> float | None:
    """A request's figure, or its batch's for a member id (`<batch id>#<index>`)."""
    if request_id in by_workflow:
        return by_workflow[request_id]
    return by_workflow.get(split_request_id(request_id)[0])


async def history_facts(client: Client, workflow_id: str, first_run_id: str) -> dict[str, Any]:
    """From every run of the autoscaler (following continue-as-new): the largest history event
    (an upper bound of the largest payload that crossed it), and where a loop's time goes: the
    mean seconds an activity waited for a worker (scheduled to started) and ran (started to
    completed), per activity type."""
    largest = 0
    scheduled: dict[int, tuple[str, float]] = {}  # event id -> (activity type, when)
    started: dict[int, float] = {}  # scheduled event id -> when
    waits: dict[str, list[float]] = {}
    runs: dict[str, list[float]] = {}
    initiated_by_id: dict[str, float] = {}  # request id -> when the loop committed its start
    task_runs: list[float] = []
    task_started: float | None = None
    loop_waits: list[float] = []
    run_id: str | None = first_run_id
    while run_id:
        history = await client.get_workflow_handle(workflow_id, run_id=run_id).fetch_history()
        loop_waits += task_waits(history.events)
        run_id = None
        for e in history.events:
            largest = max(largest, e.ByteSize())
            at = e.event_time.ToDatetime().timestamp()
            if e.HasField("activity_task_scheduled_event_attributes"):
                attrs = e.activity_task_scheduled_event_attributes
                scheduled[e.event_id] = (attrs.activity_type.name, at)
                if attrs.activity_type.name == START_NODE_REQUESTS:  # the loop committed these starts
                    started_now = json.loads(attrs.input.payloads[0].data)
                    for r in [*started_now.get("requests", []), *started_now.get("batches", [])]:
                        initiated_by_id[r["id"]] = at  # a NodeRequest's id, or a batch's
            elif e.HasField("activity_task_started_event_attributes"):
                sid = e.activity_task_started_event_attributes.scheduled_event_id
                started[sid] = at
                name, when = scheduled[sid]
                waits.setdefault(name, []).append(at - when)
            elif e.HasField("activity_task_completed_event_attributes"):
                sid = e.activity_task_completed_event_attributes.scheduled_event_id
                if sid in started:
                    runs.setdefault(scheduled[sid][0], []).append(at - started[sid])
            elif e.HasField("start_child_workflow_execution_initiated_event_attributes"):  # runs before the patch
                initiated_by_id[e.start_child_workflow_execution_initiated_event_attributes.workflow_id] = at
            elif e.HasField("workflow_task_started_event_attributes"):
                task_started = at
            elif e.HasField("workflow_task_completed_event_attributes") and task_started is not None:
                task_runs.append(at - task_started)
            elif e.HasField("workflow_execution_continued_as_new_event_attributes"):
                run_id = e.workflow_execution_continued_as_new_event_attributes.new_execution_run_id
    facts: dict[str, Any] = {
        "max_payload_bytes": largest,
        "initiated_by_id": initiated_by_id,
        "loop_task_wait_p99_s": percentile(loop_waits, 0.99),
    }
    for name in (OBSERVE_CLUSTER,):
        facts[f"{name}_wait_s"] = round(sum(waits.get(name, [0])) / max(len(waits.get(name, [])), 1), 2)
        facts[f"{name}_run_s"] = round(sum(runs.get(name, [0])) / max(len(runs.get(name, [])), 1), 2)
    facts["workflow_task_s"] = round(sum(task_runs) / max(len(task_runs), 1), 3)
    facts["workflow_task_s_total"] = round(sum(task_runs), 1)
    facts["activities"] = {  # type: [count, mean wait, mean run]
        name: [
            len(runs.get(name, [])),
            round(sum(w) / len(w), 2),
            round(sum(runs.get(name, [0])) / max(len(runs.get(name, [])), 1), 2),
        ]
        for name, w in waits.items()
    }
    return facts


QUERY_ATTEMPTS = 5
# When the server created each request (its WorkflowExecutionStarted): splits a child's start
# into the start call and the wait of its first workflow task.
EXECUTION_STARTS: dict[str, float] = {}


async def all_request_starts(client: Client) -> dict[str, tuple[float, int]]:
    """Every node request of the run (the demo's status shows the last 50 and those in flight):
    per request id (a NodeRequest's, or a batch member's `<batch id>#<index>`) its start (its
    first activation; a member's is its batch's) and the pods it was made for, from the
    workflow's describe query."""
    kinds = f"WorkflowType = '{NODE_REQUEST_WORKFLOW}' OR WorkflowType = '{NODE_REQUEST_BATCH_WORKFLOW}'"
    listed = [w async for w in client.list_workflows(kinds)]
    EXECUTION_STARTS.clear()
    EXECUTION_STARTS.update({w.id: w.start_time.timestamp() for w in listed})
    gate = asyncio.Semaphore(20)

    async def one(workflow_id: str, kind: str) -> list[NodeRequestStatus]:
        # A query on a finished request replays its history in the worker; on a starved machine
        # that replay can outlast the SDK's 2 s deadlock detector, and the query fails (a 30,000-pod
        # run at load 15 lost its figures that way). The history is still there: ask again.
        batch = kind == NODE_REQUEST_BATCH_WORKFLOW
        for attempt in range(QUERY_ATTEMPTS):
            try:
                async with gate:
                    status = await client.get_workflow_handle(workflow_id).query(
                        "describe", result_type=NodeRequestBatchStatus if batch else NodeRequestStatus
                    )
                return status.members if isinstance(status, NodeRequestBatchStatus) else [status]
            except (WorkflowQueryFailedError, RPCError):
                if attempt == QUERY_ATTEMPTS - 1:
                    raise
                await asyncio.sleep(1 + attempt)
        raise AssertionError("unreachable")

    answers = await asyncio.gather(*(one(w.id, w.workflow_type) for w in listed))
    return {m.id: request_start(m) for members in answers for m in members if m.started_at is not None}


def tolerate_status_timeouts(demo: Demo) -> None:
    """The burst follows the loop through its status query, which the workflow answers between
    its workflow tasks: on a starved machine one timed out and ended a 30,000-pod run. The bench
    keeps the last answer then and asks again at the next poll (the pods are followed through
    the API server either way)."""
    ask = demo.status
    last: list[Any] = []

    async def status() -> Any:
        try:
            last[:] = [await ask()]
        except RPCError as err:
            if not last:
                raise
            print(f"status query failed ({err}); polling on with the last answer", flush=True)
        return last[0]

    demo.status = status  # type: ignore[method-assign]


async def one_size(pods: int, workdir: Path, idle_s: float = 0.0) -> dict[str, Any]:
    args = parse_args(
        [
            "--headless",
            "--pods",
            str(pods),
            "--temporal-port",
            "0",
            "--ui-port",
            "0",
            "--workdir",
            str(workdir),
            "--timeout",
            str(max(600.0, pods * 0.3)),
        ]
    )
    demo = Demo(args)
    demo.scenario = scenario = RoomyBurst(args)
    tolerate_status_timeouts(demo)
    try:
        demo.start_processes()
        await demo.start_autoscaler()
        assert demo.client is not None and demo.handle is not None
        watch = PodWatch(demo.api, f"app={scenario.app}")
        worker = next(p for p in demo.procs.procs if p.name == "worker").popen.pid
        cpu0, loops0 = cpu_seconds(worker), (await asyncio.to_thread(demo.metrics)).get(LOOPS, 0)
        procs0 = {p.name: cpu_seconds(p.popen.pid) for p in demo.procs.procs}
        summary = await scenario.scale_up(demo, watch)
        # Who used the 2 cores over the burst: the worker, the dev server, the simulated cluster.
        summary["cpu_s_by_process"] = {
            p.name: round(cpu_seconds(p.popen.pid) - procs0.get(p.name, 0.0), 1) for p in demo.procs.procs
        }
        cpu1, loops1 = cpu_seconds(worker), (await asyncio.to_thread(demo.metrics)).get(LOOPS, 0)
        summary["loops"] = int(loops1 - loops0)
        summary["worker_cpu_s"] = round(cpu1 - cpu0, 1)
        summary["worker_cpu_s_per_loop"] = round((cpu1 - cpu0) / max(loops1 - loops0, 1), 3)
        summary["load_average"] = load_average()
        summary["worker_max_rss_mb"] = max_rss_mb(worker)
        summary["sdk"] = sdk_figures(await asyncio.to_thread(fetch, f"http://{demo.metrics_address}/metrics"))
        starts = await all_request_starts(demo.client)
        latencies = watch.decision_latencies(starts.values())
        summary["decision_latency_p50_s"] = percentile(latencies, 0.50)
        summary["decision_latency_p99_s"] = percentile(latencies, 0.99)
        summary["pods_with_a_request"] = len(latencies)
        metrics = await asyncio.to_thread(demo.metrics)
        loops = metrics.get("growth_loop_duration_seconds_count", 0)
        summary["loop_seconds_mean"] = (
            round(metrics.get("growth_loop_duration_seconds_sum", 0) / loops, 2) if loops else 0
        )
        summary.update(
            await history_facts(demo.client, autoscaler_id("demo"), demo.handle.first_execution_run_id or "")
        )
        # The same matching, up to when the loop committed each start (its initiated event):
        # what part of the latency is the loop's, and what part the server's start of the child.
        # A batch member's figures are its batch's: the loop commits, and the server starts, the batch.
        initiated = summary.pop("initiated_by_id")
        committed = {i: of_request(initiated, i) for i in starts}
        decided = watch.decision_latencies((at, n) for i, (_, n) in starts.items() if (at := committed[i]) is not None)
        summary["decided_latency_p50_s"] = percentile(decided, 0.50)
        summary["decided_latency_p99_s"] = percentile(decided, 0.99)
        # From the loop's commit to the request's first activation: the server's part (per member).
        delays = [at - c for i, (at, _) in starts.items() if (c := committed[i]) is not None]
        summary["child_start_s"] = round(sum(delays) / max(len(delays), 1), 2)
        summary["child_start_p99_s"] = percentile(delays, 0.99)
        created = [EXECUTION_STARTS[i] - at for i, at in initiated.items() if i in EXECUTION_STARTS]
        first_task = [at - x for i, (at, _) in starts.items() if (x := of_request(EXECUTION_STARTS, i)) is not None]
        summary["start_call_p50_s"], summary["start_call_p99_s"] = percentile(created, 0.5), percentile(created, 0.99)
        summary["first_task_wait_p50_s"] = percentile(first_task, 0.5)
        summary["first_task_wait_p99_s"] = percentile(first_task, 0.99)
        histories = await request_histories(demo.client, sorted(EXECUTION_STARTS))
        summary["request_workflows"] = len(histories)
        summary.update(request_task_waits(histories))
        # From a pod's creation to the start of its node's create: what the loop, the batch's start
        # and the batch's own queueing together cost, matched first come, first served.
        create_at = {rid: at for h in histories.values() for rid, at in create_starts(h.events).items()}
        to_create = watch.creation_latencies((create_at[i], n) for i, (_, n) in starts.items() if i in create_at)
        summary["create_started_p50_s"] = percentile(to_create, 0.5)
        summary["create_started_p99_s"] = percentile(to_create, 0.99)
        # Every pod, also those no request was matched to (they fit room already planned).
        running = watch.running_latencies()
        summary["pod_running_p50_s"], summary["pod_running_p99_s"] = percentile(running, 0.5), percentile(running, 0.99)
        summary["insufficient_capacity_attempts"] = sum(
            results.get("InsufficientCapacity", 0) for results in summary["attempts"].values()
        )
        if idle_s > 0:
            summary.update(await idle(demo, worker, idle_s))
        return {k: summary[k] for k in (*KEYS, *EXTRA, *IDLE) if k in summary}
    finally:
        demo.stop()


async def idle(demo: Demo, worker: int, seconds: float) -> dict[str, Any]:
    """The worker's CPU while every pod runs and nothing is pending, and the largest history
    event written meanwhile (what each idle loop costs the history)."""
    assert demo.client is not None
    since = time.time()
    cpu0, loops0, t0 = cpu_seconds(worker), (await asyncio.to_thread(demo.metrics)).get(LOOPS, 0), time.monotonic()
    await asyncio.sleep(seconds)  # a measuring window, not a wait for a condition
    cpu1, loops1, t1 = cpu_seconds(worker), (await asyncio.to_thread(demo.metrics)).get(LOOPS, 0), time.monotonic()
    loops = int(loops1 - loops0)
    history = await idle_history(demo.client, autoscaler_id("demo"), since)
    return {
        "idle_worker_cpu_percent": round(100 * (cpu1 - cpu0) / (t1 - t0), 2),
        "idle_seconds": round(t1 - t0),
        "idle_loops": loops,
        "idle_worker_cpu_s_per_loop": round((cpu1 - cpu0) / max(loops, 1), 3),
        "idle_max_event_bytes": history["largest"],
        "idle_max_event": history["largest_event"],
        "idle_history_bytes_per_loop": round(history["bytes"] / max(loops, 1)),
        "idle_history_events_per_loop": round(history["events"] / max(loops, 1), 1),
        # Where the history's bytes went: the five largest event kinds, bytes per loop.
        "idle_history_bytes_per_loop_by_event": {k: round(v / max(loops, 1)) for k, v in history["by_event"].items()},
        "idle_load_average": load_average(),
    }


def latency_aim_s(pods: int) -> float:
    """Issue 21's decision-latency aim on 2 cores: p99 < 6 s up to 10,000 pods, < 15 s at 30,000."""
    return 6.0 if pods <= 10_000 else 15.0


async def main(sizes: list[int], idle_s: float, idle_size: int = IDLE_SIZE) -> None:
    last: dict[str, Any] = {}
    idle_figures: dict[str, Any] = {}
    for pods in sizes:
        with tempfile.TemporaryDirectory(prefix="growth-bench-e2e-") as tmp:
            t0 = time.monotonic()
            last = await one_size(pods, Path(tmp), idle_s if pods == idle_size else 0.0)
        print(
            f"{pods:>6} pods: all running in {last['seconds_to_all_running']:.0f}s, "
            f"{last['nodes_created']} nodes, decision latency p50 {last['decision_latency_p50_s']:.1f}s "
            f"p99 {last['decision_latency_p99_s']:.1f}s (aim < {latency_aim_s(pods):.0f}s; start committed by the loop: p50 "
            f"{last['decided_latency_p50_s']:.1f}s p99 {last['decided_latency_p99_s']:.1f}s; child start "
            f"mean {last['child_start_s']:.1f}s p99 {last['child_start_p99_s']:.1f}s; first task wait p99 "
            f"{last['first_task_wait_p99_s']:.1f}s; pod created to its node's create started p50 "
            f"{last['create_started_p50_s']:.1f}s p99 {last['create_started_p99_s']:.1f}s; pod created to "
            f"running, every pod: p50 {last['pod_running_p50_s']:.1f}s p99 {last['pod_running_p99_s']:.1f}s; "
            f"{last['request_workflows']} request workflows), largest history event "
            f"{last['max_payload_bytes'] / 1024:.0f} KB (aim < 256 KB), "
            f"{last['insufficient_capacity_attempts']} InsufficientCapacity, a loop takes "
            f"{last['loop_seconds_mean']:.1f}s on average (observing: {last['observe_cluster_run_s']:.1f}s, "
            f"waiting for a worker {last['observe_cluster_wait_s']:.1f}s), worker CPU {last['worker_cpu_s_per_loop']:.2f}s "
            f"per loop over {last['loops']} loops, load average {last['load_average']}, wall {time.monotonic() - t0:.0f}s",
            flush=True,
        )
        if "idle_worker_cpu_percent" in last:
            idle_figures = {k: last[k] for k in IDLE}
            print(
                f"{pods:>6} pods running, nothing pending: the worker used {last['idle_worker_cpu_percent']:.1f}% of a "
                f"core over {last['idle_seconds']}s ({last['idle_loops']} loops, {last['idle_worker_cpu_s_per_loop']:.3f} CPU-s "
                f"each; aim < 5%), load average {last['idle_load_average']}; largest history event meanwhile "
                f"{last['idle_max_event_bytes'] / 1024:.1f} KB ({last['idle_max_event']}), "
                f"{last['idle_history_bytes_per_loop'] / 1024:.1f} KB and {last['idle_history_events_per_loop']} "
                "events of history per loop",
                flush=True,
            )
    print(json.dumps({**last, **idle_figures}), flush=True)


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default=",".join(str(s) for s in SIZES))
    p.add_argument("--idle-s", type=float, default=300.0, help=f"seconds measured idle after the {IDLE_SIZE}-pod burst")
    p.add_argument("--idle-size", type=int, default=IDLE_SIZE, help="the size whose run is then measured idle")
    a = p.parse_args()
    runtime.run(main([int(s) for s in a.sizes.split(",")], a.idle_s, a.idle_size))
