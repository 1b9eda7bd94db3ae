"""The chaos harness (`make chaos`, bench/chaos.py): the stack, the faults and their records, the
node loop's scenarios and the invariants checked after each run. The per-loop scenario modules
(bench/chaos_hetzner.py, chaos_fleet.py, chaos_components.py) build on this module; bench/chaos.py
runs them all. This module imports none of them."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import yaml
from kubernetes import client
from temporalio.api.enums.v1 import EventType, PendingActivityState, WorkflowTaskFailedCause
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.contrib.pydantic import pydantic_data_converter

from bench.stack import restart_dev_server, worker_logs
from bench.start_hold import ARMED, HOLDS_ENV
from scaling.kube.labels import request_key
from scaling.nodes.contracts import (
    CREATE_NODE,
    EVICT_IN_ORDER,
    EVICT_POD,
    OBSERVE_CLUSTER,
    READINESS,
    START_NODE_REQUESTS,
)
from scaling.nodes.models import LABEL_REQUEST
from scaling.nodes.scale_up.requests import split_request_id
from scaling.nodes.settings import AutoscalerSettings
from scaling.nodes.state import AutoscalerInput
from scaling.nodes.status import AutoscalerStatus
from sim.storage.longhorn import FakeLonghorn, LonghornError
from starters.kube import apply_crds, apply_node_group, deployment, kube_client, node_group
from starters.processes import Proc, Processes, free_port
from starters.scenarios.hetzner import HetznerBurstScenario
from starters.scenarios.scale_down import SCALE_DOWN
from workflows.nodes.autoscaler import NodeAutoscalerWorkflow, autoscaler_id

ROOT = Path(__file__).resolve().parent.parent
CLUSTER = "chaos"
VOLUME = "chaos-vol"  # a Longhorn volume on the scale-down's nodes: removals must not lose it
KWOK_POOLS = [{"provider": "kwok", "serverType": ["cx22"], "priority": 10}]  # the burst's group
BAD_ENDINGS = (WorkflowExecutionStatus.FAILED, WorkflowExecutionStatus.TERMINATED, WorkflowExecutionStatus.TIMED_OUT)
COMPLETED = {
    EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED: "activity_task_completed_event_attributes",
    EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED: "activity_task_failed_event_attributes",
    EventType.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT: "activity_task_timed_out_event_attributes",
}


def sim_keeps_state() -> bool:
    """Whether this checkout's simulated cluster can restart as the same cluster (a data dir)."""
    out = subprocess.run([sys.executable, "-m", "sim.cluster", "--help"], capture_output=True, text=True).stdout
    return "--data-dir" in out and hasattr(Processes, "restart_sim_cluster")


# -- the stack ----------------------------------------------------------------------------------
@dataclass
class Stack:
    """Dev server on a database file, simulated cluster, two workers on one task queue."""

    workdir: Path
    procs: Processes = field(init=False)
    port: int = 0
    workers: dict[str, Proc] = field(default_factory=dict)
    restarts: int = 0
    replicas: int = 0  # the workload's pods, all to be running at the end
    sim_url: str = ""
    longhorn: FakeLonghorn | None = None
    volume_checksum: str = ""  # as written, before the faults
    # The burst on Hetzner: the demo's scenario starts the fake cloud and names the provider.
    hetzner: HetznerBurstScenario | None = None
    providers: dict[str, Any] = field(default_factory=lambda: {"kwok": {}})
    worker_names: tuple[str, ...] = ("worker-a", "worker-b")  # chaos kills one: the other carries on

    def start(self, sim_args: list[str]) -> None:
        self.procs = Processes(self.workdir)
        self.db = self.workdir / "temporal.db"
        self.port, _ = self.procs.temporal(self.db, ui=False)
        self.kubeconfig = self.workdir / "kubeconfig"
        if sim_keeps_state():
            _, self.sim_url = self.procs.sim_cluster(self.kubeconfig, sim_args, data_dir=self.workdir / "etcd")  # type: ignore[call-arg]
        else:
            _, self.sim_url = self.procs.sim_cluster(self.kubeconfig, sim_args)
        self.task_queue = f"growth-chaos-{self.workdir.name}"
        if self.hetzner is not None:
            extra = self.hetzner.start_extra(self.procs, self.workdir, self.sim_url, self.kubeconfig)
            self.providers = self.hetzner.providers(self.workdir, extra)
        self.holds = self.workdir / "holds"
        self.holds.mkdir(exist_ok=True)
        for name in self.worker_names:
            self.workers[name] = self.start_worker(name)
        self.api = kube_client(self.kubeconfig)
        apply_crds(self.api)

    def start_worker(self, name: str) -> Proc:
        """The growth worker behind the start hold (bench/start_hold.py: unarmed, it changes nothing)."""
        argv = [sys.executable, "-m", "bench.start_hold", "--config", str(self.worker_config(name))]
        path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
        proc = self.procs.start(name, argv, env={HOLDS_ENV: str(self.holds), "PYTHONPATH": path})
        proc.wait_for_line(r"growth worker ready", 60)
        return proc

    def worker_config(self, name: str) -> Path:
        """Each worker its own ports (metrics, probes); one task queue for all."""
        path = self.workdir / f"{name}.yaml"
        path.write_text(
            yaml.safe_dump(
                {
                    "kubernetes": {"kubeconfig": str(self.kubeconfig)},
                    "temporal": {"address": f"127.0.0.1:{self.port}", "task_queue": self.task_queue},
                    "observability": {
                        "metrics_address": f"127.0.0.1:{free_port()}",
                        "health_address": f"127.0.0.1:{free_port()}",
                    },
                    "providers": self.providers,
                }
            )
        )
        return path

    async def client(self) -> Client:
        return await Client.connect(f"127.0.0.1:{self.port}", data_converter=pydantic_data_converter)

    def worker_by_pid(self, pid: int) -> str | None:
        return next((n for n, p in self.workers.items() if p.popen.pid == pid and p.alive()), None)

    def replace_worker(self, name: str) -> None:
        """A Deployment would start a new pod for the dead one."""
        self.restarts += 1
        name_now = f"{name}-{self.restarts}"
        self.workers[name] = self.start_worker(name_now)

    def restart_temporal(self) -> None:
        restart_dev_server(self.procs, self.db, self.port)

    def worker_logs(self) -> str:
        return worker_logs(self.procs)

    def stop(self) -> None:
        if self.longhorn is not None:
            self.longhorn.stop()
        self.procs.stop_all()


