"""The growth worker with a hold in front of its NodeRequest and NodeRequestBatch starts, for
`make chaos`'s kill during `start_node_requests` (bench/chaos.py).

That activity's only counterpart is the Temporal server: the dev server hands it to the worker in
the same answer that completes the loop's workflow task, and it ends in tens of milliseconds, so
nothing outside the worker sees it in progress in time (a kill on its scheduled event struck 5
runs of 7). Here the worker's StartWorkflowExecution call is where it is held, as the simulated
API server holds a node create: the bench arms the hold, the first request start claims it
and waits, unsent, until the bench lifts it or kills the worker, so `start_node_requests` stays
in progress on a worker the bench can name.

The hold is a directory (`GROWTH_CHAOS_HOLDS`): the bench creates `armed` in it; the first start
renames it to `held-<pid>` (one rename: of two workers only one claims it) and waits while that
file exists. Without the variable, or unarmed, starts pass straight through.

python -m bench.start_hold --config worker.yaml   (the worker's own arguments)
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

from temporalio.api.workflowservice.v1 import StartWorkflowExecutionRequest
from temporalio.service import WorkflowService

import worker
from scaling.nodes.scale_up.requests import NODE_REQUEST_BATCH_WORKFLOW, NODE_REQUEST_WORKFLOW

HOLDS_ENV = "GROWTH_CHAOS_HOLDS"
ARMED = "armed"
# The loop starts a NodeRequestBatch per batch of identical nodes; a NodeRequest started by hand
# (or by a loop recorded before batches) is held the same way.
HELD_TYPES = frozenset({NODE_REQUEST_WORKFLOW, NODE_REQUEST_BATCH_WORKFLOW})


def held_path(holds: Path, pid: int) -> Path:
    return holds / f"held-{pid}"


def claim(holds: Path) -> Path | None:
    """The hold for this process, if it was armed and no other start took it first."""
    held = held_path(holds, os.getpid())
    try:
        os.rename(holds / ARMED, held)
    except FileNotFoundError:
        return None
    return held


def install(holds: Path) -> None:
    """Hold the first NodeRequest or NodeRequestBatch start after the hold is armed."""
    send = WorkflowService.start_workflow_execution

    async def start_workflow_execution(
        self: WorkflowService, req: StartWorkflowExecutionRequest, *args: Any, **kwargs: Any
    ) -> Any:
        if req.workflow_type.name in HELD_TYPES and (held := claim(holds)) is not None:
            held.write_text(req.workflow_id)
            while held.exists():  # lifted by the bench, or this worker is killed here
                await asyncio.sleep(0.05)
        return await send(self, req, *args, **kwargs)

    WorkflowService.start_workflow_execution = start_workflow_execution  # type: ignore[method-assign]


def main() -> None:
    if holds := os.environ.get(HOLDS_ENV):
        install(Path(holds))
    worker.main()


if __name__ == "__main__":
    main()
