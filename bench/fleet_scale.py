"""The fleet loop at fleet size: one region, many registered data-plane clusters, a burst of
instance creations. Real Temporal dev server and worker with the real workflows; the clusters are
registered (dataplane-cluster-configuration), so OCM is never called, and each cluster's agent
reports Ready with its capacity through the cluster's `report_agent_status` update (the update
the agent API forwards to; no HTTP hop here).

python -m bench.fleet_scale [--clusters N] [--prefill N] [--burst N] [--units-per-cluster N]

Measured: seconds from an instance's create request to its placement (p50/p99) during the
burst of concurrent creations, seconds until the region has placed everything (settle), the
largest event of the region's history and of its instance index shards' (scaling.fleet.index),
and the machine's load average beside them. Last line: JSON with clusters, instances,
placement_p50_s, placement_p99_s, settle_s, max_payload_bytes. The defaults are issue 21's size
(1,000 clusters, 20,000 instances: about 17 minutes on 2 loaded cores).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import time
import uuid
from pathlib import Path

from temporalio.client import Client, WorkflowHandle, WorkflowUpdateRPCTimeoutOrCancelledError
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.service import RPCError, RPCStatusCode
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from activities.fleet.decisions import DECISIONS
from activities.updates import execute_update
from bench import runtime
from scaling.fleet import contracts
from scaling.fleet.config import load_fleet_config_text
from scaling.fleet.contracts import AgentStatusReport, CreateInstanceRequest, InstancePlacement
from scaling.fleet.index import shard_workflow_id
from scaling.fleet.region import FleetAutoscalerInput, FleetAutoscalerSettings, RegionStatus
from starters.fleet import find_instance, register_listed
from workflows.fleet.autoscaler import FleetAutoscalerWorkflow
from workflows.fleet.cluster import DataPlaneClusterWorkflow
from workflows.fleet.registry import WORKFLOWS
from workflows.sandbox import workflow_runner

AIM_P99_S = 10.0
TEMPORAL = Path(__file__).resolve().parent.parent / ".venv" / "bin" / "temporal"
CONCURRENCY = 16  # agent reports (and registrations) in flight at once (one per cluster workflow)
# Creations in flight at once. Every creation is an update of the one region workflow, and the
# server admits 10 in-flight updates per workflow unless history.maxInFlightUpdates says more: the
# bench raises it (a dynamic-config value a production server sets the same way), because a
# creation now waits for its index shard's answer and the region batches what is in flight.
CREATE_CONCURRENCY = 64
SERVER_ARGS = ["--dynamic-config-value", f"history.maxInFlightUpdates={CREATE_CONCURRENCY + 16}"]


async def patiently(call) -> object:  # type: ignore[no-untyped-def]
    """An update sent again when the loaded server times out the RPC (the handlers are idempotent)."""
    for attempt in range(10):
        try:
            return await call()
        except (WorkflowUpdateRPCTimeoutOrCancelledError, RPCError):
            if attempt == 9:
                raise
            await asyncio.sleep(1.0 + attempt)
    return None


def config(clusters: int, limit: int) -> str:
    """The region with its clusters listed as dataplane-cluster-configuration.yaml lists them. They
    are registered as `growth fleet start` registers them: `register_clusters` updates of 100, not
    the region's input. (One register_cluster update per cluster made a round over every cluster
    per registration: at 1,000 the region's workflow task outgrew the 2 s deadlock detector.)"""
    listed = "\n".join(
        f"  - {{cluster_id: bench-{i:05d}, cloud_provider: aws, region: us-east-1, schedulable: true,"
        f" kafka_instance_limit: -1, supported_instance_type: standard}}"
        for i in range(clusters)
    )
    return f"""
supported_providers:
  - name: aws
    regions:
      - name: us-east-1
        supported_instance_type:
          standard: {{limit: {limit}}}
dynamic_scaling:
  enable_dynamic_data_plane_scale_up: false
  enable_dynamic_data_plane_scale_down: false
supported_instance_types:
  - id: standard
    sizes: [{{id: x1, capacity_consumed: 1}}]
clusters:
{listed}
"""