# -- pending work, for choosing the moment and measuring recovery ------------------------------
@dataclass(frozen=True)
class Pending:
    workflow_id: str
    run_id: str
    activity_id: str
    activity_type: str
    started: bool
    worker_pid: int | None


async def _running(temporal: Client, only: str | None) -> list[tuple[str, str | None]]:
    if only is not None:  # one describe: fast enough to catch the loop's quick activities
        return [(only, None)]
    return [(wf.id, wf.run_id) async for wf in temporal.list_workflows('ExecutionStatus="Running"')]


async def pending_activities(temporal: Client, only: str | None = None) -> list[Pending]:
    """Activities pending now, in every running workflow or in the workflow `only`."""
    out: list[Pending] = []
    for wf_id, run_id in await _running(temporal, only):
        try:
            desc = await temporal.get_workflow_handle(wf_id, run_id=run_id).describe()
        except Exception:  # closed between the list and the describe
            continue
        for a in desc.raw_description.pending_activities:
            ident = a.last_worker_identity.split("@", 1)[0]
            out.append(
                Pending(
                    wf_id,
                    desc.run_id,
                    a.activity_id,
                    a.activity_type.name,
                    a.state == PendingActivityState.PENDING_ACTIVITY_STATE_STARTED,
                    int(ident) if ident.isdigit() else None,
                )
            )
    return out


async def wait_for_activity(
    temporal: Client,
    activity_types: str | tuple[str, ...],
    timeout: float,
    only: str | None = None,
    started: bool = True,
    match: Callable[[Pending], bool] = lambda p: True,
) -> list[Pending]:
    """Every pending activity at the first moment one of these types is running on a worker
    (or, `started` False, is scheduled), that one first; [] when none came (polled fast: most
    last tens of milliseconds). `only`: look in that workflow alone; `match`: that one only."""
    wanted = {activity_types} if isinstance(activity_types, str) else set(activity_types)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        now = await pending_activities(temporal, only)
        hit = next(
            (
                p
                for p in now
                if p.activity_type in wanted and (not started or (p.started and p.worker_pid)) and match(p)
            ),
            None,
        )
        if hit is not None:
            return [hit, *(p for p in now if p != hit)]
        await asyncio.sleep(0.02)
    return []


# -- faults ------------------------------------------------------------------------------------
@dataclass
class FaultRecord:
    name: str
    started: float = 0.0  # epoch seconds
    ended: float = 0.0
    stalled: list[Pending] = field(default_factory=list)  # activities in progress when it struck
    skipped: str = ""  # why it was not injected
    recovery_s: float | None = None


Fault = Callable[[Stack, Client, FaultRecord], Awaitable[None]]


def sim_proc(stack: Stack) -> Proc:
    return next(p for p in reversed(stack.procs.procs) if p.name == "sim-cluster")


# The first eviction of a drain (policy/v1 Eviction, POST .../pods/<name>/eviction): held unanswered,
# the evict_pod that sent it runs until the fault strikes. Watching for a cordon and then hanging
# the whole API server came too late on a busy machine: a node's drain is over in ~0.4 s, and the
# cordon was seen after it (the kill then found no drain step running, 30 Nov).
EVICTION = ("POST", r"^/api/v1/namespaces/[^/]+/pods/[^/]+/eviction$")


