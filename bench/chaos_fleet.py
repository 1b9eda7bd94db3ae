"""`make chaos` for the fleet loop: the fleet demo's instance burst and scale-down under faults.

The stack is starters/fleet_demo.py's (dev server on a database file, fake OCM, one worker with
the agent API, fake agents); the workload is its `run_fleet_burst` (instances placed, then
deleted and the empty clusters removed). Faults: the worker SIGKILLed while an OCM cluster
create is in progress (held there by a slow OCM answer) and replaced, OCM 503 and 429 storms on
cluster creates, lost create responses (created at OCM, the answer never arrives), and the
Temporal server restarted on its database. Invariants beyond bench/chaos.py's history checks:
every instance placed (none lost), none placed twice, no second OCM cluster for one cluster
workflow (the fake counts live clusters per external id), no OCM cluster leaked.
"""

from __future__ import annotations

import argparse
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
from temporalio.contrib.pydantic import pydantic_data_converter

from bench.chaos import Fault, FaultRecord, Outcome, _payload, _strike_when, check_histories, pending_activities
from scaling.fleet.contracts import CREATE_OCM_CLUSTER, SIGNAL_CLUSTER_MESSAGES, SIGNAL_INSTANCE_PLACED
from starters.fleet_demo import PROVIDER, REGION, FleetDemo
from starters.processes import Proc
from starters.scenarios.fleet import run_fleet_burst

CLUSTERS_PATH = r"^/clusters$"  # OCM's cluster create: POST /api/clusters_mgmt/v1/clusters


def log(msg: str) -> None:
    print(f"{time.strftime('%H:%M:%S')}  {msg}", file=sys.stderr, flush=True)