async def until(check, timeout_s: float, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while not await check():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} not reached in {timeout_s:.0f}s")
        await asyncio.sleep(0.5)


async def status(handle: WorkflowHandle) -> RegionStatus:
    return await handle.query(FleetAutoscalerWorkflow.status)


async def agents_report_ready(client: Client, ids: list[str], units: int) -> None:
    report = AgentStatusReport.model_validate(
        {"conditions": [{"type": "Ready", "status": "True"}], "capacity": {"standard": {"maxUnits": units}}}
    )
    sem = asyncio.Semaphore(CONCURRENCY)

    async def one(cid: str) -> None:
        async with sem:
            h = client.get_workflow_handle(contracts.cluster_workflow_id(cid))
            await patiently(lambda: execute_update(h, DataPlaneClusterWorkflow.report_agent_status, report))

    await asyncio.gather(*(one(c) for c in ids))


async def create_all(client: Client, handle: WorkflowHandle, ids: list[str]) -> dict[str, float]:
    """Create each instance (at most CREATE_CONCURRENCY at once); seconds from request to placement."""
    sem = asyncio.Semaphore(CREATE_CONCURRENCY)
    took: dict[str, float] = {}

    async def one(iid: str) -> None:
        async with sem:
            t0 = time.monotonic()
            req = CreateInstanceRequest(id=iid, instance_type="standard", size="x1")
            # sent again after an RPC timeout: a repeated create answers the first placement
            placed: InstancePlacement = await patiently(
                lambda: execute_update(handle, FleetAutoscalerWorkflow.create_instance, req)
            )
            while not placed.cluster_id:  # waiting for room: ask until it is placed
                await asyncio.sleep(0.2)
                placed = await find_instance(client, handle.id, iid) or placed
            took[iid] = time.monotonic() - t0

    await asyncio.gather(*(one(i) for i in ids))
    return took


async def largest_event_bytes(handle: WorkflowHandle) -> int:
    """0 for a workflow that does not exist (an index shard starts with its first instance)."""
    biggest = 0
    try:
        async for event in handle.fetch_history_events():
            biggest = max(biggest, event.ByteSize())
    except RPCError as err:
        if err.status != RPCStatusCode.NOT_FOUND:
            raise
    return biggest


