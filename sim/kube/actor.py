"""A background loop that acts on the store every `interval` seconds until stopped."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

log = logging.getLogger("sim")


class Actor:
    name = "actor"

    def __init__(self, interval: Callable[[], float]) -> None:
        self._interval = interval
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=f"sim-{self.name}", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join(timeout=5)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.step()
            except Exception:  # keep the simulated world alive; the log tells what broke
                log.exception("sim %s step failed", self.name)
            self._stop.wait(self._interval())

    def step(self) -> None:
        raise NotImplementedError
