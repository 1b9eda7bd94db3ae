"""Starting the NodeRequests a loop planned, through the Temporal client.

As children, a burst's ~300 requests were each recorded in the loop's own history (initiated,
then started) and started one after another by the server while the loop also took their
signals: at 10,000 pending pods the last ones started 31-42 s (p99) after the loop committed
them. Started by the client they are independent workflows created side by side (p99 15-17 s).
The loop keeps what a parent link gave it: requests already outlived it (ABANDON), and report to
it by workflow id. Find a loop's requests in the Web UI by the GrowthCluster search attribute or
the `nodes/<cluster>/request/` id prefix.
"""

from __future__ import annotations

import asyncio

from temporalio import activity
from temporalio.common import Priority, WorkflowIDReusePolicy
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode

from scaling.nodes import contracts
from scaling.nodes.contracts import WaitReadyInput
from scaling.nodes.scale_up.requests import (
    NODE_REQUEST_BATCH_WORKFLOW,
    NODE_REQUEST_WORKFLOW,
    NodeRequestBatchInput,
    NodeRequestInput,
    StartRequestsInput,
)
from scaling.nodes.summaries import batch_static_details, batch_summary, request_static_details, request_summary
from workflows.search import initial_attributes

# Behind the loop's own tasks (priority 3, the default): a request's workflow and activity tasks
# (which inherit it) wait in a backlog before the loop's, never the other way round. At 30,000
# pending pods ~1,000 requests queued creates, waits and first workflow tasks, and the loop's own
# start_node_requests waited 19 s (mean, load 12) for a worker behind them.
REQUEST_PRIORITY = Priority(priority_key=4)


@activity.defn(name=contracts.START_NODE_REQUESTS)
async def start_node_requests(inp: StartRequestsInput) -> int:
    """Start each request and each batch on this worker's task queue; how many workflows this
    call started.

    The workflow id is the request's (or the batch's) id and a used id is never reused, so a
    retried or replayed activity finds the workflow it started before instead of making a second
    one (and second machines at the provider)."""
    client = activity.client()
    task_queue = activity.info().task_queue
    attributes = initial_attributes(inp.cluster, "Pending") if inp.use_search_attributes else None

    async def start(request: NodeRequestInput | NodeRequestBatchInput) -> bool:
        batch = isinstance(request, NodeRequestBatchInput)
        try:
            await client.start_workflow(
                NODE_REQUEST_BATCH_WORKFLOW if batch else NODE_REQUEST_WORKFLOW,
                request,
                id=request.id,
                task_queue=task_queue,
                id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
                priority=REQUEST_PRIORITY,
                search_attributes=attributes,
                # The Web UI's workflow list, and the fixed block on the workflow's page.
                static_summary=batch_summary(request) if batch else request_summary(request),
                static_details=batch_static_details(request) if batch else request_static_details(request),
            )
        except WorkflowAlreadyStartedError:
            return False
        return True

    return sum(await asyncio.gather(*(start(r) for r in [*inp.requests, *inp.batches])))


async def report_to_loop(inp: WaitReadyInput) -> None:
    """The request's Provisioning report that its readiness wait carries (WaitReadyInput.report),
    signalled to its loop through the worker's client. A loop that is gone takes nothing, as a
    request's own signal to it would; any other failure fails the attempt, which is retried."""
    if not inp.report_to or inp.report is None:
        return
    try:
        await activity.client().get_workflow_handle(inp.report_to).signal(contracts.REQUEST_CHANGED, inp.report)
    except RPCError as err:
        if err.status != RPCStatusCode.NOT_FOUND:
            raise
        activity.logger.warning("autoscaler %s did not take the update: %s", inp.report_to, err.message)
