"""`make chaos` for the Hetzner burst: the node loop creating servers on the fake Hetzner API.

The stack is bench/chaos_harness.py's (dev server on a database file, simulated cluster, two workers)
with the fake Hetzner API started and configured as `make demo --provider hetzner` does it
(starters/scenarios/hetzner.py: tokens in files, CAX11 short of capacity so requests move
across locations and pools, servers boot into the cluster as Nodes). Faults, from the fake's
control API (sim/clouds/hetzner.py): the worker SIGKILLed while a create is in progress (every
create's answer held 5 s, inside the client's timeout, until the kill), a 5xx storm
(`server_error`) on creates and a 429 storm (the project's bucket emptied: `rate_limit_exceeded`
with RateLimit-Remaining 0 and Reset at Hetzner's refill rate), and lost create responses: the server is created and the answer dropped
(connection closed), or answered 502 `bad_gateway` (hcloud re-sends the create) or 500
`server_error` (the activity retries). Invariants beyond the node burst's: no request with a
second server (the servers' request label), no server without a Node, servers created equal
the fault-free run's.
"""

from __future__ import annotations

import asyncio
import signal
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kubernetes import client
from temporalio.client import Client

from bench.chaos_harness import (
    Fault,
    FaultRecord,
    Outcome,
    Pending,
    Stack,
    check,
    node_burst,
    pending_activities,
    storm,
    storm_began,
    wait_for_activity,
)
from scaling.nodes.contracts import CREATE_NODE
from scaling.nodes.models import LABEL_REQUEST
from starters.scenarios.hetzner import control


