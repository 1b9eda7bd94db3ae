"""Knobs shared by the API server's control endpoints and the in-process actors.

Actors read these on every pass, so tests can change delays and faults while a cluster runs.
"""

from __future__ import annotations

import fnmatch
import json
import re
import threading
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

SCORING = ("least-allocated", "most-allocated")


@dataclass
class RequestFailure:
    """An injected API error: the next `times` requests matching method and path fail."""

    method: str
    path_regex: str
    status: int
    times: int = 1
    reason: str = "InternalError"
    message: str = "injected failure"

    def matches(self, method: str, path: str) -> bool:
        return (self.method in ("*", method)) and re.search(self.path_regex, path) is not None


@dataclass
class RequestHold:
    """An injected hang: the next `times` requests matching method and path wait unanswered
    until the hold is lifted (or `max_s` passes), and are then served as usual. A caller's
    request stays in progress for as long as a test needs (a client process killed mid-call),
    which a request of ~20 ms never does on its own; `held` counts the requests caught so far,
    `waiting` those still waiting, and `objects` the name and labels of each one's body.
    `body_regex`: only requests whose body, as compact JSON with sorted keys, it matches (one kind
    of PATCH among the others a node gets, without counting them)."""

    method: str
    path_regex: str
    times: int = 1
    max_s: float = 300.0
    body_regex: str = ""
    held: int = 0
    waiting: int = 0
    objects: list[dict[str, Any]] = field(default_factory=list)
    lifted: threading.Event = field(default_factory=threading.Event)

    def matches(self, method: str, path: str, body: Any = None) -> bool:
        if not (self.method in ("*", method) and re.search(self.path_regex, path)):
            return False
        return (
            not self.body_regex
            or re.search(self.body_regex, json.dumps(body, sort_keys=True, separators=(",", ":"))) is not None
        )

    def view(self) -> dict[str, Any]:
        keys = ("method", "path_regex", "times", "max_s", "body_regex", "held", "waiting", "objects")
        return {key: getattr(self, key) for key in keys}


# The settings in seconds, read and set through the control API alike.
SECONDS_SETTINGS = (
    "node_ready_delay",
    "pod_start_delay",
    "scheduler_interval",
    "pod_initial_backoff",
    "pod_max_backoff",
    "watch_bookmark_interval",
    "node_taint_lag",
)


