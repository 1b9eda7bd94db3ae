"""`make chaos` for the components loop: the components demo's ramp and scale-in under faults.

The stack is starters/components_demo.py's (dev server on a database file, the simulated
cluster with the TiDB world: operator, fake Prometheus, fake PD; one worker); the workload is
its `run_components_scenario` (load ramps: homogeneous and heterogeneous scale-out; load drops:
scale-in, the emptied group drained and deleted). Faults: Prometheus and PD answering 503 for
a while, the worker SIGKILLed while it creates a heterogeneous group (held there by the API
server refusing TidbCluster creates) and replaced, the Temporal server restarted on its database. Invariants
beyond bench/chaos.py's history checks: the scenario finishes, interval violations 0 (counted
from the Events, independently of the workflow), no heterogeneous group created twice, none
left behind.
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
from kubernetes import client
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter

from bench.chaos import Fault, FaultRecord, Outcome, _strike_when, check_histories, pending_activities
from scaling.components.contracts import CREATE_AUTO_CLUSTER, QUERY_METRICS
from sim.kube.kubeconfig import Endpoint
from starters.components_demo import SCALE_IN_S, SCALE_OUT_S, TASK_QUEUE, ComponentsDemo
from starters.kube import kube_client
from starters.processes import Proc
from starters.scenarios.components import BASE, NAMESPACE, G, V, add_nodes, run_components_scenario
from workflows.components.autoscaler import workflow_id

# The loop that creates the heterogeneous groups; polled alone (one describe, ~20 ms): a group
# create is one POST, over before a poll of every workflow comes round.
LOOP = workflow_id(NAMESPACE, BASE)


def log(msg: str) -> None:
    print(f"{time.strftime('%H:%M:%S')}  {msg}", file=sys.stderr, flush=True)


class ComponentsStack(ComponentsDemo):
    """The components demo's processes, with the restarts the faults need."""

    def worker(self) -> Proc:
        return next(p for p in reversed(self.procs.procs) if p.name.startswith("worker") and p.alive())

    def world(self) -> Proc:
        return next(p for p in self.procs.procs if p.name == "sim-tidb-world")

    def replace_worker(self) -> None:
        self.procs.worker(self.config_path, name=f"worker-{len(self.procs.procs)}")

    def restart_temporal(self) -> None:
        proc = next(p for p in reversed(self.procs.procs) if p.name == "temporal")
        proc.kill()
        self.procs.procs.remove(proc)
        self.procs.temporal(self.workdir / "temporal.db", port=self.temporal_port, ui=False)

    def worker_logs(self) -> str:
        return "\n".join(p.log_path.read_text() for p in self.procs.procs if p.name.startswith("worker"))

    async def kube_faults(self, body: dict[str, Any]) -> None:
        """The simulated API server's fault injection (its control API, beside the Kubernetes one)."""
        url = Endpoint.from_kubeconfig(self.kubeconfig).url
        async with httpx.AsyncClient(verify=False, timeout=10) as http:
            (await http.post(f"{url}/sim/v1/faults", json=body)).raise_for_status()

    async def faults(self, method: str, body: dict[str, Any] | None = None) -> None:
        async with httpx.AsyncClient(timeout=10) as http:
            (await http.request(method, f"{self.control_url}/sim/v1/faults", json=body)).raise_for_status()


def storm(target: str, seconds: float) -> Fault:
    """Prometheus or PD answers 503 for `seconds`, from the loop's next metrics query on."""

    async def inject(stack: Any, temporal: Client, rec: FaultRecord) -> None:
        if not await _strike_when(temporal, QUERY_METRICS, rec, started=False):
            return
        rec.started = time.time()
        await stack.faults("POST", {target: {"mode": "error", "status": 503}})
        await asyncio.sleep(seconds)  # the storm's length
        await stack.faults("DELETE")
        rec.ended = time.time()
        rec.stalled += [p for p in await pending_activities(temporal) if p not in rec.stalled]

    return inject


