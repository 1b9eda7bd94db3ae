"""The request gate every Hetzner API call of a worker passes, one per project.

Each HTTP request (hcloud's own retries and pages included) waits in `ProjectBudget.acquire`
until `scaling.nodes.providers.hetzner_budget.wait_before` lets its kind go, and each answer's RateLimit-*
headers update the gate. The gate is a transport adapter under hcloud's requests.Session, so no
call can bypass it. Calls run in threads (hcloud is blocking), hence a threading.Condition.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Iterator
from typing import Any

import requests
from requests.adapters import HTTPAdapter

from activities.meter import process_meter
from scaling.nodes.metrics import HETZNER_RATELIMIT_REMAINING
from scaling.nodes.providers.hetzner_budget import (
    BudgetSettings,
    BudgetView,
    RequestKind,
    estimate_remaining,
    others_per_s,
    view_from_headers,
    wait_before,
)

_kind = threading.local()


@contextlib.contextmanager
def spending(kind: RequestKind) -> Iterator[None]:
    """Requests sent by this thread inside the block count as `kind`."""
    before = getattr(_kind, "value", None)
    _kind.value = kind
    try:
        yield
    finally:
        _kind.value = before


def current_kind() -> RequestKind:
    return getattr(_kind, "value", None) or RequestKind.CREATE


class ProjectBudget:
    """One project's bucket as this process sees it; shared by every provider of the project."""

    def __init__(self, settings: BudgetSettings | None = None) -> None:
        self.settings = settings or BudgetSettings()
        self._cond = threading.Condition()
        self._view: BudgetView | None = None
        self._in_flight = 0
        self.sent = 0
        self.waited_s = 0.0
        self.responses_429 = 0
        # Measuring what the rest of the project spends: an answer's (time, remaining), and this
        # process's answers since. Restarted when the bucket is (nearly) full, where refill stops.
        self._window: tuple[float, float] | None = None
        self._window_own = 0
        self._others_per_s = 0.0

    @property
    def view(self) -> BudgetView | None:
        return self._view

    def remaining(self) -> int | None:
        """The project's remaining requests as the last answer said (None before any answer)."""
        return None if self._view is None else int(self._view.remaining)

    def delay(self, kind: RequestKind) -> float:
        """Seconds a request of `kind` would wait now (0 = it may go), without taking a slot."""
        with self._cond:
            return wait_before(kind, self._view, time.time(), self._in_flight, self.settings)

    async def ready(self, kind: RequestKind) -> None:
        """Wait on the event loop (no thread held) until a request of `kind` would go. The thread
        that sends still passes `acquire`, which then rarely waits."""
        while (delay := self.delay(kind)) > 0:
            await asyncio.sleep(delay)

    def acquire(self, kind: RequestKind) -> None:
        """Wait until a request of `kind` may go."""
        started = time.monotonic()
        with self._cond:
            while True:
                delay = wait_before(kind, self._view, time.time(), self._in_flight, self.settings)
                if delay <= 0:
                    break
                self._cond.wait(delay)
            self._in_flight += 1
            self.sent += 1
            self.waited_s += time.monotonic() - started

    def release(self, response: requests.Response | None) -> None:
        """An answer (or none). Each answer bounds what is left now (its Remaining plus the refill
        since, dated by its arrival: the server counted before). Answers to concurrent requests
        arrive in any order, so the view is the answer that leaves the least."""
        with self._cond:
            self._in_flight -= 1
            if response is not None:
                if response.status_code == 429:
                    self.responses_429 += 1
                now = time.time()
                view = view_from_headers(dict(response.headers), now, self.settings.rate_limit_per_hour)
                current = self._view
                if view is not None and current is not None and now - current.seen_at > self.settings.stale_after_s:
                    # The answer to a probe after a long wait: what others spent before it (a sudden
                    # drop, a 429 storm) says little about now, and kept, it would hold every send
                    # back until the next probe. Measure afresh from this answer on.
                    self._window, self._others_per_s = None, 0.0
                if view is not None:
                    view = self._measure_others(view, spent=response.status_code != 429)
                if view is not None and (
                    current is None
                    or now - current.seen_at > self.settings.stale_after_s
                    or estimate_remaining(view, now) <= estimate_remaining(current, now)
                ):
                    self._view = view
                if self._view is not None:
                    process_meter().create_gauge(
                        HETZNER_RATELIMIT_REMAINING, "the Hetzner project's requests left, as its last answer said"
                    ).set(int(estimate_remaining(self._view, now)))
            self._cond.notify_all()

    def _measure_others(self, view: BudgetView, spent: bool) -> BudgetView:
        self._window_own += spent  # a 429 answer took nothing from the bucket
        if self._window is None or view.remaining >= view.limit - 1 or view.seen_at - self._window[0] > 120:
            self._window, self._window_own = (view.seen_at, float(view.remaining)), 0
        elif view.seen_at - self._window[0] >= 2.0:  # a span long enough to average rounding out
            self._others_per_s = others_per_s(self._window, self._window_own, view)
        return view.model_copy(update={"others_per_s": self._others_per_s})


class BudgetAdapter(HTTPAdapter):
    """requests transport adapter: every request waits for the budget, every answer updates it."""

    def __init__(self, budget: ProjectBudget, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.budget = budget

    def send(self, request: requests.PreparedRequest, *args: Any, **kwargs: Any) -> requests.Response:
        self.budget.acquire(current_kind())
        response: requests.Response | None = None
        try:
            response = super().send(request, *args, **kwargs)
            return response
        finally:
            self.budget.release(response)
