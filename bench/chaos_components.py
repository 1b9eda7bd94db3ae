"""`make chaos` for the components loop: the components demo's ramp and scale-in under faults.

The stack is starters/components_demo.py's (dev server on a database file, the simulated
cluster with the TiDB world: operator, fake Prometheus, fake PD; one worker); the workload is
its `run_components_scenario` (load ramps: homogeneous and heterogeneous scale-out; load drops:
scale-in, the emptied group drained and deleted). Faults: Prometheus and PD answering 503 for
a while or losing their answers (the connection closed unanswered), the worker SIGKILLed while it creates a heterogeneous group (held there by the API
server refusing TidbCluster creates) and replaced, the Temporal server restarted on its database
with a group create held the same way. Invariants
beyond the harness's history checks (bench/chaos_harness.py): the scenario finishes, interval violations 0 (counted
from the Events, independently of the workflow), no heterogeneous group created twice, none
left behind.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
from kubernetes import client
from temporalio.client import Client

from bench.chaos_harness import (
    Fault,
    FaultRecord,
    Outcome,
    _strike_when,
    beside_faults,
    check_histories,
    pending_activities,
)
from bench.stack import DemoRestarts, demo_args, running
from scaling.components.contracts import CREATE_AUTO_CLUSTER
from sim.kube.kubeconfig import Endpoint
from starters.components_demo import CPU_WINDOW_S, SCALE_IN_S, SCALE_OUT_S, TASK_QUEUE, ComponentsDemo
from starters.kube import kube_client
from starters.scenarios.components import BASE, NAMESPACE, G, V, add_nodes, run_components_scenario
from workflows.components.autoscaler import workflow_id

# The loop that creates the heterogeneous groups; polled alone (one describe, ~20 ms): a group
# create is one POST, over before a poll of every workflow comes round.
LOOP = workflow_id(NAMESPACE, BASE)


def log(msg: str) -> None:
    print(f"{time.strftime('%H:%M:%S')}  {msg}", file=sys.stderr, flush=True)


class ComponentsStack(DemoRestarts, ComponentsDemo):
    """The components demo's processes, with the restarts the faults need and the sims' faults."""

    async def kube_faults(self, body: dict[str, Any]) -> None:
        """The simulated API server's fault injection (its control API, beside the Kubernetes one)."""
        url = Endpoint.from_kubeconfig(self.kubeconfig).url
        async with httpx.AsyncClient(verify=False, timeout=10) as http:
            (await http.post(f"{url}/sim/v1/faults", json=body)).raise_for_status()

    async def faults(self, method: str, body: dict[str, Any] | None = None) -> None:
        async with httpx.AsyncClient(timeout=10) as http:
            (await http.request(method, f"{self.control_url}/sim/v1/faults", json=body)).raise_for_status()


async def metrics_queried(stack: Any, temporal: Client, rec: FaultRecord, timeout: float = 60) -> bool:
    """Wait for the loop's next Prometheus query, as the fake counts them (`/sim/v1/stats`), and
    note what is in progress then; False (rec.skipped says why) when none came. A round's reads
    are local activities (patch local-round-reads), never listed as pending, so the query itself
    is the moment to watch."""

    async def queries(http: httpx.AsyncClient) -> int:
        stats = (await http.get(f"{stack.control_url}/sim/v1/stats")).raise_for_status().json()
        return sum(n for route, n in stats.items() if route.startswith("/api/v1/query"))

    deadline = time.monotonic() + timeout
    async with httpx.AsyncClient(timeout=10) as http:
        before = await queries(http)
        while time.monotonic() < deadline:
            if await queries(http) > before:
                rec.stalled = await pending_activities(temporal)
                return True
            await asyncio.sleep(0.02)
    rec.skipped = "no metrics query seen"
    return False


def storm(target: str, seconds: float, mode: str = "error") -> Fault:
    """Prometheus or PD answers 503 (`mode` "drop": reads the query and closes the connection
    unanswered, a lost response) for `seconds`, from the loop's next metrics query on."""

    async def inject(stack: Any, temporal: Client, rec: FaultRecord) -> None:
        if not await metrics_queried(stack, temporal, rec):
            return
        rec.started = time.time()
        await stack.faults("POST", {target: {"mode": mode, "status": 503}})
        await asyncio.sleep(seconds)  # the storm's length
        await stack.faults("DELETE")
        rec.ended = time.time()
        rec.stalled += [p for p in await pending_activities(temporal) if p not in rec.stalled]

    return inject