@contextlib.asynccontextmanager
async def held_request(
    stack: Stack, method: str, path_regex: str, rec: FaultRecord, timeout: float = 180, body_regex: str = ""
) -> AsyncIterator[list[dict[str, Any]]]:
    """The API server holds the first matching request (`body_regex`: whose body, compact JSON with
    sorted keys, matches too) unanswered until the block ends; yields the held request's objects
    ([] with rec.skipped when none came)."""
    faults = f"{stack.sim_url}/sim/v1/faults"
    hold = {"request_holds": [{"method": method, "path_regex": path_regex, "times": 1, "body_regex": body_regex}]}
    async with httpx.AsyncClient(verify=False, timeout=10) as http:
        (await http.post(faults, json=hold)).raise_for_status()
        try:
            deadline = time.monotonic() + timeout
            while not (held := (await http.get(faults)).json()["request_holds"][0])["held"]:
                if time.monotonic() > deadline:
                    rec.skipped = f"no {method} {path_regex} reached the API server within {timeout:.0f} s"
                    yield []
                    return
                await asyncio.sleep(0.02)
            yield held["objects"] or [{}]
        finally:
            (await http.post(faults, json={"request_holds": []})).raise_for_status()  # served now


@contextlib.asynccontextmanager
async def holding(stack: Stack, hold: tuple[str, str] | None, rec: FaultRecord) -> AsyncIterator[bool]:
    """With `hold` (method, path regex): held_request's first such request held until the block
    ends; False (rec.skipped says why) when none came. Without: nothing held."""
    if hold is None:
        yield True
        return
    async with held_request(stack, *hold, rec) as held:
        yield bool(held)


def kill_worker_during(
    activity_type: str | tuple[str, ...],
    sig: int = signal.SIGKILL,
    hold: tuple[str, str] | None = None,
    match: Callable[[Pending], bool] = lambda p: True,
) -> Fault:
    """SIGKILL (or SIGTERM) the worker running such an activity (a long one, as a node-ready
    wait: the loop's quick ones are kill_worker_taking's); a new worker replaces it.

    `hold`: for activities too quick to catch (a drain step is one call of ~20 ms), the API
    server holds the first such request (method, path regex) until the kill (holding), then
    serves it: its answer is lost with the worker. `match`: that activity only
    (wait_for_activity's)."""

    async def inject(stack: Stack, temporal: Client, rec: FaultRecord) -> None:
        async with holding(stack, hold, rec) as held:
            if not held:
                return
            snapshot = await wait_for_activity(temporal, activity_type, 60, match=match)
            name = stack.worker_by_pid(snapshot[0].worker_pid) if snapshot and snapshot[0].worker_pid else None
            if name is None:
                rec.skipped = f"no {activity_type} seen running on a worker of ours"
                return
            rec.stalled, rec.started = snapshot, time.time()
            stack.workers[name].stop(sig, timeout=30)  # SIGTERM: the worker may finish its tasks first
        rec.ended = time.time()  # the other worker is alive throughout
        await asyncio.to_thread(stack.replace_worker, name)

    return inject


NODE_CREATE = {"method": "POST", "path_regex": r"^/api/v1/nodes$"}  # a KWOK provider's create


async def workflow_of(temporal: Client, request: str) -> str:
    """The workflow whose node carries this request label: a batch member's label is its member
    id's (`<batch id>#<index>`), found in the loop's in-flight table; an old NodeRequest's is its
    own id's ("" until the loop shows it)."""
    status = await temporal.get_workflow_handle(autoscaler_id(CLUSTER)).query(NodeAutoscalerWorkflow.status)
    return next(
        (split_request_id(r.id)[0] for r in [*status.in_flight, *status.recent] if request_key(r.id) == request), ""
    )