async def largest_payload(client: Client, handle: WorkflowHandle, shards: int) -> tuple[int, int]:
    """The largest event of the region's latest run (its first event carries the continue-as-new
    state) and of its index shards' latest runs."""
    region = await largest_event_bytes(handle)
    sizes = [
        await largest_event_bytes(client.get_workflow_handle(shard_workflow_id(handle.id, k))) for k in range(shards)
    ]
    return region, max(sizes, default=0)


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def run(clusters: int, prefill: int, burst: int, units: int) -> dict[str, object]:
    total = prefill + burst
    async with await WorkflowEnvironment.start_local(
        dev_server_existing_path=str(TEMPORAL),
        data_converter=pydantic_data_converter,
        dev_server_log_level="error",
        dev_server_extra_args=SERVER_ARGS,
    ) as env:
        client = env.client
        tq = f"fleet-scale-{uuid.uuid4().hex[:6]}"
        settings = FleetAutoscalerSettings(
            provider="aws",
            region="us-east-1",
            scan_interval_s=5.0,
            max_clusters=clusters,
            max_instances=max(total, 1),
        )
        cfg = load_fleet_config_text(config(clusters, limit=total))
        async with Worker(
            client,
            task_queue=tq,
            workflows=WORKFLOWS,
            activities=DECISIONS,  # the region's decisions (scaling.fleet.decisions); no OCM here
            max_concurrent_workflow_tasks=20,
            # every cluster, the region and its index shards stay cached: an evicted region replays
            # its whole history on its next task
            max_cached_workflows=2 * clusters + 200,
            workflow_runner=workflow_runner(),
        ):
            t0 = time.monotonic()
            handle = await client.start_workflow(
                FleetAutoscalerWorkflow.run,
                FleetAutoscalerInput(settings=settings, config=cfg.without_clusters()),
                id=f"fleet/aws/bench-{uuid.uuid4().hex[:6]}",
                task_queue=tq,
            )
            await register_listed(handle, cfg.manual_clusters("aws", "us-east-1"))
            await until(lambda: _all_waiting(handle, clusters), timeout_s=600, what=f"{clusters} clusters registered")
            ids = [f"bench-{i:05d}" for i in range(clusters)]
            await agents_report_ready(client, ids, units)
            await until(lambda: _all_ready(handle, clusters), timeout_s=600, what="every cluster ready")
            ready_s = time.monotonic() - t0
            print(f"{clusters} clusters registered and ready in {ready_s:.1f}s", flush=True)
            t1 = time.monotonic()
            await create_all(client, handle, [f"pre-{i}" for i in range(prefill)])
            print(f"{prefill} instances placed beforehand in {time.monotonic() - t1:.1f}s", flush=True)
            load_before = os.getloadavg()[0]
            t2 = time.monotonic()
            took = await create_all(client, handle, [f"burst-{i}" for i in range(burst)])
            burst_s = time.monotonic() - t2
            await until(lambda: _settled(handle, total), timeout_s=600, what="region settled")
            settle_s = time.monotonic() - t2
            load_after = os.getloadavg()[0]
            st = await status(handle)
            region_bytes, shard_bytes = await largest_payload(client, handle, st.index_shards)
            biggest = max(region_bytes, shard_bytes)
            await handle.terminate()
            for cid in ids:
                await client.get_workflow_handle(contracts.cluster_workflow_id(cid)).terminate()
    lat = list(took.values())
    out = {
        "clusters": clusters,
        "instances": st.instances_placed + st.instances_waiting,
        "burst": burst,
        "placement_p50_s": round(statistics.median(lat), 3) if lat else None,
        "placement_p99_s": round(pct(lat, 0.99), 3) if lat else None,
        "burst_s": round(burst_s, 1),
        "settle_s": round(settle_s, 1),
        "max_payload_bytes": biggest,
        "region_max_event_bytes": region_bytes,
        "shard_max_event_bytes": shard_bytes,
        "region_runs": st.runs + 1,
        "load_avg_1m": [round(load_before, 1), round(load_after, 1)],
        "cpus": os.cpu_count(),
        "aim_placement_p99_s": AIM_P99_S,
    }
    print(
        f"burst of {burst} on {clusters} clusters ({total} instances): placement p50 {out['placement_p50_s']}s "
        f"p99 {out['placement_p99_s']}s (aim < {AIM_P99_S}s), settled in {settle_s:.1f}s, largest history "
        f"event {biggest} bytes (region {region_bytes}, index shards {shard_bytes}), load average {load_before:.1f} -> {load_after:.1f} on {os.cpu_count()} cores",
        flush=True,
    )
    return out


async def _all_waiting(handle: WorkflowHandle, n: int) -> bool:
    st = await status(handle)
    return len(st.clusters) == n and all(c.phase.value != "cluster_accepted" for c in st.clusters)


async def _all_ready(handle: WorkflowHandle, n: int) -> bool:
    st = await status(handle)
    return sum(c.phase.value == "ready" for c in st.clusters) == n


async def _settled(handle: WorkflowHandle, total: int) -> bool:
    st = await status(handle)
    return st.instances_placed == total and st.instances_waiting == 0


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--clusters", type=int, default=1000)
    p.add_argument("--prefill", type=int, default=18000, help="instances placed before the burst")
    p.add_argument("--burst", type=int, default=2000)
    p.add_argument("--units-per-cluster", type=int, default=25)
    a = p.parse_args()
    out = runtime.run(run(a.clusters, a.prefill, a.burst, a.units_per_cluster))
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
