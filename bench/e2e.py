"""`make bench-e2e`: the real stack (Temporal dev server, simulated cluster, worker) scaling up
for bursts of 1,000, 5,000 and 10,000 pending pods with enough pool room.

Prints one line per size; the last line is JSON for the largest size. Not a test: figures only.

python -m bench.e2e [--sizes 1000,5000,10000]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from pathlib import Path
from typing import Any

from temporalio.client import Client

from scaling.nodes.contracts import OBSERVE_CLUSTER, START_NODE_REQUESTS
from scaling.nodes.requests import NodeRequestStatus
from starters.demo import Demo, parse_args
from starters.kube import node_group
from starters.scenarios.burst import BurstScenario, max_nodes_for
from starters.scenarios.progress import PodWatch, percentile, request_start
from workflows.nodes.autoscaler import autoscaler_id
from workflows.nodes.request import NodeRequestWorkflow

SIZES = (1_000, 5_000, 10_000)
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
    run_id: str | None = first_run_id
    while run_id:
        history = await client.get_workflow_handle(workflow_id, run_id=run_id).fetch_history()
        run_id = None
        for e in history.events:
            largest = max(largest, e.ByteSize())
            at = e.event_time.ToDatetime().timestamp()
            if e.HasField("activity_task_scheduled_event_attributes"):
                attrs = e.activity_task_scheduled_event_attributes
                scheduled[e.event_id] = (attrs.activity_type.name, at)
                if attrs.activity_type.name == START_NODE_REQUESTS:  # the loop committed these starts
                    for r in json.loads(attrs.input.payloads[0].data)["requests"]:
                        initiated_by_id[r["id"]] = at
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
    facts: dict[str, Any] = {"max_payload_bytes": largest, "initiated_by_id": initiated_by_id}
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


async def all_request_starts(client: Client) -> dict[str, tuple[float, int]]:
    """Every NodeRequest of the run (the demo's status shows the last 50 and those in flight):
    its start (its first activation) and the pods it was made for, from its describe query."""
    ids = [w.id async for w in client.list_workflows("WorkflowType = 'NodeRequest'")]
    gate = asyncio.Semaphore(20)

    async def one(workflow_id: str) -> tuple[float, int]:
        async with gate:
            status = await client.get_workflow_handle(workflow_id).query(
                NodeRequestWorkflow.describe, result_type=NodeRequestStatus
            )
        return request_start(status)

    return dict(zip(ids, await asyncio.gather(*(one(i) for i in ids)), strict=True))


async def one_size(pods: int, workdir: Path) -> dict[str, Any]:
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
    try:
        demo.start_processes()
        await demo.start_autoscaler()
        assert demo.client is not None and demo.handle is not None
        watch = PodWatch(demo.api, f"app={scenario.app}")
        summary = await scenario.scale_up(demo, watch)
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
        initiated = summary.pop("initiated_by_id")
        decided = watch.decision_latencies((initiated[i], n) for i, (_, n) in starts.items() if i in initiated)
        summary["decided_latency_p50_s"] = percentile(decided, 0.50)
        summary["decided_latency_p99_s"] = percentile(decided, 0.99)
        # From the loop's commit to the request's first activation: the server's part.
        delays = [starts[i][0] - at for i, at in initiated.items() if i in starts]
        summary["child_start_s"] = round(sum(delays) / max(len(delays), 1), 2)
        summary["child_start_p99_s"] = percentile(delays, 0.99)
        summary["insufficient_capacity_attempts"] = sum(
            results.get("InsufficientCapacity", 0) for results in summary["attempts"].values()
        )
        return {k: summary[k] for k in (*KEYS, *EXTRA)}
    finally:
        demo.stop()


async def main(sizes: list[int]) -> None:
    last: dict[str, Any] = {}
    for pods in sizes:
        with tempfile.TemporaryDirectory(prefix="growth-bench-e2e-") as tmp:
            t0 = time.monotonic()
            last = await one_size(pods, Path(tmp))
        print(
            f"{pods:>6} pods: all running in {last['seconds_to_all_running']:.0f}s, "
            f"{last['nodes_created']} nodes, decision latency p50 {last['decision_latency_p50_s']:.1f}s "
            f"p99 {last['decision_latency_p99_s']:.1f}s (aim < 15s; start committed by the loop: p50 "
            f"{last['decided_latency_p50_s']:.1f}s p99 {last['decided_latency_p99_s']:.1f}s; child start "
            f"mean {last['child_start_s']:.1f}s p99 {last['child_start_p99_s']:.1f}s), largest history event "
            f"{last['max_payload_bytes'] / 1024:.0f} KB (aim < 256 KB), "
            f"{last['insufficient_capacity_attempts']} InsufficientCapacity, a loop takes "
            f"{last['loop_seconds_mean']:.1f}s on average (observing: {last['observe_cluster_run_s']:.1f}s, "
            f"waiting for a worker {last['observe_cluster_wait_s']:.1f}s), wall {time.monotonic() - t0:.0f}s",
            flush=True,
        )
    print(json.dumps(last), flush=True)


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default=",".join(str(s) for s in SIZES))
    asyncio.run(main([int(s) for s in p.parse_args().sizes.split(",")]))