def kill_worker_during_group_create() -> Fault:
    """The API server refuses TidbCluster creates (503) once the loop runs, so the next group
    create keeps retrying; the worker is SIGKILLed with it in progress, the refusals end and a
    new worker replaces it (a create is one POST: too quick to catch otherwise)."""

    async def inject(stack: Any, temporal: Client, rec: FaultRecord) -> None:
        if not await _strike_when(temporal, QUERY_METRICS, rec, only=LOOP, started=False):
            return  # the loop runs: the base TidbCluster exists, only group creates are refused
        refuse = {"method": "POST", "path_regex": r"/tidbclusters$", "status": 503, "times": 100_000}
        await stack.kube_faults({"request_failures": [{**refuse, "reason": "ServiceUnavailable"}]})
        try:
            if not await _strike_when(temporal, CREATE_AUTO_CLUSTER, rec, only=LOOP, started=False):
                return
            rec.started = time.time()
            await asyncio.to_thread(stack.worker().stop, signal.SIGKILL, 30)
        finally:
            await stack.kube_faults({"request_failures": []})
        rec.ended = time.time()
        await asyncio.to_thread(stack.replace_worker)

    return inject


def restart_temporal_during_group_create() -> Fault:
    async def inject(stack: Any, temporal: Client, rec: FaultRecord) -> None:
        if not await _strike_when(temporal, CREATE_AUTO_CLUSTER, rec, only=LOOP, started=False):
            return
        rec.started = time.time()
        await asyncio.to_thread(stack.restart_temporal)
        rec.ended = time.time()

    return inject


COMPONENTS_FAULTS: dict[str, Fault] = {
    "prometheus-503-storm": storm("prometheus", 5),
    "pd-503-storm": storm("pd", 5),
    "kill-worker-during-group-create": kill_worker_during_group_create(),
    "restart-temporal-during-group-create": restart_temporal_during_group_create(),
}


async def components_ramp(workdir: Path, names: list[str], timeout: float = 300) -> Outcome:
    """The components demo's scenario with the faults `names` one after another beside it; checked."""
    args = argparse.Namespace(
        workdir=str(workdir), temporal_port=None, ui_port=None, metrics_port=None, timeout=timeout, headless=True
    )
    stack = ComponentsStack(args)
    records = [FaultRecord(n) for n in names]
    began = time.monotonic()
    violations: list[str] = []
    api = None
    try:
        with contextlib.redirect_stdout(sys.stderr):  # the demo talks; stdout is for the JSON lines
            await asyncio.to_thread(stack.start_processes)
        api = kube_client(stack.kubeconfig)
        await asyncio.to_thread(add_nodes, api, 3, "32", "128Gi")
        temporal = await Client.connect(f"127.0.0.1:{stack.temporal_port}", data_converter=pydantic_data_converter)

        async def schedule() -> None:
            for name, rec in zip(names, records):
                await COMPONENTS_FAULTS[name](stack, temporal, rec)

        faults = asyncio.create_task(schedule())
        try:
            summary = await asyncio.wait_for(
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
                ),
                timeout,
            )
            await asyncio.wait_for(faults, 60)
        except Exception as e:  # noqa: BLE001 - a run that does not finish is a violation, named
            violations.append(f"components scenario did not finish: {(str(e) or repr(e))[:300]}")
            summary = {}
        finally:
            faults.cancel()
        created = summary.get("heterogeneous_created", [])
        outcome = Outcome("components-ramp", records, violations, 0, 0.0)
        outcome.created = {"groups_created": len(created)}
        if summary.get("interval_violations"):
            violations.append(f"interval violations: {summary['interval_violations']}")
        violations += [f"heterogeneous group {g} created twice" for g in set(created) if created.count(g) > 1]
        groups = client.CustomObjectsApi(api).list_namespaced_custom_object(G, V, NAMESPACE, "tidbclusters")["items"]
        left = [g["metadata"]["name"] for g in groups if g["metadata"]["name"].startswith("auto-")]
        if summary and left:
            violations.append(f"heterogeneous groups left behind: {left}")
        await check_histories(temporal, stack.worker_logs(), outcome)
        outcome.seconds = time.monotonic() - began
        return outcome
    finally:
        if api is not None:
            api.close()
        stack.stop()