async def fake(stack: Stack, method: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
    """The fake Hetzner's control API (/sim/v1/...)."""
    assert stack.hetzner is not None
    return await asyncio.to_thread(control, stack.hetzner.base_url, method, path, body)


def kill_worker_during_create(sig: int = signal.SIGKILL, match: Callable[[Pending], bool] = lambda p: True) -> Fault:
    """Every create's answer held 5 s (the server is made at once; the client waits within its
    10 s timeout) until the worker running one is killed; a new worker replaces it. The retry on
    the other worker must find the server by its request labels, not make a second. `match`:
    that create only (a replacement's successor: bench/chaos_replacement.py)."""

    async def inject(stack: Stack, temporal: Client, rec: FaultRecord) -> None:
        await fake(stack, "POST", "/lose_create_responses", {"count": 1000, "mode": "delay", "delay_s": 5})
        try:
            snapshot = await wait_for_activity(temporal, CREATE_NODE, 120, match=match)
            name = stack.worker_by_pid(snapshot[0].worker_pid) if snapshot and snapshot[0].worker_pid else None
            if name is None:
                rec.skipped = f"no {CREATE_NODE} seen running on a worker of ours"
                return
            rec.stalled, rec.started = snapshot, time.time()
            await asyncio.to_thread(stack.workers[name].stop, sig, 30)
        finally:
            await fake(stack, "POST", "/lose_create_responses", {"count": 0})
        rec.ended = time.time()
        await asyncio.to_thread(stack.replace_worker, name)

    return inject


def create_storm(seconds: float, status: int) -> Fault:
    """Creates answered 500 `server_error`; or (429) the project's bucket emptied as another tool
    would, so every request is answered 429 `rate_limit_exceeded` as Hetzner answers it
    (RateLimit-Remaining 0, Reset when the bucket is full at the documented refill of one
    request a second, which lets one through now and then), and filled again at the end (the
    other tool stopped, its hour over). In place before the loop plans; it lasts `seconds` from
    the first request it refused, as the fake counts them, so it is never missed."""

    async def inject(stack: Stack, temporal: Client, rec: FaultRecord) -> None:
        if status == 429:
            await fake(stack, "POST", "/rate_remaining", {"remaining": 0})
        else:
            fault = {"code": "server_error", "count": 1_000_000, "method": "POST", "path": "/servers"}
            await fake(stack, "POST", "/faults", fault)

        async def refused() -> bool:
            stats = await fake(stack, "GET", "/stats")
            if status == 429:
                return int(stats["projects"].get("default", {}).get("responses_429", 0)) > 0
            return int(stats["requests_by_route"].get("POST /servers", 0)) > 0

        # The end resets the 429 storm too: buckets start full again.
        await storm(
            temporal, rec, lambda: storm_began(refused, rec), seconds, lambda: fake(stack, "POST", "/reset_faults")
        )

    return inject


def lose_creates(count: int, mode: str, code: str = "server_error") -> Fault:
    """The next `count` creates are made but their answers lost (`mode` drop or error with
    `code`). The fault ends when the last lost answer has gone out; the creates retrying then
    are what it stalled."""

    async def inject(stack: Stack, temporal: Client, rec: FaultRecord) -> None:
        rec.started = time.time()
        await fake(stack, "POST", "/lose_create_responses", {"count": count, "mode": mode, "code": code})
        deadline = time.monotonic() + 120
        while (await fake(stack, "GET", "/stats"))["lost_create_responses_left"] > 0:
            if time.monotonic() > deadline:
                rec.skipped = f"{count} creates not all made within 120 s"
                return
            await asyncio.sleep(0.05)
        rec.ended = time.time()
        rec.stalled = [p for p in await pending_activities(temporal) if p.activity_type == CREATE_NODE]

    return inject


HETZNER_FAULTS: dict[str, Fault] = {
    "kill-worker-during-hetzner-create": kill_worker_during_create(),
    "hetzner-500-storm": create_storm(5, 500),
    "hetzner-429-storm": create_storm(5, 429),
    "hetzner-lost-create-dropped": lose_creates(2, "drop"),
    "hetzner-lost-create-502": lose_creates(2, "error", "bad_gateway"),
    "hetzner-lost-create-500": lose_creates(2, "error", "server_error"),
}


def server_violations(servers: list[dict[str, Any]], backed: set[str]) -> list[str]:
    """No request with a second server (the servers' request label), none without a Node
    (`backed`: the Nodes' provider ids): leaked."""
    per_request = Counter(s["labels"].get(LABEL_REQUEST, "") for s in servers)
    v = [f"second server for request {r}" for r, n in per_request.items() if n > 1]
    return v + [f"leaked server {s['name']} (no Node)" for s in servers if f"hcloud://{s['id']}" not in backed]


async def check_servers(
    stack: Stack, outcome: Outcome, expected_servers: int | None, nodes_made: int | None = None
) -> int:
    """The Hetzner invariants, appended to outcome.violations: server_violations, and every
    server made one a Ready request accounts for (`nodes_made`, by default outcome.nodes_created
    after check()), as many as the fault-free run made. Returns the servers created."""
    servers = (await fake(stack, "GET", "/servers"))["servers"]
    created = int((await fake(stack, "GET", "/stats"))["created_total"])
    nodes = await asyncio.to_thread(client.CoreV1Api(stack.api).list_node)
    backed = {n.spec.provider_id for n in nodes.items if n.spec and n.spec.provider_id}
    v = outcome.violations
    v += server_violations(servers, backed)
    made = outcome.nodes_created if nodes_made is None else nodes_made
    if created != made:
        v.append(f"servers created {created}, nodes Ready requests made {made}")
    if expected_servers is not None and created != expected_servers:
        v.append(f"servers created {created}, fault-free run {expected_servers}")
    return created


async def hetzner_burst(workdir: Path, names: list[str], pods: int, expected: dict[str, Any]) -> Outcome:
    """The Hetzner burst with the faults `names`, checked; `expected` holds the fault-free
    run's figures (filled by it)."""
    faults = [(n, HETZNER_FAULTS[n]) for n in names]
    outcome, stack, temporal = await node_burst(workdir, faults, pods, timeout=600, hetzner=True)
    try:
        await check(stack, temporal, outcome, expected.get("hetzner-burst/created"))
        created = await check_servers(stack, outcome, expected.get("hetzner-burst/servers"))
    finally:
        stack.stop()
    if not names:
        expected["hetzner-burst/created"] = outcome.nodes_created
        expected["hetzner-burst/servers"] = created
    outcome.created = {"nodes_created": outcome.nodes_created, "servers_created": created}
    return outcome