async def held_create(temporal: Client, workflow_id: str, timeout: float) -> list[Pending]:
    """Every pending activity at the first moment `workflow_id` has one create in progress: the
    held one. A batch creates its members' nodes side by side; the API server answers every
    create but the held one at once, so the one left running is the one that sent it."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        snapshot = await wait_for_activity(
            temporal, CREATE_NODE, deadline - time.monotonic(), match=lambda p: p.workflow_id == workflow_id
        )
        mine = [p for p in snapshot if p.workflow_id == workflow_id and p.activity_type == CREATE_NODE and p.started]
        if len(mine) == 1:
            return snapshot
        await asyncio.sleep(0.05)
    return []


def kill_worker_during_held_create(sig: int = signal.SIGKILL, timeout: float = 120) -> Fault:
    """SIGKILL the worker whose `create_node` is in progress, held there (for a batch, the
    member's create: held_create): the API server holds the first node create unanswered (a request hold, in place before the loop plans), so the
    activity that sent it runs until the kill, whichever worker took it and however soon the
    loop was woken. The create is then served (the node made, its answer lost with the dead
    worker): the retry on another worker must find that node, not make a second."""

    async def inject(stack: Stack, temporal: Client, rec: FaultRecord) -> None:
        faults = f"{stack.sim_url}/sim/v1/faults"
        async with httpx.AsyncClient(verify=False, timeout=10) as http:
            (await http.post(faults, json={"request_holds": [{**NODE_CREATE, "times": 1}]})).raise_for_status()
            try:
                deadline = time.monotonic() + timeout
                while not (held := (await http.get(faults)).json()["request_holds"][0]["objects"]):
                    if time.monotonic() > deadline:
                        rec.skipped = f"no node create reached the API server within {timeout:.0f} s"
                        return
                    await asyncio.sleep(0.05)
                request = held[0]["labels"].get(LABEL_REQUEST, "")
                snapshot = await held_create(temporal, await workflow_of(temporal, request), 60)
                name = stack.worker_by_pid(snapshot[0].worker_pid) if snapshot and snapshot[0].worker_pid else None
                if name is None:
                    rec.skipped = f"the held create of {request} not seen running on a worker of ours"
                    return
                rec.stalled, rec.started = snapshot, time.time()
                stack.workers[name].stop(sig, timeout=30)
            finally:
                (await http.post(faults, json={"request_holds": []})).raise_for_status()  # served now
        rec.ended = time.time()  # the other worker is alive throughout
        await asyncio.to_thread(stack.replace_worker, name)

    return inject


def kill_worker_during_held_start(timeout: float = 120) -> Fault:
    """SIGKILL the worker whose `start_node_requests` is in progress, held there: the worker's
    first NodeRequest or NodeRequestBatch start waits, unsent, in front of the Temporal server (bench/start_hold.py,
    armed before the loop plans), so the activity runs until the kill, whichever worker took it.
    Its retry on the other worker must start the held request and find the ones it started
    already, none twice."""

    async def inject(stack: Stack, temporal: Client, rec: FaultRecord) -> None:
        (stack.holds / ARMED).touch()
        try:
            deadline = time.monotonic() + timeout
            while (held := next(stack.holds.glob("held-*"), None)) is None:
                if time.monotonic() > deadline:
                    rec.skipped = f"no NodeRequest or NodeRequestBatch start within {timeout:.0f} s"
                    return
                await asyncio.sleep(0.05)
            pid = int(held.name.removeprefix("held-"))
            snapshot = await wait_for_activity(
                temporal, START_NODE_REQUESTS, 60, only=autoscaler_id(CLUSTER), match=lambda p: p.worker_pid == pid
            )
            name = stack.worker_by_pid(pid)
            if name is None or not snapshot:
                rec.skipped = f"the held start (worker pid {pid}) not seen in a running {START_NODE_REQUESTS}"
                return
            rec.stalled, rec.started = snapshot, time.time()
            stack.workers[name].stop(signal.SIGKILL, timeout=30)
        finally:
            (stack.holds / ARMED).unlink(missing_ok=True)  # not taken: no later start is held
            for held in stack.holds.glob("held-*"):
                held.unlink()  # lifted: a holder still alive sends its start
        rec.ended = time.time()  # the other worker is alive throughout
        await asyncio.to_thread(stack.replace_worker, name)

    return inject


def kill_worker_taking(activity_type: str, timeout: float = 60) -> Fault:
    """SIGKILL the worker that took the loop's next `activity_type` (observe). Its only
    counterpart is the Temporal server, which nothing can hold while it also answers describe,
    and it is quick: a poll of the loop missed `start_node_requests` in 1 of 3 runs. So the
    loop's history is followed (a long poll: the server pushes the scheduled event as the loop's
    workflow task completes) and every worker is frozen (SIGSTOP) the moment it arrives: the
    activity, started or dispatched to a frozen worker's waiting poll, can no longer finish, and
    the describe that names its worker is no race. One that finished before the freeze is let go
    and the next one awaited. (`start_node_requests`, dispatched with that workflow task's
    answer and over in tens of milliseconds, still finished first in 2 runs of 7: its fault
    holds it instead, kill_worker_during_held_start.)"""

    async def frozen_strike(stack: Stack, temporal: Client, rec: FaultRecord, activity_id: str) -> str | None:
        """With every worker frozen: kill the one holding `activity_id`; None when it is done."""
        frozen = [w for w in stack.workers.values() if w.alive()]
        for w in frozen:
            os.killpg(w.popen.pid, signal.SIGSTOP)
        try:
            thaw = time.monotonic() + 5  # a waiting poll takes the task at once; never freeze long
            while time.monotonic() < thaw:
                now = {p.activity_id: p for p in await pending_activities(temporal, autoscaler_id(CLUSTER))}
                mine = now.get(activity_id)
                if mine is None:
                    return None  # finished before the freeze
                name = stack.worker_by_pid(mine.worker_pid) if mine.started and mine.worker_pid else None
                if name is not None:
                    rec.stalled, rec.started = [mine, *(p for p in now.values() if p != mine)], time.time()
                    stack.workers[name].stop(signal.SIGKILL, timeout=30)
                    return name
                await asyncio.sleep(0.02)
            return None
        finally:
            for w in frozen:
                if w.alive():
                    os.killpg(w.popen.pid, signal.SIGCONT)

    async def strike(stack: Stack, temporal: Client, rec: FaultRecord) -> str:
        loop = temporal.get_workflow_handle(autoscaler_id(CLUSTER))
        seen = (await loop.describe()).raw_description.workflow_execution_info.history_length
        while True:  # a continue-as-new ends the iterator: follow the next run
            async for event in loop.fetch_history_events(wait_new_event=True):
                attrs = event.activity_task_scheduled_event_attributes
                if event.event_id <= seen or event.event_type != EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
                    continue
                if attrs.activity_type.name == activity_type:
                    name = await frozen_strike(stack, temporal, rec, attrs.activity_id)
                    if name is not None:
                        return name
            seen = 0

    async def inject(stack: Stack, temporal: Client, rec: FaultRecord) -> None:
        try:
            name = await asyncio.wait_for(strike(stack, temporal, rec), timeout)
        except TimeoutError:
            rec.skipped = f"no {activity_type} taken by a worker of ours within {timeout:.0f} s"
            return
        rec.ended = time.time()  # the other worker is alive throughout
        await asyncio.to_thread(stack.replace_worker, name)

    return inject


async def _strike_when(
    temporal: Client, activity_type: str | tuple[str, ...] | None, rec: FaultRecord, **where: Any
) -> bool:
    """Wait for a started activity of this type (None: strike now; `where`: wait_for_activity's
    only and started), and note what is in progress then; False when none came."""
    if activity_type is None:
        rec.stalled = await pending_activities(temporal)
        return True
    rec.stalled = await wait_for_activity(temporal, activity_type, 60, **where)
    if not rec.stalled:
        rec.skipped = f"no {activity_type} seen running"
    return bool(rec.stalled)


def restart_temporal(
    during: str | tuple[str, ...] | None = READINESS, started: bool = True, hold: tuple[str, str] | None = None
) -> Fault:
    """SIGKILL the dev server and start it again on the same database and port, while such an
    activity runs (or is scheduled; None: now), held in progress by the API server holding its
    request (`hold`: holding) when it is too quick to catch."""

    async def inject(stack: Stack, temporal: Client, rec: FaultRecord) -> None:
        async with holding(stack, hold, rec) as held:
            if not held or not await _strike_when(temporal, during, rec, started=started):
                return
            rec.started = time.time()
            await asyncio.to_thread(stack.restart_temporal)
        rec.ended = time.time()

    return inject


def restart_api_server(during: str | tuple[str, ...] | None = READINESS) -> Fault:
    """SIGKILL the simulated cluster and start it again on its data directory."""

    async def inject(stack: Stack, temporal: Client, rec: FaultRecord) -> None:
        if not sim_keeps_state():
            rec.skipped = "sim.cluster keeps no state across a restart here (no --data-dir): issue 20 item 2"
            return
        if not await _strike_when(temporal, during, rec):
            return
        rec.started = time.time()
        await asyncio.to_thread(stack.procs.restart_sim_cluster)  # type: ignore[attr-defined]
        rec.ended = time.time()

    return inject


def pause_api_server(seconds: float) -> Fault:
    async def inject(stack: Stack, temporal: Client, rec: FaultRecord) -> None:
        if not await _strike_when(temporal, READINESS, rec):
            return
        sim = sim_proc(stack)
        rec.started = time.time()
        os.killpg(sim.popen.pid, signal.SIGSTOP)  # hangs: connections stay open, nothing answers
        try:
            await asyncio.sleep(seconds)  # the fault's length, not synchronisation
        finally:
            os.killpg(sim.popen.pid, signal.SIGCONT)
        rec.ended = time.time()

    return inject


STORM_TIMES = 100_000  # refusals a storm holds: more than any run sends


async def storm_began(first_hit: Callable[[], Awaitable[bool]], rec: FaultRecord, timeout: float = 120) -> bool:
    """Wait until the storm, already in place, has refused its first request (read from the
    sim, so it is never missed however briefly the loop's create activities run); False (and
    rec.skipped says why) when none came."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if await first_hit():
            return True
        await asyncio.sleep(0.05)
    rec.skipped = f"no request met the storm within {timeout:.0f} s"
    return False


