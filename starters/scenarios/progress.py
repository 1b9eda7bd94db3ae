"""Watching a scenario: request state changes, a progress bar, decision latency."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections import Counter
from collections.abc import Iterable
from datetime import UTC, datetime

from kubernetes import client

from scaling.kube.pods import is_unschedulable, unschedulable_since
from scaling.nodes.headroom import is_headroom
from scaling.nodes.scale_up.requests import NodeRequestStatus
from scaling.nodes.status import AutoscalerStatus


def short_id(request_id: str) -> str:
    return request_id.rsplit("/", 1)[-1]


class RequestLog:
    """Prints one line per NodeRequest state change (pool, phase, last attempt result)."""

    def __init__(self, out=print) -> None:  # noqa: ANN001
        self.seen: dict[str, tuple[str, str, int]] = {}
        self.started: dict[str, tuple[float, int]] = {}  # request -> its start, pods made for
        self.out = out

    def update(self, status: AutoscalerStatus) -> None:
        for r in [*status.recent, *status.in_flight]:
            self._one(r)

    def _one(self, r: NodeRequestStatus) -> None:
        if r.started_at is not None and r.id not in self.started:
            self.started[r.id] = request_start(r)
        last = r.attempts[-1] if r.attempts else None
        key = (r.phase.value, r.current_pool, len(r.attempts) * 10 + (hash(last.result.value) % 10 if last else 0))
        if self.seen.get(r.id) == key:
            return
        self.seen[r.id] = key
        attempt = f"{last.pool}: {last.result.value}" if last else "-"
        self.out(
            f"{time.strftime('%H:%M:%S')}  request {short_id(r.id)}  pool {r.current_pool:<14} phase {r.phase.value:<12} attempt {attempt}"
        )


class PodWatch:
    """Polls the workload's pods: since when each is unschedulable, how many run."""

    def __init__(self, api: client.ApiClient, selector: str) -> None:
        self.core = client.CoreV1Api(api)
        self.selector = selector
        self.first_unschedulable: dict[str, float] = {}
        self.created: dict[str, float] = {}  # pod uid -> its creationTimestamp (epoch seconds)
        self.started: dict[str, float] = {}  # pod uid -> its status.startTime, once it runs
        self.total = 0
        self.running_on: Counter[str] = Counter()  # node name -> the workload's pods running there

    @property
    def running(self) -> int:
        return self.running_on.total()

    async def poll(self) -> None:
        # Raw JSON: the client's model deserialization of thousands of pods costs seconds a poll.
        resp = await asyncio.to_thread(
            self.core.list_pod_for_all_namespaces, label_selector=self.selector, _preload_content=False
        )
        pods = json.loads(resp.data)["items"]
        now = time.time()
        self.total = len(pods)
        self.running_on = Counter()
        for p in pods:
            status = p.get("status") or {}
            if status.get("phase") == "Running":
                self.running_on[(p.get("spec") or {}).get("nodeName", "")] += 1
            meta = p["metadata"]
            if meta["uid"] not in self.created and meta.get("creationTimestamp"):
                self.created[meta["uid"]] = datetime.fromisoformat(meta["creationTimestamp"]).timestamp()
            if meta["uid"] not in self.started and status.get("phase") == "Running" and status.get("startTime"):
                self.started[meta["uid"]] = datetime.fromisoformat(status["startTime"]).timestamp()
            if is_unschedulable(p):  # as the autoscaler's observer reads it
                # Since when, as the scheduler recorded it (whole seconds): a slow poll does not
                # shorten the latency measured.
                since = unschedulable_since(p)
                at = now if since is None else min(since.timestamp(), now)
                self.first_unschedulable.setdefault(p["metadata"]["uid"], at)

    def decision_latencies(self, started: Iterable[tuple[float, int]]) -> list[float]:
        """Decision latency per pod (fifo_latencies) for requests (start, pods made for)."""
        return fifo_latencies(list(self.first_unschedulable.values()), started)

    def running_latencies(self) -> list[float]:
        """Seconds from each running pod's creation to its start (both the API server's whole-second
        stamps): every pod, whether a request was made for it or it fit room already there."""
        return [max(0.0, at - self.created[uid]) for uid, at in self.started.items() if uid in self.created]

    def creation_latencies(self, started: Iterable[tuple[float, int]]) -> list[float]:
        """Seconds per pod from its creation to a later step of the request covering it (fifo_latencies
        over the pods' creation times), for (when, pods made for) per request or batch member."""
        return fifo_latencies(list(self.created.values()), started)


def request_start(r: NodeRequestStatus) -> tuple[float, int]:
    """When a request started (epoch seconds) and how many real pods it was made for."""
    assert r.started_at is not None
    at = r.started_at.replace(tzinfo=r.started_at.tzinfo or UTC).timestamp()
    return at, sum(n for key, n in r.pods.items() if not is_headroom(key)) or len(r.pod_uids)


def fifo_latencies(since: Iterable[float], started: Iterable[tuple[float, int]]) -> list[float]:
    """Seconds from a pod becoming unschedulable to the start of the request that covers it.

    Requests hold pods by count, not by name, so pods are matched first come, first served:
    pods in the order they became unschedulable, requests in the order they started, each
    taking as many pods as it was made for. Pods left over (they fit free room or a request's
    spare room) have no request of their own and are not counted."""
    pods = sorted(since)
    out: list[float] = []
    for at, n in sorted(started):
        for t in pods[len(out) : len(out) + n]:
            out.append(max(0.0, at - t))
    return out


def problem_summary(status: AutoscalerStatus) -> str:
    """Why pods are not planned, for a stuck run's message: each reason with its pod count and
    first message (e.g. MaxNodesReached: node limits reached: node group general maxNodes=50)."""
    problems = [*status.problems, *status.never_satisfiable]
    if not problems:
        return "no planning problems"
    by_reason: dict[str, tuple[int, str]] = {}
    for p in problems:
        count, message = by_reason.get(p.reason, (0, p.message))
        by_reason[p.reason] = (count + p.count, message)
    return "problems: " + "; ".join(f"{r} ({n} pods): {m}" for r, (n, m) in sorted(by_reason.items()))


def progress_bar(done: int, total: int, width: int = 30) -> str:
    filled = int(width * done / total) if total else 0
    return f"[{'#' * filled}{'.' * (width - filled)}] {done}/{total} pods running"


def draw(line: str, interactive: bool) -> None:
    if interactive and sys.stdout.isatty():
        sys.stdout.write("\r" + line)
        sys.stdout.flush()
    else:
        print(line, flush=True)


def percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    k = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return round(ordered[k], 3)
