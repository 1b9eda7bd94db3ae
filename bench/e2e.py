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

from starters.demo import Demo, parse_args
from starters.kube import node_group
from starters.scenarios.burst import BurstScenario, max_nodes_for
from workflows.nodes.autoscaler import autoscaler_id

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


async def max_event_bytes(client: Client, workflow_id: str, first_run_id: str) -> int:
    """The largest history event of every run of a workflow (following continue-as-new): an
    upper bound of the largest payload that crossed its history."""
    largest = 0
    run_id: str | None = first_run_id
    while run_id:
        history = await client.get_workflow_handle(workflow_id, run_id=run_id).fetch_history()
        run_id = None
        for event in history.events:
            largest = max(largest, event.ByteSize())
            if event.HasField("workflow_execution_continued_as_new_event_attributes"):
                run_id = event.workflow_execution_continued_as_new_event_attributes.new_execution_run_id
    return largest


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
    demo.scenario = RoomyBurst(args)
    try:
        demo.start_processes()
        await demo.start_autoscaler()
        assert demo.client is not None and demo.handle is not None
        summary = await demo.scenario.run(demo)
        summary["max_payload_bytes"] = await max_event_bytes(
            demo.client, autoscaler_id("demo"), demo.handle.first_execution_run_id or ""
        )
        summary["insufficient_capacity_attempts"] = sum(
            results.get("InsufficientCapacity", 0) for results in summary["attempts"].values()
        )
        return {k: summary[k] for k in KEYS}
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
            f"p99 {last['decision_latency_p99_s']:.1f}s (aim < 15s), largest history event "
            f"{last['max_payload_bytes'] / 1024:.0f} KB (aim < 256 KB), "
            f"{last['insufficient_capacity_attempts']} InsufficientCapacity, wall {time.monotonic() - t0:.0f}s",
            flush=True,
        )
    print(json.dumps(last), flush=True)


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default=",".join(str(s) for s in SIZES))
    asyncio.run(main([int(s) for s in p.parse_args().sizes.split(",")]))