async def storm(
    temporal: Client,
    rec: FaultRecord,
    began: Callable[[], Awaitable[bool]],
    seconds: float,
    end: Callable[[], Awaitable[object]],
) -> None:
    """A storm already in place, from the request it first refused (`began`: False when none
    came, the record skipped) for `seconds`, then ended (`end`, whatever happened). What it
    stalled: the work in progress as it began, and what still retries at its end."""
    try:
        if not await began():
            return
        rec.started = time.time()
        rec.stalled = await pending_activities(temporal)
        await asyncio.sleep(seconds)  # the storm's length
    finally:
        await end()
    rec.ended = time.time()
    rec.stalled += [p for p in await pending_activities(temporal) if p not in rec.stalled]


def node_create_storm(status: int, seconds: float) -> Fault:
    """Every node create answered `status` for `seconds` from the first one refused (the KWOK
    provider's API is the cloud). In place before the loop plans, so no create slips past."""

    async def inject(stack: Stack, temporal: Client, rec: FaultRecord) -> None:
        failure = {"method": "POST", "path_regex": r"^/api/v1/nodes$", "status": status, "times": STORM_TIMES}
        failure["reason"] = "TooManyRequests" if status == 429 else "ServiceUnavailable"
        async with httpx.AsyncClient(verify=False, timeout=10) as http:

            async def refused() -> bool:
                left = (await http.get(f"{stack.sim_url}/sim/v1/faults")).json()["request_failures"]
                return not left or left[0]["times"] < STORM_TIMES

            async def end() -> None:
                (await http.delete(f"{stack.sim_url}/sim/v1/faults")).raise_for_status()

            (await http.post(f"{stack.sim_url}/sim/v1/faults", json={"request_failures": [failure]})).raise_for_status()
            await storm(temporal, rec, lambda: storm_began(refused, rec), seconds, end)

    return inject


