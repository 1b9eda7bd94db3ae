"""The in-process worker the workflow tests run: growth's workflows (by default all of them) under
the product's sandbox settings (workflows/sandbox.py), as the worker process runs them."""

from __future__ import annotations

from typing import Any

from temporalio.client import Client
from temporalio.worker import Worker

from workflows.all import WORKFLOWS
from workflows.sandbox import workflow_runner


def new_worker(client: Client, task_queue: str, *, workflows: Any = WORKFLOWS, **kw: Any) -> Worker:
    """A Worker on `task_queue` (activities and any other option in `kw`, as Worker takes them)."""
    return Worker(client, task_queue=task_queue, workflows=workflows, workflow_runner=workflow_runner(), **kw)
