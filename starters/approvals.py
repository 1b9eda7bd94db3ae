"""`growth … approvals | approve ID | deny ID`: what every loop's approval commands share.

A gated step is a workflow in phase AwaitingApproval (its GrowthPhase search attribute), so the
list is a visibility query; each entry's details come from the workflow's own query. A decision
is an update on that workflow: its validator refuses a wait already decided, and an id Temporal
does not know (or a run already closed) is refused here, both with exit code 2.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field
from temporalio.client import Client, RPCError, WorkflowHandle
from temporalio.service import RPCStatusCode

from activities.updates import execute_update
from scaling.approvals import AWAITING_APPROVAL
from scaling.nodes.explain import when
from starters.cli import REFUSED, RPC_TIMEOUT, CliError, Done


class PendingApproval(BaseModel):
    id: str  # the workflow id: `approve ID` takes it
    what: str  # the gated step, e.g. "NodeRequest cx52 for group web"
    reason: str
    deadline: datetime | None = None
    default: str = ""  # what the timeout applies


class PendingApprovals(BaseModel):
    approvals: list[PendingApproval] = Field(default_factory=list)


def awaiting_query(**attributes: str) -> str:
    """The visibility query for running workflows awaiting approval, narrowed by keyword attributes."""
    narrowed = "".join(f' AND {k} = "{v}"' for k, v in attributes.items())
    return f'GrowthPhase = "{AWAITING_APPROVAL}"{narrowed} AND ExecutionStatus = "Running"'


async def list_awaiting(
    client: Client, query: str, describe: Callable[[WorkflowHandle], Awaitable[list[PendingApproval]]]
) -> PendingApprovals:
    """What the workflows the query finds still await when asked (`describe` leaves out a wait
    decided since the visibility store last saw it)."""
    out = []
    async for execution in client.list_workflows(query, rpc_timeout=RPC_TIMEOUT):
        out.extend(await describe(client.get_workflow_handle(execution.id)))
    return PendingApprovals(approvals=sorted(out, key=lambda p: p.id))


def format_approvals(approvals: PendingApprovals) -> str:
    if not approvals.approvals:
        return "nothing awaits approval"
    lines = []
    for p in approvals.approvals:
        due = f"; {p.default} at {when(p.deadline)}" if p.deadline and p.default else ""
        lines.append(f"{p.id}\n  {p.what}: {p.reason}{due}")
    return "\n".join(lines)


async def decide(handle: WorkflowHandle, update: Any, note: str, approve: bool) -> Done:
    """Send approve/deny; an unknown or closed workflow id is refused (exit 2), as a validator's no is."""
    try:
        text = await execute_update(handle, update, note, rpc_timeout=RPC_TIMEOUT)
    except RPCError as err:
        if err.status in (RPCStatusCode.NOT_FOUND, RPCStatusCode.FAILED_PRECONDITION):
            raise CliError(f"refused: id: {handle.id} is not a running workflow awaiting approval", REFUSED) from None
        raise
    return Done(message=text, data={"id": handle.id, "decision": "approved" if approve else "denied", "note": note})