FAULTS: dict[str, Fault] = {
    "kill-worker-during-observe": kill_worker_taking(OBSERVE_CLUSTER),
    "kill-worker-during-start": kill_worker_during_held_start(),
    "kill-worker-during-create": kill_worker_during_held_create(),
    "kill-worker-during-readiness": kill_worker_during(READINESS),
    "sigterm-worker-during-readiness": kill_worker_during(READINESS, signal.SIGTERM),
    "kill-worker-during-drain": kill_worker_during(EVICT_POD, hold=EVICTION),
    "restart-temporal": restart_temporal(),
    "restart-temporal-during-drain": restart_temporal(EVICT_POD, hold=EVICTION),
    "restart-api-server": restart_api_server(),
    "node-create-503-storm": node_create_storm(503, 5),
    "node-create-429-storm": node_create_storm(429, 5),
}


# -- scenarios ---------------------------------------------------------------------------------
@dataclass
class Outcome:
    scenario: str
    faults: list[FaultRecord]
    violations: list[str]
    nodes_created: int
    seconds: float
    nodes_left: int | None = None
    created: dict[str, int] | None = None  # what a loop other than nodes creates, by name

    def line(self) -> dict[str, Any]:
        return {
            "scenario": self.scenario,
            "faults_injected": sum(1 for f in self.faults if not f.skipped),
            "faults": [
                {"fault": f.name, "skipped": f.skipped}
                if f.skipped
                else {
                    "fault": f.name,
                    "recovery_s": f.recovery_s,
                    "stalled": sorted({p.activity_type for p in f.stalled}),
                }
                for f in self.faults
            ],
            "invariant_violations": self.violations,
            **(self.created or {"nodes_created": self.nodes_created}),
            **({} if self.nodes_left is None else {"nodes_left": self.nodes_left}),
            "seconds": round(self.seconds, 1),
        }


def running_pods(api: client.ApiClient, app: str) -> tuple[int, int]:
    pods = client.CoreV1Api(api).list_namespaced_pod("default", label_selector=f"app={app}").items
    return sum(1 for p in pods if p.status.phase == "Running"), len(pods)


def start_faults(
    stack: Stack, temporal: Client, faults: list[tuple[str, Fault]]
) -> tuple[list[FaultRecord], asyncio.Task]:
    """The faults, one after another, beside the workload."""
    records = [FaultRecord(name) for name, _ in faults]

    async def schedule() -> None:
        for (_, inject), rec in zip(faults, records):
            await inject(stack, temporal, rec)

    return records, asyncio.create_task(schedule())


async def beside_faults(
    stack: Any, temporal: Client, faults: list[tuple[str, Fault]], workload: Awaitable[dict[str, Any]], what: str
) -> tuple[dict[str, Any], list[FaultRecord], list[str]]:
    """`workload` (a demo scenario's run, returning its summary) with the faults one after another
    beside it: (summary or {}, the faults' records, violations: a run that does not finish)."""
    records, faults_done = start_faults(stack, temporal, faults)
    violations: list[str] = []
    try:
        summary = await workload
        await asyncio.wait_for(faults_done, 60)
    except Exception as e:  # noqa: BLE001 - a run that does not finish is a violation, named
        violations.append(f"{what} did not finish: {(str(e) or repr(e))[:300]}")
        summary = {}
    finally:
        faults_done.cancel()
    return summary, records, violations


async def settle(
    stack: Stack, handle: Any, faults_done: asyncio.Task, done: Callable[[AutoscalerStatus], bool], timeout: float
) -> AutoscalerStatus | None:
    """Wait (deadline `timeout`) for the faults to be over and `done(status)`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if faults_done.done():
            faults_done.result()
            if running_pods(stack.api, "burst")[0] == stack.replicas:  # pods first: the status must be newer
                status = await handle.query(NodeAutoscalerWorkflow.status)
                if done(status):
                    return status
        await asyncio.sleep(0.5)
    return None


async def start_node_loop(stack: Stack, temporal: Client, **settings: Any) -> Any:
    """The cluster's NodeAutoscaler on quick timers (a scan each second); `settings` override them."""
    quick: dict[str, Any] = {
        "scan_interval_s": 1,
        "readiness_timeout_s": 120,
        "readiness_poll_s": 0.5,
        "request_ttl_s": 600,
        "eviction_retry_s": 0.5,
    }
    return await temporal.start_workflow(
        NodeAutoscalerWorkflow.run,
        AutoscalerInput(settings=AutoscalerSettings(cluster=CLUSTER, **(quick | settings))),
        id=autoscaler_id(CLUSTER),
        task_queue=stack.task_queue,
    )


