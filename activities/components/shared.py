"""One answer shared by many callers for a short while: what lets one worker serve a fleet of
autoscalers without every round re-reading what all of them read (a Prometheus vector over every
namespace, the nodes' free room). Callers arriving while the answer is being fetched wait for it;
a failed fetch is not kept, so the next caller tries again."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

T = TypeVar("T")


class SharedAnswers(Generic[T]):
    def __init__(self, max_age_s: float) -> None:
        self.max_age_s = max_age_s
        self._lock = threading.Lock()
        self._answers: dict[Hashable, tuple[float, T]] = {}
        self._in_flight: dict[Hashable, threading.Lock] = {}

    def get(self, key: Hashable, fetch: Callable[[], T]) -> T:
        """The answer for `key` at most max_age_s old, fetched once however many ask at a time."""
        with self._lock:
            flight = self._in_flight.setdefault(key, threading.Lock())
        with flight:
            with self._lock:
                cached = self._answers.get(key)
            if cached is not None and time.monotonic() - cached[0] <= self.max_age_s:
                return cached[1]
            answer = fetch()
            with self._lock:
                self._answers[key] = (time.monotonic(), answer)
            return answer
