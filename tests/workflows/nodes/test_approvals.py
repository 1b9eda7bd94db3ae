"""Approval gates on a NodeRequest (scaling.nodes.scale_up.approvals), on the time-skipping server: the
wait is a durable timer, so awaiting the result skips to the timeout and its default applies;
an operator's approve/deny is an update whose validator refuses a wait already decided."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from temporalio.client import WorkflowHandle, WorkflowHistory, WorkflowUpdateFailedError
from temporalio.testing import WorkflowEnvironment

from scaling.nodes.models import AttemptResult, RequestPhase
from scaling.nodes.scale_up.approvals import ApprovalGate
from scaling.nodes.scale_up.requests import NodeRequestStatus
from tests.workflows.nodes.stubs import World, started
from tests.workflows.nodes.test_node_request import pools, request
from tests.workflows.replayer import assert_replay, committed, record_again
from workflows.nodes.request import NodeRequestWorkflow

HISTORY = Path(__file__).parents[1] / "histories" / "node_request_approval.json"
NODES_GATE = ApprovalGate(nodes="12 nodes for group general in one loop (approval above 10)", timeout_s=1800)


async def awaiting(handle: WorkflowHandle) -> NodeRequestStatus:
    """Poll the describe query (queries do not skip time) until the request waits for approval."""
    deadline = asyncio.get_running_loop().time() + 30
    while True:
        status = await handle.query(NodeRequestWorkflow.describe)
        if status.phase == RequestPhase.AWAITING_APPROVAL:
            return status
        assert asyncio.get_running_loop().time() < deadline, f"never AwaitingApproval: {status}"
        await asyncio.sleep(0.05)


@pytest.mark.parametrize(("default", "phase"), [("deny", RequestPhase.UNMET), ("approve", RequestPhase.READY)])
async def test_timeout_applies_the_default(env: WorkflowEnvironment, default: str, phase: RequestPhase) -> None:
    world = World()
    gate = NODES_GATE.model_copy(update={"default": default, "timeout_s": 1800})
    inp = request(pools("kwok-cx22"), approval=gate, replan_when_unavailable=True)
    async with started(env, NodeRequestWorkflow, inp, world) as handle:
        waiting = await awaiting(handle)
        assert world.created == []  # nothing is created while it waits
        assert waiting.approval is not None and waiting.approval.reason == gate.nodes
        assert (waiting.approval.deadline - waiting.started_at).total_seconds() == pytest.approx(1800, abs=1)
        status = await handle.result()  # skips time to the timer
    assert status.phase == phase
    assert status.approval is not None and status.approval.by == "timeout"
    assert status.approval.decision == ("approved" if default == "approve" else "denied")
    if default == "deny":
        assert [(a.pool, a.result) for a in status.attempts] == [("kwok-cx22", AttemptResult.DENIED)]
        assert status.message.startswith("Denied by timeout") and "approval above 10" in status.message
        assert world.created == []
    else:
        assert [c.pool.name for c in world.created] == ["kwok-cx22"]


async def test_operator_approves_and_a_second_decision_is_refused(env: WorkflowEnvironment) -> None:
    world = World()
    inp = request(pools("kwok-cx22"), approval=NODES_GATE)
    async with started(env, NodeRequestWorkflow, inp, world) as handle:
        await awaiting(handle)
        assert await handle.execute_update(NodeRequestWorkflow.approve, "go") == f"{inp.id}: approved"
        with pytest.raises(WorkflowUpdateFailedError) as refused:
            await handle.execute_update(NodeRequestWorkflow.deny, "too late")
        assert "already approved (by operator)" in str(refused.value.cause)
        status = await handle.result()
    assert status.phase == RequestPhase.READY
    assert status.approval is not None and (status.approval.by, status.approval.note) == ("operator", "go")
    assert [c.pool.name for c in world.created] == ["kwok-cx22"]


async def test_operator_denies(env: WorkflowEnvironment) -> None:
    world = World()
    inp = request(pools("kwok-cx22", "kwok-cx32"), approval=NODES_GATE)
    async with started(env, NodeRequestWorkflow, inp, world) as handle:
        await awaiting(handle)
        await handle.execute_update(NodeRequestWorkflow.deny, "not today")
        status = await handle.result()
    assert status.phase == RequestPhase.UNMET
    assert [a.result for a in status.attempts] == [AttemptResult.DENIED]  # no fallback after a denial
    assert status.message.startswith("Denied by operator: not today")
    assert world.created == []


async def test_only_a_dear_fallback_pool_waits(env: WorkflowEnvironment) -> None:
    """The price rule gates a pool, not the request: the cheap first pool is tried at once; the
    request waits only when it falls back to the dear one."""
    world = World(no_capacity_pools={"kwok-cx22"})
    gate = ApprovalGate(pools={"kwok-cx32": "kwok cx32 costs 0.5/h (approval above 0.1/h)"}, timeout_s=600)
    inp = request(pools("kwok-cx22", "kwok-cx32"), approval=gate)
    async with started(env, NodeRequestWorkflow, inp, world) as handle:
        waiting = await awaiting(handle)
        assert [c.pool.name for c in world.created] == ["kwok-cx22"]
        assert waiting.current_pool == "kwok-cx32" and waiting.approval is not None
        status = await handle.result()
    assert [(a.pool, a.result) for a in status.attempts] == [
        ("kwok-cx22", AttemptResult.INSUFFICIENT_CAPACITY),
        ("kwok-cx32", AttemptResult.DENIED),
    ]
    assert status.phase == RequestPhase.UNMET


async def test_a_request_without_a_gate_refuses_a_decision(env: WorkflowEnvironment) -> None:
    world = World(hold_readiness=True)
    inp = request(pools("kwok-cx22"))
    async with started(env, NodeRequestWorkflow, inp, world) as handle:
        with pytest.raises(WorkflowUpdateFailedError) as refused:
            await handle.execute_update(NodeRequestWorkflow.approve, "")
        assert refused.value.cause.message == f"id: {inp.id} is not awaiting approval"
        await handle.signal(NodeRequestWorkflow.cancel, "done")
        await handle.result()


async def test_cancel_while_awaiting_approval_ends_unmet_without_a_denial(env: WorkflowEnvironment) -> None:
    world = World()
    inp = request(pools("kwok-cx22"), approval=NODES_GATE)
    async with started(env, NodeRequestWorkflow, inp, world) as handle:
        await awaiting(handle)
        await handle.signal(NodeRequestWorkflow.cancel, "no longer needed")
        status = await handle.result()
    assert status.phase == RequestPhase.UNMET and status.message == "no longer needed"
    assert status.attempts == [] and world.created == []


async def record_history(env: WorkflowEnvironment) -> WorkflowHistory:
    """A gated request the operator approves: the committed history below is one of these."""
    world = World()
    inp = request(pools("kwok-cx22"), approval=NODES_GATE)
    async with started(env, NodeRequestWorkflow, inp, world) as handle:
        await awaiting(handle)
        await handle.execute_update(NodeRequestWorkflow.approve, "recorded")
        await handle.result()
    return await handle.fetch_history()


async def test_a_gated_run_replays(env: WorkflowEnvironment) -> None:
    """Both the run just recorded and the committed one (python -m tests.workflows.nodes.test_approvals)."""
    histories = (await record_history(env), committed(HISTORY))
    for history in histories:
        events = history.to_json_dict()["events"]
        assert any(e["eventType"] == "EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED" for e in events)  # approve
    await assert_replay([NodeRequestWorkflow], *histories)


if __name__ == "__main__":
    record_again(HISTORY, record_history)