async def node_burst(
    workdir: Path,
    faults: list[tuple[str, Fault]],
    pods: int,
    timeout: float = 600,
    hetzner: bool = False,
    **group_spec: Any,
) -> tuple[Outcome, Stack, Client]:
    """A Deployment of `pods` (500m each) on an empty cluster, one KWOK pool (`hetzner`: the
    Hetzner demo's group and workload on the fake Hetzner API), `group_spec` in the group's
    spec; the faults run one after another while it scales up. Returns with the stack still up,
    for the checks (stopped when anything fails on the way)."""
    stack = Stack(workdir)
    if hetzner:
        stack.hetzner = HetznerBurstScenario(argparse.Namespace(pods=pods))
    try:
        return await _burst(stack, faults, pods, timeout, group_spec)
    except BaseException:
        stack.stop()
        raise


async def _burst(
    stack: Stack, faults: list[tuple[str, Fault]], pods: int, timeout: float, group_spec: dict[str, Any]
) -> tuple[Outcome, Stack, Client]:
    stack.start(["--node-ready-delay", "2"])
    temporal = await stack.client()
    if stack.hetzner is not None:
        for group in stack.hetzner.node_groups():
            apply_node_group(stack.api, {**group, "spec": group["spec"] | group_spec})
        burst = stack.hetzner.workload()
    else:
        apply_node_group(stack.api, node_group("general", KWOK_POOLS, **group_spec))
        burst = deployment("burst", pods, "500m", "256Mi")
    handle = await start_node_loop(stack, temporal)
    began = time.monotonic()
    stack.replicas = pods
    client.AppsV1Api(stack.api).create_namespaced_deployment("default", burst)
    records, faults_done = start_faults(stack, temporal, faults)
    status = await settle(stack, handle, faults_done, lambda s: not s.in_flight, timeout)
    faults_done.cancel()  # a fault still waiting for its moment when the run timed out
    violations = [] if status is not None else [f"pods not all running within {timeout:.0f} s"]
    return Outcome("node-burst", records, violations, 0, time.monotonic() - began), stack, temporal


async def node_scale_down(
    workdir: Path, faults: list[tuple[str, Fault]], pods: int, timeout: float = 600
) -> tuple[Outcome, Stack, Client, int]:
    """The burst, then a PodDisruptionBudget (maxUnavailable 1) and the Deployment shrunk to a
    quarter: underused nodes are drained (evictions the budget paces) and removed, with the
    faults running meanwhile. Ends when no removal has run for 20 s; returns the nodes left."""
    outcome, stack, temporal = await node_burst(workdir, [], pods, scaleDown=SCALE_DOWN)
    if outcome.violations:
        return outcome, stack, temporal, 0
    try:
        return await _shrink(stack, temporal, outcome, faults, pods, timeout)
    except BaseException:
        stack.stop()
        raise


