"""`make chaos` for the fleet loop: the fleet demo's instance burst and scale-down under faults.

The stack is starters/fleet_demo.py's (dev server on a database file, fake OCM, one worker with
the agent API, fake agents); the workload is its `run_fleet_burst` (instances placed, then
deleted and the empty clusters removed). Faults: the worker SIGKILLed while an OCM cluster
create is in progress (held there by a slow OCM answer) and replaced, OCM 503 and 429 storms on
cluster creates, lost create responses (created at OCM, the answer never arrives or is a 503), and the
Temporal server restarted on its database while a create is held the same way. Each strikes on
the fake OCM's own counts (`/sim/v1/stats`: create requests, lost answers), never on catching a
create activity in a poll (one that finished first skipped the fault). Invariants beyond the harness's history checks (bench/chaos_harness.py):
every instance placed (none lost), none placed twice, no second OCM cluster for one cluster
workflow (the fake counts live clusters per external id), no OCM cluster leaked.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
import time
from pathlib import Path
from typing import Any

import httpx
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from bench.chaos_harness import (
    Fault,
    FaultRecord,
    Outcome,
    _payload,
    beside_faults,
    check_histories,
    pending_activities,
    storm,
)
from bench.stack import DemoRestarts, demo_args, running
from scaling.fleet.contracts import CREATE_OCM_CLUSTER, SIGNAL_CLUSTER_MESSAGES, SIGNAL_INSTANCE_PLACED
from scaling.fleet.region import ClusterMessages
from starters.fleet_demo import PROVIDER, REGION, FleetDemo
from starters.scenarios.fleet import run_fleet_burst

CLUSTERS_PATH = r"^/clusters$"  # OCM's cluster create: POST /api/clusters_mgmt/v1/clusters


def log(msg: str) -> None:
    print(f"{time.strftime('%H:%M:%S')}  {msg}", file=sys.stderr, flush=True)


class FleetStack(DemoRestarts, FleetDemo):
    """The fleet demo's processes, with the restarts the faults need and the fake OCM's faults."""

    async def ocm(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        async with httpx.AsyncClient(timeout=10) as http:
            resp = await http.request(method, f"{self.ocm_url}/sim/v1{path}", json=body)
            resp.raise_for_status()
            return resp.json()


CREATE_ROUTE = "POST /clusters"  # the fake's count of cluster create requests, by route


async def ocm_count(stack: Any, key: str) -> int:
    """One of the fake OCM's own counts (`/sim/v1/stats`): `lost_responses`, or a route's requests."""
    stats = await stack.ocm("GET", "/stats")
    return int(stats["requests_by_route"].get(key, 0) if key.startswith(("GET ", "POST ")) else stats[key])


async def ocm_counted(stack: Any, key: str, at_least: int, rec: FaultRecord, what: str, timeout: float = 120) -> bool:
    """Wait until the fake OCM's count `key` reaches `at_least`: the moment a fault strikes is
    read from the fake, which counts every request however briefly the create activity runs,
    never from catching that activity in a poll. False (rec.skipped says why) when it did not."""
    deadline = time.monotonic() + timeout
    while await ocm_count(stack, key) < at_least:
        if time.monotonic() > deadline:
            rec.skipped = f"{what} within {timeout:.0f} s"
            return False
        await asyncio.sleep(0.05)
    return True


def during_held_ocm_create(kill_worker: bool, held_s: float = 5) -> Fault:
    """The next cluster create is made at once and answered `held_s` late; as soon as the fake
    has it, the worker waiting on it is SIGKILLed (and replaced), or the Temporal server is
    killed and restarted on its database (the answer lands while it is down)."""

    async def inject(stack: Any, temporal: Client, rec: FaultRecord) -> None:
        before = await ocm_count(stack, CREATE_ROUTE)
        await stack.ocm("POST", "/slow", {"delay_s": held_s, "count": 1, "method": "POST", "path": CLUSTERS_PATH})
        if not await ocm_counted(stack, CREATE_ROUTE, before + 1, rec, "no cluster create reached OCM"):
            return
        rec.started = time.time()
        if kill_worker:
            await asyncio.to_thread(stack.worker().stop, signal.SIGKILL, 30)
            rec.stalled = await pending_activities(temporal)  # the held create among them, until retried
        else:
            rec.stalled = await pending_activities(temporal)  # read while the server is up
            await asyncio.to_thread(stack.restart_temporal)
        rec.ended = time.time()
        if kill_worker:
            await asyncio.to_thread(stack.replace_worker, "worker")

    return inject


def ocm_create_storm(status: int, seconds: float) -> Fault:
    """Every OCM cluster create answered `status` for `seconds` from the first one refused (as
    the fake counts them). In place before the loop scales up, so no create slips past."""

    async def inject(stack: Any, temporal: Client, rec: FaultRecord) -> None:
        fault = {"status": status, "count": 100_000, "method": "POST", "path": CLUSTERS_PATH}
        if status == 429:
            fault["retry_after_s"] = 1
        before = await ocm_count(stack, CREATE_ROUTE)
        await stack.ocm("POST", "/faults", fault)
        await storm(
            temporal,
            rec,
            lambda: ocm_counted(stack, CREATE_ROUTE, before + 1, rec, "no cluster create met the storm"),
            seconds,
            lambda: stack.ocm("POST", "/reset_faults"),
        )

    return inject


def lose_ocm_creates(count: int, status: int | None = None) -> Fault:
    """The next `count` cluster creates succeed at OCM but their answers are lost (the
    connection closed, or a 5xx `status` answered instead). The fault ends when the fake has
    lost the last of them; the creates retrying then are what it stalled."""

    async def inject(stack: Any, temporal: Client, rec: FaultRecord) -> None:
        rec.started = time.time()
        lost = await ocm_count(stack, "lost_responses")
        await stack.ocm("POST", "/lose_create_responses", {"count": count, "status": status})
        if not await ocm_counted(stack, "lost_responses", lost + count, rec, f"{count} create answers not all lost"):
            return
        rec.ended = time.time()
        rec.stalled = [p for p in await pending_activities(temporal) if p.activity_type == CREATE_OCM_CLUSTER]

    return inject


FLEET_FAULTS: dict[str, Fault] = {
    "kill-worker-during-ocm-create": during_held_ocm_create(kill_worker=True),
    "ocm-create-503-storm": ocm_create_storm(503, 5),
    "ocm-create-429-storm": ocm_create_storm(429, 5),
    # The burst makes one cluster, and a retry finds it by its external id instead of sending
    # the create again: one lost answer is all a run can meet (a second was never sent).
    "ocm-lost-create-responses": lose_ocm_creates(1),
    "ocm-create-answered-503": lose_ocm_creates(1, 503),
    "restart-temporal-during-ocm-create": during_held_ocm_create(kill_worker=False),
}


async def fleet_burst(workdir: Path, names: list[str], instances: int, timeout: float = 300) -> Outcome:
    """The fleet demo's burst with the faults `names` one after another beside it; checked."""
    stack = FleetStack(demo_args(workdir, timeout, instances=instances))
    began = time.monotonic()
    async with running(stack) as temporal:
        with contextlib.redirect_stdout(sys.stderr):
            await stack.start_loop(temporal)
        workload = run_fleet_burst(
            temporal,
            PROVIDER,
            REGION,
            instances=instances,
            ocm_live_clusters=lambda: _live(stack),
            timeout_s=timeout,
            say=log,
        )
        faults = [(n, FLEET_FAULTS[n]) for n in names]
        summary, records, violations = await beside_faults(stack, temporal, faults, workload, "fleet burst")
        outcome = Outcome("fleet-burst", records, violations, 0, 0.0)
        outcome.created = {"clusters_created": summary.get("clusters_created", 0)}
        if summary:
            if summary["instances_placed"] != instances:
                violations.append(f"instances lost: {summary['instances_placed']} of {instances} placed")
            if summary["ocm_clusters_leaked"]:
                violations.append(f"OCM clusters leaked: {summary['ocm_clusters_leaked']}")
        stats = await stack.ocm("GET", "/stats")
        if stats["clusters_leaked"]:
            violations.append(f"second OCM cluster for one cluster workflow: {stats['clusters_leaked']}")
        await check_histories(temporal, stack.worker_logs(), outcome)
        placed = await placements(temporal)
        violations += [f"instance {i} placed on {sorted(on)}" for i, on in placed.items() if len(on) > 1]
        violations += [f"instance burst-{i} never placed" for i in range(instances) if f"burst-{i}" not in placed]
        outcome.seconds = time.monotonic() - began
        return outcome


async def _live(stack: FleetStack) -> int:
    return int((await stack.ocm("GET", "/stats"))["clusters_live"])


async def placements(temporal: Client) -> dict[str, set[str]]:
    """Per instance, the clusters told it was placed on them, alone or in a batch of the
    region's outbox (every run of every workflow; a repeated placement on the same cluster is
    idempotent there, a second cluster is not)."""
    placed: dict[str, set[str]] = {}
    async for wf in temporal.list_workflows():
        history = await temporal.get_workflow_handle(wf.id, run_id=wf.run_id).fetch_history()
        for e in history.events:
            if e.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
                attrs = e.workflow_execution_signaled_event_attributes
                if attrs.signal_name == SIGNAL_INSTANCE_PLACED:
                    placed.setdefault(_payload(attrs.input)["id"], set()).add(wf.id)
                elif attrs.signal_name == SIGNAL_CLUSTER_MESSAGES:  # the batched outbox
                    for msg in ClusterMessages.model_validate(_payload(attrs.input)).messages:
                        if msg.signal == SIGNAL_INSTANCE_PLACED and msg.instance is not None:
                            placed.setdefault(msg.instance.id, set()).add(wf.id)
    return placed