@contextlib.asynccontextmanager
async def group_create_held(stack: Any, temporal: Client, rec: FaultRecord) -> AsyncIterator[bool]:
    """Yields True with a heterogeneous group create in progress, held there: the API server
    refuses TidbCluster creates (503) from the moment the loop runs, so the create keeps retrying
    until the block ends (a create is one POST: too quick to catch otherwise). False (and
    rec.skipped says why) when none came."""
    if not await metrics_queried(stack, temporal, rec):
        yield False  # the loop runs from here: the base TidbCluster exists, only group creates are refused
        return
    refuse = {"method": "POST", "path_regex": r"/tidbclusters$", "status": 503, "times": 100_000}
    await stack.kube_faults({"request_failures": [{**refuse, "reason": "ServiceUnavailable"}]})
    try:
        yield await _strike_when(temporal, CREATE_AUTO_CLUSTER, rec, only=LOOP, started=False)
    finally:
        await stack.kube_faults({"request_failures": []})


def during_group_create(kill_worker: bool) -> Fault:
    """With a group create held in progress: the worker SIGKILLed (a new one replaces it), or
    the Temporal server killed and restarted on its database."""

    async def inject(stack: Any, temporal: Client, rec: FaultRecord) -> None:
        async with group_create_held(stack, temporal, rec) as held:
            if not held:
                return
            rec.started = time.time()
            if kill_worker:
                await asyncio.to_thread(stack.worker().stop, signal.SIGKILL, 30)
            else:
                await asyncio.to_thread(stack.restart_temporal)
        rec.ended = time.time()
        if kill_worker:
            await asyncio.to_thread(stack.replace_worker)

    return inject


COMPONENTS_FAULTS: dict[str, Fault] = {
    "prometheus-503-storm": storm("prometheus", 5),
    "pd-503-storm": storm("pd", 5),
    "prometheus-lost-responses": storm("prometheus", 5, "drop"),
    "pd-lost-responses": storm("pd", 5, "drop"),
    "kill-worker-during-group-create": during_group_create(kill_worker=True),
    "restart-temporal-during-group-create": during_group_create(kill_worker=False),
}


async def components_ramp(workdir: Path, names: list[str], timeout: float = 300) -> Outcome:
    """The components demo's scenario with the faults `names` one after another beside it; checked."""
    # The loop reads the fake Prometheus's PromQL, where the faults strike: the demo's real
    # Prometheus (started when the binary is on PATH) would stand between them.
    stack = ComponentsStack(demo_args(workdir, timeout, metrics_source="sim"))
    began = time.monotonic()
    async with running(stack) as temporal:
        api = kube_client(stack.kubeconfig)
        try:
            await asyncio.to_thread(add_nodes, api, 3, "32", "128Gi")
            workload = asyncio.wait_for(
                run_components_scenario(
                    temporal,
                    TASK_QUEUE,
                    api,
                    stack.control_url,
                    scan_interval_s=1.0,
                    scale_out_s=SCALE_OUT_S,
                    scale_in_s=SCALE_IN_S,
                    phase_timeout_s=120.0,
                    progress=log,
                    source_url=stack.source_url,
                    cpu_window_s=CPU_WINDOW_S,
                ),
                timeout,
            )
            faults = [(n, COMPONENTS_FAULTS[n]) for n in names]
            summary, records, violations = await beside_faults(stack, temporal, faults, workload, "components scenario")
            created = summary.get("heterogeneous_created", [])
            outcome = Outcome("components-ramp", records, violations, 0, 0.0)
            outcome.created = {"groups_created": len(created)}
            if summary.get("interval_violations"):
                violations.append(f"interval violations: {summary['interval_violations']}")
            violations += [f"heterogeneous group {g} created twice" for g in set(created) if created.count(g) > 1]
            groups = client.CustomObjectsApi(api).list_namespaced_custom_object(G, V, NAMESPACE, "tidbclusters")
            left = [g["metadata"]["name"] for g in groups["items"] if g["metadata"]["name"].startswith("auto-")]
            if summary and left:
                violations.append(f"heterogeneous groups left behind: {left}")
            await check_histories(temporal, stack.worker_logs(), outcome)
            outcome.seconds = time.monotonic() - began
            return outcome
        finally:
            api.close()
