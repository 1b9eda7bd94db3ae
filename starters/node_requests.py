"""What `growth nodes` reads of a node request: an old NodeRequest, a NodeRequestBatch (a request per
batch of identical nodes), or one member of a batch (`<batch id>#<index>`).

An id is the workflow id or its last part (`000123-ab12`, `000123-ab12#3`). The workflow's type
(from describe) says which query answers: a NodeRequest's `describe` is one status, a batch's
is every member's. An approval covers a whole batch: approving a member approves its batch.
"""

from __future__ import annotations

from pydantic import BaseModel, Field
from temporalio.client import Client, RPCError, WorkflowHandle
from temporalio.service import RPCStatusCode

from activities.updates import query
from scaling.approvals import ApprovalState
from scaling.nodes.explain import when
from scaling.nodes.scale_up.requests import (
    NODE_REQUEST_BATCH_WORKFLOW,
    NODE_REQUEST_WORKFLOW,
    NodeRequestBatchStatus,
    NodeRequestStatus,
    split_request_id,
)
from starters.cli import REFUSED, RPC_TIMEOUT, CliError
from workflows.nodes.autoscaler import autoscaler_id

REQUEST_TYPES = (NODE_REQUEST_WORKFLOW, NODE_REQUEST_BATCH_WORKFLOW)


def request_workflow_id(cluster: str, given: str) -> str:
    """The full request id (a workflow id, or a member id) for the full id or the short suffix the
    status table shows."""
    return given if "/" in given else f"{autoscaler_id(cluster)}/request/{given}"


class RequestView(BaseModel):
    """`growth nodes request ID`: the request's workflow and the members asked for (a plain
    NodeRequest is its own one member)."""

    workflow_id: str
    kind: str  # NodeRequest or NodeRequestBatch
    cluster: str = ""
    group: str
    member: int | None = None  # the member asked for, or None: every member
    batch_size: int = 1
    approval: ApprovalState | None = None  # one decision covers the whole batch
    members: list[NodeRequestStatus] = Field(default_factory=list)


async def request_kind(handle: WorkflowHandle) -> str:
    """The workflow's type; CliError (exit 1) for an id Temporal does not know or that is no request."""
    try:
        kind = (await handle.describe(rpc_timeout=RPC_TIMEOUT)).workflow_type
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            raise CliError(f"no NodeRequest or NodeRequestBatch {handle.id}") from None
        raise
    if kind not in REQUEST_TYPES:
        raise CliError(f"{handle.id} is a {kind}, not a NodeRequest or NodeRequestBatch", REFUSED)
    return kind


async def describe_batch(handle: WorkflowHandle) -> NodeRequestBatchStatus:
    return await query(handle, "describe", result_type=NodeRequestBatchStatus, rpc_timeout=RPC_TIMEOUT)


async def describe_request(handle: WorkflowHandle) -> NodeRequestStatus:
    return await query(handle, "describe", result_type=NodeRequestStatus, rpc_timeout=RPC_TIMEOUT)


async def read_request(client: Client, request_id: str) -> RequestView:
    """The request behind a full id: a batch with every member, one member, or an old request."""
    workflow_id, index = split_request_id(request_id)
    handle = client.get_workflow_handle(workflow_id)
    kind = await request_kind(handle)
    if kind == NODE_REQUEST_WORKFLOW:
        if index is not None:
            raise CliError(f"refused: id: {workflow_id} is a NodeRequest, it has no member #{index}", REFUSED)
        status = await describe_request(handle)
        return RequestView(
            workflow_id=workflow_id, kind=kind, group=status.group, approval=status.approval, members=[status]
        )
    batch = await describe_batch(handle)
    members = batch.members
    if index is not None:
        members = [m for m in batch.members if m.id == request_id]
        if not members:
            raise CliError(f"no member #{index} in {workflow_id} ({len(batch.members)} members)")
    return RequestView(
        workflow_id=workflow_id,
        kind=kind,
        cluster=batch.cluster,
        group=batch.group,
        member=index,
        batch_size=len(batch.members),
        approval=batch.approval,
        members=members,
    )


def _member_line(m: NodeRequestStatus) -> str:
    node = f"  node {m.node_name}" if m.node_name else ""
    last = m.attempts[-1] if m.attempts else None
    attempt = f"  last attempt {last.pool}: {last.result.value}" if last else ""
    pods = sum(m.pods.values()) or len(m.pod_uids)
    message = f"  ({m.message})" if m.message else ""
    return f"  {m.id}  pool {m.current_pool or '-'}  {m.phase.value}{node}  {pods} pod(s){attempt}{message}"


def format_request(v: RequestView) -> str:
    first = v.members[0] if v.members else None
    what = f"{v.kind} {v.workflow_id}"
    if v.kind == NODE_REQUEST_BATCH_WORKFLOW:
        what += f": {v.batch_size} node(s)"
        if v.member is not None:
            what += f", member #{v.member} shown"
    lines = [f"{what}  group {v.group}" + (f"  type {first.server_type}" if first and first.server_type else "")]
    if first is not None and first.started_at is not None:
        lines.append(f"started {when(first.started_at)}")
    a = v.approval
    if a is not None:
        covers = " (covers the whole batch)" if v.kind == NODE_REQUEST_BATCH_WORKFLOW else ""
        state = f"{a.decision} by {a.by}" if a.decision else f"awaiting approval; {a.default} at {when(a.deadline)}"
        lines.append(f"approval{covers}: {state}: {a.reason}" + (f" (note: {a.note})" if a.note else ""))
    lines.append("members:" if v.kind == NODE_REQUEST_BATCH_WORKFLOW else "request:")
    lines.extend(_member_line(m) for m in v.members)
    return "\n".join(lines)
