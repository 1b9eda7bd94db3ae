"""The worker's wake (activities/nodes/wake.py): pods that become unschedulable after a loop's
observation get that loop one signal once the batch window closes, and none until it observes
again. Driven through a real Informer's event path (no server: its events are applied directly)."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from activities.kube.cache import PodIndex
from activities.kube.informer import Informer
from activities.nodes.wake import PendingPodsWake

RV = iter(range(2, 1_000_000))


def pending_pod(name: str) -> dict[str, Any]:
    return {
        "metadata": {"namespace": "default", "name": name, "uid": name, "resourceVersion": str(next(RV))},
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "500m"}}}]},
        "status": {
            "phase": "Pending",
            "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}],
        },
    }


class Signals:
    def __init__(self) -> None:
        self.sent: list[str] = []
        self.cond = threading.Condition()

    def send(self, cluster: str) -> None:
        with self.cond:
            self.sent.append(cluster)
            self.cond.notify_all()

    def wait(self, n: int, timeout: float = 10.0) -> bool:
        with self.cond:
            return self.cond.wait_for(lambda: len(self.sent) >= n, timeout)


@pytest.fixture
def informer() -> Informer:
    inf = Informer("pods", lambda **_: None, PodIndex())
    inf._replace([], "1")  # synced, empty
    return inf


def observe(wake: PendingPodsWake, inf: Informer) -> int:
    """What observe_cluster does: read the count with the pending pods, then tell the wake."""
    index = inf.index
    assert isinstance(index, PodIndex)
    with inf.cond:
        seen = index.unschedulable_added
    wake.observed("c1", inf, index, seen)
    return seen


def test_new_unschedulable_pods_signal_once_per_observation(informer: Informer) -> None:
    signals = Signals()
    wake = PendingPodsWake(signals.send, idle_s=0.05, max_s=0.2)
    try:
        observe(wake, informer)
        informer._apply("ADDED", pending_pod("a"))
        informer._apply("ADDED", pending_pod("b"))
        assert signals.wait(1) and signals.sent == ["c1"]
        # More pods before the loop observes again: no second signal (the loop is on its way).
        informer._apply("ADDED", pending_pod("c"))
        assert not signals.wait(2, timeout=0.5)
        # The loop observed a, b and c: a pod after that is news again.
        observe(wake, informer)
        informer._apply("MODIFIED", pending_pod("a"))  # still pending: not new
        assert not signals.wait(2, timeout=0.5)
        informer._apply("ADDED", pending_pod("d"))
        assert signals.wait(2) and signals.sent == ["c1", "c1"]
    finally:
        wake.close()


def test_pods_the_loop_observed_within_the_window_are_not_signalled(informer: Informer) -> None:
    signals = Signals()
    wake = PendingPodsWake(signals.send, idle_s=0.5, max_s=1.0)
    try:
        observe(wake, informer)
        informer._apply("ADDED", pending_pod("a"))
        observe(wake, informer)  # the loop's own scan saw it before the window closed
        assert not signals.wait(1, timeout=1.5)
    finally:
        wake.close()