class FleetStack(FleetDemo):
    """The fleet demo's processes, with the restarts the faults need."""

    def worker(self) -> Proc:
        return next(p for p in reversed(self.procs.procs) if p.name.startswith("worker") and p.alive())

    def worker_by_pid(self, pid: int) -> str | None:
        return "worker" if self.worker().popen.pid == pid else None

    def replace_worker(self, name: str) -> None:
        self.procs.worker(self.config_path, name=f"{name}-{len(self.procs.procs)}")  # the same agent API port

    def restart_temporal(self) -> None:
        proc = next(p for p in reversed(self.procs.procs) if p.name == "temporal")
        proc.kill()
        self.procs.procs.remove(proc)
        self.procs.temporal(self.workdir / "temporal.db", port=self.temporal_port, ui=False)

    def worker_logs(self) -> str:
        return "\n".join(p.log_path.read_text() for p in self.procs.procs if p.name.startswith("worker"))

    async def ocm(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        async with httpx.AsyncClient(timeout=10) as http:
            resp = await http.request(method, f"{self.ocm_url}/sim/v1{path}", json=body)
            resp.raise_for_status()
            return resp.json()


def kill_worker_during_ocm_create(sig: int = signal.SIGKILL) -> Fault:
    """The next cluster create answers after 5 s; the worker waiting on it is killed, replaced."""

    async def inject(stack: Any, temporal: Client, rec: FaultRecord) -> None:
        await stack.ocm("POST", "/slow", {"delay_s": 5, "count": 1, "method": "POST", "path": CLUSTERS_PATH})
        if not await _strike_when(temporal, CREATE_OCM_CLUSTER, rec):
            return
        rec.started = time.time()
        await asyncio.to_thread(stack.worker().stop, sig, 30)
        rec.ended = time.time()
        await asyncio.to_thread(stack.replace_worker, "worker")

    return inject


def ocm_create_storm(status: int, seconds: float) -> Fault:
    """Every OCM cluster create answered `status` for `seconds`, from the first create on."""

    async def inject(stack: Any, temporal: Client, rec: FaultRecord) -> None:
        if not await _strike_when(temporal, CREATE_OCM_CLUSTER, rec, started=False):
            return
        fault = {"status": status, "count": 100_000, "method": "POST", "path": CLUSTERS_PATH}
        if status == 429:
            fault["retry_after_s"] = 1
        rec.started = time.time()
        await stack.ocm("POST", "/faults", fault)
        await asyncio.sleep(seconds)  # the storm's length
        await stack.ocm("POST", "/reset_faults")
        rec.ended = time.time()
        rec.stalled += [p for p in await pending_activities(temporal) if p not in rec.stalled]

    return inject


def lose_ocm_creates(count: int) -> Fault:
    """The next `count` cluster creates succeed at OCM but their answers are lost."""

    async def inject(stack: Any, temporal: Client, rec: FaultRecord) -> None:
        rec.started = time.time()
        await stack.ocm("POST", "/lose_create_responses", {"count": count})
        if not await _strike_when(temporal, CREATE_OCM_CLUSTER, rec):
            return
        rec.ended = time.time()

    return inject


def restart_temporal_now() -> Fault:
    async def inject(stack: Any, temporal: Client, rec: FaultRecord) -> None:
        if not await _strike_when(temporal, CREATE_OCM_CLUSTER, rec, started=False):
            return
        rec.started = time.time()
        await asyncio.to_thread(stack.restart_temporal)
        rec.ended = time.time()

    return inject


FLEET_FAULTS: dict[str, Fault] = {
    "kill-worker-during-ocm-create": kill_worker_during_ocm_create(),
    "ocm-create-503-storm": ocm_create_storm(503, 5),
    "ocm-create-429-storm": ocm_create_storm(429, 5),
    "ocm-lost-create-responses": lose_ocm_creates(2),
    "restart-temporal-during-ocm-create": restart_temporal_now(),
}


async def fleet_burst(workdir: Path, names: list[str], instances: int, timeout: float = 300) -> Outcome:
    """The fleet demo's burst with the faults `names` one after another beside it; checked."""
    args = argparse.Namespace(
        workdir=str(workdir), temporal_port=None, ui_port=None, instances=instances, timeout=timeout, headless=True
    )
    stack = FleetStack(args)
    records = [FaultRecord(n) for n in names]
    began = time.monotonic()
    violations: list[str] = []
    try:
        with contextlib.redirect_stdout(sys.stderr):  # the demo talks; stdout is for the JSON lines
            await asyncio.to_thread(stack.start_processes)
        temporal = await Client.connect(f"127.0.0.1:{stack.temporal_port}", data_converter=pydantic_data_converter)
        with contextlib.redirect_stdout(sys.stderr):
            await stack.start_loop(temporal)

        async def schedule() -> None:
            for name, rec in zip(names, records):
                await FLEET_FAULTS[name](stack, temporal, rec)

        faults = asyncio.create_task(schedule())
        try:
            summary = await run_fleet_burst(
                temporal,
                PROVIDER,
                REGION,
                instances=instances,
                ocm_live_clusters=lambda: _live(stack),
                timeout_s=timeout,
                say=log,
            )
            await asyncio.wait_for(faults, 60)
        except Exception as e:  # noqa: BLE001 - a run that does not finish is a violation, named
            violations.append(f"fleet burst did not finish: {str(e)[:300]}")
            summary = {}
        finally:
            faults.cancel()
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
    finally:
        stack.stop()


async def _live(stack: FleetStack) -> int:
    return int((await stack.ocm("GET", "/stats"))["clusters_live"])


async def placements(temporal: Client) -> dict[str, set[str]]:
    """Per instance, the clusters told it was placed on them (every run of every workflow; a
    repeated signal to the same cluster is idempotent there, a second cluster is not)."""
    placed: dict[str, set[str]] = {}
    async for wf in temporal.list_workflows():
        history = await temporal.get_workflow_handle(wf.id, run_id=wf.run_id).fetch_history()
        for e in history.events:
            if e.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
                attrs = e.workflow_execution_signaled_event_attributes
                if attrs.signal_name == SIGNAL_INSTANCE_PLACED:
                    placed.setdefault(_payload(attrs.input)["id"], set()).add(wf.id)
                elif attrs.signal_name == SIGNAL_CLUSTER_MESSAGES:  # the batched outbox (patch batched-outbox)
                    for msg in _payload(attrs.input)["messages"]:
                        if msg["signal"] == SIGNAL_INSTANCE_PLACED:
                            placed.setdefault(msg["instance"]["id"], set()).add(wf.id)
    return placed
