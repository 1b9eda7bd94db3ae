"""The in-process worker the workflow tests run: growth's workflows (by default all of them) under
the product's sandbox settings (workflows/sandbox.py) and heartbeat throttle, as the worker process
runs them."""

from __future__ import annotations

from typing import Any

from temporalio.client import Client
from temporalio.worker import Worker

from activities.heartbeat import HeartbeatInterceptor
from workflows.activity_options import HEARTBEAT_THROTTLE
from workflows.all import WORKFLOWS
from workflows.sandbox import workflow_runner


def new_worker(client: Client, task_queue: str, *, workflows: Any = WORKFLOWS, **kw: Any) -> Worker:
    """A Worker on `task_queue` (activities and any other option in `kw`, as Worker takes them).
    Heartbeats are throttled as the worker process throttles them: with the SDK's default (0.8 x
    the heartbeat timeout) a held activity learned of its cancellation 8 s late, and each test
    that cancels one waited that long. Activities beat in the background (HeartbeatInterceptor, as
    worker.py registers it): a stub held past its heartbeat timeout on a loaded machine was retried,
    a second call the test never meant (test_machine_gc's held listing)."""
    kw.setdefault("interceptors", [HeartbeatInterceptor()])
    kw.setdefault("max_heartbeat_throttle_interval", HEARTBEAT_THROTTLE)
    kw.setdefault("default_heartbeat_throttle_interval", HEARTBEAT_THROTTLE)
    return Worker(client, task_queue=task_queue, workflows=workflows, workflow_runner=workflow_runner(), **kw)