async def _shrink(
    stack: Stack, temporal: Client, outcome: Outcome, faults: list[tuple[str, Fault]], pods: int, timeout: float
) -> tuple[Outcome, Stack, Client, int]:
    began = time.monotonic()
    handle = temporal.get_workflow_handle(autoscaler_id(CLUSTER))
    await asyncio.to_thread(write_volume, stack)
    client.PolicyV1Api(stack.api).create_namespaced_pod_disruption_budget(
        "default",
        {"metadata": {"name": "burst"}, "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "burst"}}}},
    )
    stack.replicas = max(1, pods // 4)
    client.AppsV1Api(stack.api).patch_namespaced_deployment_scale(
        "burst", "default", {"spec": {"replicas": stack.replicas}}
    )
    records, faults_done = start_faults(stack, temporal, faults)
    quiet_since: list[float] = []

    def done(s: AutoscalerStatus) -> bool:
        if s.scale_downs or s.in_flight:
            quiet_since.clear()
            return False
        quiet_since.append(time.monotonic())
        return quiet_since[-1] - quiet_since[0] >= 20  # no removal for 20 s: nothing more to remove

    status = await settle(stack, handle, faults_done, done, timeout)
    faults_done.cancel()  # a fault still waiting for its moment when the run timed out
    if status is None:
        outcome.violations.append(f"scale-down not finished within {timeout:.0f} s")
    final = len(client.CoreV1Api(stack.api).list_node(label_selector=LABEL_REQUEST).items)
    outcome.faults, outcome.seconds = records, time.monotonic() - began
    return outcome, stack, temporal, final


def write_volume(stack: Stack) -> None:
    """A 3-replica Longhorn volume on the burst's nodes, written and detached: the scale-down
    may remove its nodes only while another healthy replica remains (the storage scenario's rule)."""
    lh = stack.longhorn = FakeLonghorn.from_kubeconfig(stack.kubeconfig, interval=0.2).start()
    on = lh.create_volume(VOLUME, 3)
    lh.attach(VOLUME, on[0])
    lh.write(VOLUME, b"chaos data " * 4096)
    stack.volume_checksum = lh.checksum(VOLUME)
    lh.detach(VOLUME)


async def check(stack: Stack, temporal: Client, outcome: Outcome, expected_nodes: int | None) -> None:
    """The invariants, appended to outcome.violations; recovery per fault."""
    v = outcome.violations
    nodes = client.CoreV1Api(stack.api).list_node(label_selector=LABEL_REQUEST).items
    per_request = Counter(n.metadata.labels[LABEL_REQUEST] for n in nodes)
    v += [f"second node for request {r}" for r, n in per_request.items() if n > 1]
    status = await temporal.get_workflow_handle(autoscaler_id(CLUSTER)).query(NodeAutoscalerWorkflow.status)
    outcome.nodes_created = status.nodes_created
    removed = status.scale_down_by_phase.get("Removed", 0)
    if len(nodes) != status.nodes_created - removed:
        v.append(f"leaked nodes: {len(nodes)} nodes, {status.nodes_created} requests Ready, {removed} removed")
    if expected_nodes is not None and status.nodes_created != expected_nodes:
        v.append(f"nodes created {status.nodes_created}, fault-free run {expected_nodes}")
    evicted = await check_histories(temporal, stack.worker_logs(), outcome)
    v += [f"pod {pod} evicted {n} times" for pod, n in evicted.items() if n > 1]
    if stack.longhorn is not None:
        try:
            if stack.longhorn.checksum(VOLUME) != stack.volume_checksum:
                v.append(f"volume {VOLUME} changed by the scale-down")
        except LonghornError as e:  # no healthy replica left: a removal lost the data
            v.append(f"removal lost data: {e}")


def _payload(payloads: Any) -> Any:
    return json.loads(payloads.payloads[0].data)  # json/plain, as the pydantic converter writes it


async def check_histories(temporal: Client, worker_logs: str, outcome: Outcome) -> Counter[str]:
    """Every loop's invariants read from the histories (no workflow failed, terminated or timed
    out; no non-determinism), appended to outcome.violations; recovery per fault. Returns per
    pod the evictions the API server accepted, over all drains (more than one is a violation)."""
    v = outcome.violations
    completions: dict[tuple[str, str, str], float] = {}
    activity_done: list[float] = []  # any activity of the loop, when it completed
    evicted: Counter[str] = Counter()
    async for wf in temporal.list_workflows():
        if wf.status in BAD_ENDINGS:
            v.append(f"workflow {wf.id} {wf.status.name.lower()}")
        history = await temporal.get_workflow_handle(wf.id, run_id=wf.run_id).fetch_history()
        ids: dict[int, str] = {}
        evictions: dict[int, str] = {}  # scheduled event -> the pod an evict_pod was for
        in_order: set[int] = set()  # evict_in_order's: its result names each pod it evicted
        for e in history.events:
            at = e.event_time.ToDatetime().timestamp()
            if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
                attrs = e.activity_task_scheduled_event_attributes
                ids[e.event_id] = attrs.activity_id
                if attrs.activity_type.name == EVICT_POD:
                    pod = _payload(attrs.input)
                    evictions[e.event_id] = f"{pod['namespace']}/{pod['name']}"
                elif attrs.activity_type.name == EVICT_IN_ORDER:
                    in_order.add(e.event_id)
            elif e.event_type in COMPLETED:
                sid = getattr(e, COMPLETED[e.event_type]).scheduled_event_id
                completions[(wf.id, wf.run_id, ids.get(sid, ""))] = at
                activity_done.append(at)
                if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED and sid in evictions:
                    result = _payload(e.activity_task_completed_event_attributes.result)
                    evicted[evictions[sid]] += result["outcome"] == "evicted"
                elif e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED and sid in in_order:
                    evicted.update(
                        d["pod"]
                        for d in _payload(e.activity_task_completed_event_attributes.result)
                        if d["outcome"] == "evicted"
                    )
            elif e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED:
                cause = e.workflow_task_failed_event_attributes.cause
                if cause == WorkflowTaskFailedCause.WORKFLOW_TASK_FAILED_CAUSE_NON_DETERMINISTIC_ERROR:
                    v.append(f"non-determinism in {wf.id}")
    if "nondetermin" in worker_logs.lower():
        v.append("a worker logged non-determinism")
    for f in outcome.faults:
        if not f.skipped and not f.ended:  # still waiting for its moment when the run ended
            f.skipped = "the run ended before the fault did"
        if f.skipped:  # every run injects every fault: one that never struck tested nothing
            v.append(f"fault {f.name} not injected: {f.skipped}")
            continue
        stalled = [completions.get((p.workflow_id, p.run_id, p.activity_id)) for p in f.stalled]
        # Stalled work that completed while the fault lasted (a storm answered, then retried
        # past it) says nothing of recovery: then the loop's next completion counts.
        ends = [t for t in stalled if t is not None and t > f.ended]
        if not ends:
            ends = [min((t for t in activity_done if t > f.ended), default=f.ended)]
        f.recovery_s = round(max(0.0, max(ends) - f.ended), 2)
    return evicted
