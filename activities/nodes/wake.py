"""Waking a cluster's NodeAutoscaler when pods become unschedulable, instead of leaving them to
its next scan: batching as Karpenter does. After a loop's observation, the first pod that becomes
unschedulable in the worker's watch-fed cache (activities.kube.cache) opens a window; once no new
one has come for IDLE_S, or MAX_S after the first, the worker sends the loop one `pods_pending`
signal, and the loop observes again as soon as its current iteration is done.

At most one signal per observation: a burst adds one small event per loop to the history, and an
idle cluster none. The scan interval stays the bound: a signal that is lost (the worker dies, the
loop is gone) leaves the pods to the next scan, as before. A replica whose cache did not feed the
loop's last observation may signal too; a second signal changes nothing.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future

from temporalio.client import Client

from activities.kube.cache import PodIndex
from activities.kube.informer import Informer
from scaling.nodes.contracts import PODS_PENDING

log = logging.getLogger(__name__)

# Karpenter's batch window is 1 s idle, 10 s at most, for a provisioner that decides in
# milliseconds. growth's loop takes seconds at 10,000 pending pods and batches whatever comes
# meanwhile, so its window is short: pods marked over several seconds by the scheduler are
# planned by the loop that follows, not one scan later.
IDLE_S = 0.3
MAX_S = 1.0


class PendingPodsWake:
    """One watcher thread per cluster name, started by that cluster's first observation."""

    def __init__(self, send: Callable[[str], None], idle_s: float = IDLE_S, max_s: float = MAX_S) -> None:
        self.send = send
        self.idle_s, self.max_s = idle_s, max_s
        self._watchers: dict[str, _Watcher] = {}
        self._lock = threading.Lock()

    def observed(self, cluster: str, pods: Informer, index: PodIndex, seen: int) -> None:
        """`cluster`'s loop has observed every pod that became unschedulable up to `seen`
        (PodIndex.unschedulable_added, read with the pending pods it planned)."""
        with self._lock:
            watcher = self._watchers.get(cluster)
            if watcher is None or watcher.pods is not pods:
                if watcher is not None:
                    watcher.stop()
                watcher = self._watchers[cluster] = _Watcher(self, cluster, pods, index, seen)
                watcher.start()
        watcher.observed(seen)

    def close(self) -> None:
        with self._lock:
            watchers, self._watchers = list(self._watchers.values()), {}
        for watcher in watchers:
            watcher.stop()


class _Watcher:
    def __init__(self, owner: PendingPodsWake, cluster: str, pods: Informer, index: PodIndex, seen: int) -> None:
        self.owner, self.cluster, self.pods, self.index = owner, cluster, pods, index
        self.seen = seen  # under pods.cond, like the index
        self.stopped = False
        self._thread = threading.Thread(target=self._run, name=f"wake-{cluster}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        with self.pods.cond:
            self.stopped = True
            self.pods.cond.notify_all()

    def observed(self, seen: int) -> None:
        with self.pods.cond:
            self.seen = max(self.seen, seen)
            self.pods.cond.notify_all()

    def _run(self) -> None:
        cond = self.pods.cond
        while True:
            with cond:
                cond.wait_for(lambda: self.stopped or self.index.unschedulable_added > self.seen)
                if self.stopped:
                    return
                first = last = time.monotonic()
                count = self.index.unschedulable_added
            while True:  # the batch window
                until = min(last + self.owner.idle_s, first + self.owner.max_s)
                now = time.monotonic()
                if now >= until:
                    break
                with cond:
                    cond.wait_for(lambda: self.stopped, until - now)
                    if self.stopped:
                        return
                    if self.index.unschedulable_added != count:
                        count, last = self.index.unschedulable_added, time.monotonic()
            with cond:
                if self.index.unschedulable_added <= self.seen:
                    continue  # the loop observed them meanwhile, on its own scan
                sent_at = self.seen
            try:
                self.owner.send(self.cluster)
            except Exception:  # noqa: BLE001 - a wake is an optimisation: the next scan covers it
                log.exception("waking the loop of cluster %s failed", self.cluster)
            with cond:  # one signal per observation
                cond.wait_for(lambda at=sent_at: self.stopped or self.seen != at)


def signal_loop(client: Client, loop: asyncio.AbstractEventLoop) -> Callable[[str], None]:
    """A `send` for PendingPodsWake: signals the cluster's NodeAutoscaler from the watcher's
    thread through the worker's client, on the worker's event loop."""
    from workflows.nodes.autoscaler import autoscaler_id

    def send(cluster: str) -> None:
        handle = client.get_workflow_handle(autoscaler_id(cluster))
        asyncio.run_coroutine_threadsafe(handle.signal(PODS_PENDING), loop).add_done_callback(
            lambda done: _report(cluster, done)
        )

    return send


def _report(cluster: str, done: Future[None]) -> None:
    if not done.cancelled() and done.exception() is not None:
        # Typically: no loop runs for this cluster (stopped or not started yet).
        log.info("could not wake the loop of cluster %s: %s", cluster, done.exception())
