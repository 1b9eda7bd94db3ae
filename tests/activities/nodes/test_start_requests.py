"""The loop's request starts are idempotent: the request id is the workflow id and a used id is
never reused, so a retried or replayed start finds the request instead of making a second one."""

from __future__ import annotations

from temporalio.client import WorkflowExecutionStatus
from temporalio.testing import ActivityEnvironment, WorkflowEnvironment

from activities.nodes.requests import REQUEST_PRIORITY, start_node_requests
from scaling.nodes.scale_up.requests import StartRequestsInput
from tests.workflows.nodes.test_node_request import pools, request


async def test_a_start_sent_again_starts_nothing_new(env: WorkflowEnvironment) -> None:
    batch = StartRequestsInput(cluster="test", requests=[request(pools("kwok-cx22")) for _ in range(3)])
    activities = ActivityEnvironment(client=env.client)
    assert await activities.run(start_node_requests, batch) == 3
    handles = [env.client.get_workflow_handle(r.id) for r in batch.requests]
    runs = [(await h.describe()).run_id for h in handles]

    assert await activities.run(start_node_requests, batch) == 0  # a retry of the same batch
    assert [(await h.describe()).run_id for h in handles] == runs

    # Even a request that ended is not started again under its id.
    await handles[0].terminate()
    assert (await handles[0].describe()).status == WorkflowExecutionStatus.TERMINATED
    assert await activities.run(start_node_requests, batch) == 0
    assert (await handles[0].describe()).run_id == runs[0]


async def test_requests_start_behind_the_loops_own_tasks(dev_env: WorkflowEnvironment) -> None:
    # The dev server (the time-skipping one keeps no priority): a backlog serves the loop's
    # tasks (priority 3, the default) before a request's, which inherit its workflow's.
    batch = StartRequestsInput(cluster="test", requests=[request(pools("kwok-cx22"))])
    assert await ActivityEnvironment(client=dev_env.client).run(start_node_requests, batch) == 1
    info = (await dev_env.client.get_workflow_handle(batch.requests[0].id).describe()).raw_description
    assert info.workflow_execution_info.priority.priority_key == REQUEST_PRIORITY.priority_key == 4
    await dev_env.client.get_workflow_handle(batch.requests[0].id).terminate()  # no worker serves it