@dataclass
class FakeControl:
    node_ready_delay: float = 1.0
    pod_start_delay: float = 0.2
    scheduler_interval: float = 0.25
    # kube-scheduler's podInitialBackoffSeconds / podMaxBackoffSeconds: how soon an unschedulable
    # pod is tried (and its PodScheduled message rewritten) again.
    pod_initial_backoff: float = 1.0
    pod_max_backoff: float = 10.0
    # How often a watch that allowed bookmarks gets one (the apiserver's bookmark frequency: 1 minute).
    watch_bookmark_interval: float = 60.0
    # How long a node that turned Ready keeps node.kubernetes.io/not-ready (sim/kube/nodelifecycle.py):
    # the node lifecycle controller's work queue, which on a real cluster takes a moment. 0 = its next pass.
    node_taint_lag: float = 0.0
    scoring: str = "least-allocated"
    never_ready_nodes: list[str] = field(default_factory=list)
    failures: list[RequestFailure] = field(default_factory=list)
    holds: list[RequestHold] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    requests_total: int = 0
    by_verb: Counter[str] = field(default_factory=Counter)
    by_resource: Counter[str] = field(default_factory=Counter)
    by_status: Counter[str] = field(default_factory=Counter)
    request_seconds: float = 0.0

    def never_ready(self, node_name: str) -> bool:
        return any(fnmatch.fnmatchcase(node_name, pattern) for pattern in list(self.never_ready_nodes))

    def take_failure(self, method: str, path: str) -> RequestFailure | None:
        with self.lock:
            for failure in self.failures:
                if failure.times > 0 and failure.matches(method, path):
                    failure.times -= 1
                    return failure
            self.failures = [f for f in self.failures if f.times > 0]
        return None

    def hold(self, method: str, path: str, body: Any) -> None:
        """Wait here while a hold catches this request (see RequestHold)."""
        with self.lock:
            hold = next((h for h in self.holds if h.times > 0 and h.matches(method, path, body)), None)
            if hold is None:
                return
            hold.times -= 1
            hold.held += 1
            hold.waiting += 1
            meta = body.get("metadata") if isinstance(body, dict) else None
            if isinstance(meta, dict):
                hold.objects.append({"name": meta.get("name", ""), "labels": dict(meta.get("labels") or {})})
        try:
            hold.lifted.wait(hold.max_s)
        finally:
            with self.lock:
                hold.waiting -= 1

    def record(self, verb: str, resource: str, status: int, seconds: float) -> None:
        with self.lock:
            self.requests_total += 1
            self.by_verb[verb] += 1
            self.by_resource[resource] += 1
            self.by_status[str(status)] += 1
            self.request_seconds += seconds

    def stats(self) -> dict[str, Any]:
        with self.lock:
            return {
                "requests_total": self.requests_total,
                "by_verb": dict(self.by_verb),
                "by_resource": dict(self.by_resource),
                "by_status": dict(self.by_status),
                "mean_request_ms": (1000 * self.request_seconds / self.requests_total if self.requests_total else 0.0),
            }

    def reset_stats(self) -> None:
        with self.lock:
            self.requests_total = 0
            self.request_seconds = 0.0
            self.by_verb.clear()
            self.by_resource.clear()
            self.by_status.clear()

    def settings(self) -> dict[str, Any]:
        return {**{key: getattr(self, key) for key in SECONDS_SETTINGS}, "scoring": self.scoring}

    def apply_settings(self, body: dict[str, Any]) -> None:
        for key in SECONDS_SETTINGS:
            if key in body:
                value = float(body[key])
                if value < 0:
                    raise ValueError(f"{key} must be >= 0")
                setattr(self, key, value)
        if "scoring" in body:
            if body["scoring"] not in SCORING:
                raise ValueError(f"scoring must be one of {SCORING}")
            self.scoring = body["scoring"]

    def faults(self) -> dict[str, Any]:
        with self.lock:
            return {
                "never_ready_nodes": list(self.never_ready_nodes),
                "request_failures": [vars(f) for f in self.failures if f.times > 0],
                "request_holds": [h.view() for h in self.holds],
            }

    def set_faults(self, body: dict[str, Any]) -> None:
        with self.lock:
            if "never_ready_nodes" in body:
                patterns = body["never_ready_nodes"]
                if not isinstance(patterns, list) or not all(isinstance(p, str) for p in patterns):
                    raise ValueError("never_ready_nodes must be a list of glob strings")
                self.never_ready_nodes = list(patterns)
            if "request_failures" in body:
                failures = []
                for item in body["request_failures"]:
                    failure = RequestFailure(**item)
                    re.compile(failure.path_regex)
                    failures.append(failure)
                self.failures = failures
            if "request_holds" in body:
                holds = []
                for item in body["request_holds"]:
                    hold = RequestHold(
                        str(item["method"]),
                        str(item["path_regex"]),
                        int(item.get("times", 1)),
                        float(item.get("max_s", 300.0)),
                        str(item.get("body_regex", "")),
                    )
                    if hold.times < 0 or hold.max_s < 0:
                        raise ValueError("request_holds: times and max_s must be >= 0")
                    for name in ("path_regex", "body_regex"):
                        try:
                            re.compile(getattr(hold, name))
                        except re.error as exc:
                            raise ValueError(f"request_holds: {name}: {exc}") from None
                    holds.append(hold)
                for old in self.holds:  # replaced: what it holds is served now
                    old.lifted.set()
                self.holds = holds
