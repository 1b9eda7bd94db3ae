"""NodeRequestBatch on the time-skipping server, with scripted provider stubs: each member is a
node's request of its own (key, labels, fallback, cancel), one approval covers the batch, and
the loop gets the members' changes in a few signals."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from temporalio import workflow
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowHandle, WorkflowUpdateFailedError
from temporalio.testing import WorkflowEnvironment

from scaling.kube.labels import request_key
from scaling.kube.models import Resources
from scaling.nodes.models import LABEL_REQUEST, AttemptResult, Pool, RequestPhase
from scaling.nodes.scale_up.approvals import ApprovalGate
from scaling.nodes.scale_up.requests import (
    BatchMember,
    CancelMembers,
    NodeRequestBatchInput,
    NodeRequestBatchStatus,
    NodeRequestStatus,
    member_id,
)
from tests.polling import query_until
from tests.workflows.nodes.stubs import World, started
from tests.workflows.replayer import assert_replay, committed
from tests.workflows.workers import new_worker
from workflows.nodes.request_batch import NodeRequestBatchWorkflow

HISTORIES = Path(__file__).parents[1] / "histories"
HISTORY = HISTORIES / "node_request_batch.json"


def pools(*names: str) -> list[Pool]:
    return [Pool(group="general", name=n, provider="kwok", server_type=n.split("-", 1)[1], priority=50) for n in names]


def batch(n: int, candidates: list[Pool] | None = None, **kw) -> NodeRequestBatchInput:
    return NodeRequestBatchInput(
        id=f"nodes/test/request/{uuid.uuid4().hex[:8]}",
        cluster=kw.pop("cluster", "test"),
        group="general",
        group_labels={"team": "a"},
        candidates=candidates or pools("kwok-cx22", "kwok-cx32"),
        readiness_timeout_s=60,
        ttl_s=600,
        members=[
            BatchMember(requirements=Resources(cpu_m=500 * (i + 1), pods=1), pod_uids=[f"p{i}"], pods={"web": 1})
            for i in range(n)
        ],
        **kw,
    )


def tq() -> str:
    return f"tq-{uuid.uuid4().hex[:6]}"


async def run_batch(env: WorkflowEnvironment, world: World, inp: NodeRequestBatchInput, **worker_kw):
    async with started(env, NodeRequestBatchWorkflow, inp, world, **worker_kw) as handle:
        return handle, await handle.result()


def phases(status: NodeRequestBatchStatus) -> list[RequestPhase]:
    return [m.phase for m in status.members]


async def describe_until(handle: WorkflowHandle, check) -> NodeRequestBatchStatus:  # type: ignore[no-untyped-def]
    return await query_until(handle, NodeRequestBatchWorkflow.describe, check, timeout=60, every=0.05)


async def test_each_member_creates_its_own_node_under_its_own_key(env: WorkflowEnvironment) -> None:
    world = World()
    inp = batch(3)
    _, status = await run_batch(env, world, inp)
    ids = [member_id(inp.id, i) for i in range(3)]
    assert phases(status) == [RequestPhase.READY] * 3 and [m.id for m in status.members] == ids
    assert sorted((c.request_id, c.attempt) for c in world.created) == [(i, 0) for i in ids]
    nodes = [m.node_name for m in status.members]
    assert len(set(nodes)) == 3
    for m in status.members:  # labelled as a NodeRequest of its own would be
        assert world.labelled[m.node_name][LABEL_REQUEST] == request_key(m.id)
        assert world.labelled[m.node_name]["team"] == "a"
    assert [m.requirements.cpu_m for m in status.members] == [500, 1000, 1500]
    assert world.deleted == []


async def test_a_lost_create_answer_is_retried_and_finds_its_machine(env: WorkflowEnvironment) -> None:
    """The provider made the machine but its answer was lost: the retry (same member, same
    attempt) finds it. Exactly one machine per member."""
    world = World(lost_create_answers=2)
    inp = batch(4)
    _, status = await run_batch(env, world, inp)
    assert phases(status) == [RequestPhase.READY] * 4
    assert len(world.machines) == 4 and len(world.created) == 6  # two creates were retried
    for i, m in enumerate(status.members):
        assert m.node_name == world.machines[(member_id(inp.id, i), 0)]


async def test_a_worker_killed_mid_batch_leaves_one_node_per_member(env: WorkflowEnvironment) -> None:
    """Member 1's create made its machine, then the worker died before answering. Another
    worker (a new one: it replays the history) retries that create under the same key."""
    inp = batch(3)
    world = World(crash_after_create={member_id(inp.id, 1)})
    queue = tq()
    async with new_worker(
        env.client, queue, workflows=[NodeRequestBatchWorkflow], activities=world.activities(), max_cached_workflows=0
    ):
        handle = await env.client.start_workflow(NodeRequestBatchWorkflow.run, inp, id=inp.id, task_queue=queue)
        await world.crashed.wait()
    # Member 1's machine exists (the others' may or may not yet); the workflow never heard of it.
    assert (member_id(inp.id, 1), 0) in world.machines
    async with new_worker(env.client, queue, workflows=[NodeRequestBatchWorkflow], activities=world.activities()):
        status = await handle.result()
    assert phases(status) == [RequestPhase.READY] * 3
    assert len(world.machines) == 3 and len({m.node_name for m in status.members}) == 3
    for i, m in enumerate(status.members):
        assert m.node_name == world.machines[(member_id(inp.id, i), 0)]
        assert len(m.attempts) == 1
    assert sum(c.request_id == member_id(inp.id, 1) for c in world.created) == 2  # the retry
    assert world.deleted == []


async def test_members_wait_for_ready_in_shared_rounds(env: WorkflowEnvironment) -> None:
    """One wait_nodes_ready round at a time serves every member (not an activity each); a node
    not Ready in time is removed and that member tries its next pool."""
    world = World(never_ready_pools={"kwok-cx22"})
    inp = batch(6)
    handle, status = await run_batch(env, world, inp)
    assert phases(status) == [RequestPhase.READY] * 6
    assert all(
        [a.result for a in m.attempts] == [AttemptResult.READINESS_TIMEOUT, AttemptResult.READY] for m in status.members
    )
    assert sorted(world.deleted) == sorted(m.attempts[0].node_name for m in status.members)
    waited = [n for r in world.readiness_rounds for n in r]
    assert sorted(set(waited)) == sorted({a.node_name for m in status.members for a in m.attempts})
    assert len(world.readiness_rounds) < 12  # 12 nodes waited for, in fewer activities
    names = {
        e.activity_task_scheduled_event_attributes.activity_type.name
        async for e in handle.fetch_history_events()
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    }
    assert "wait_node_ready" not in names and "wait_nodes_ready" in names


@pytest.mark.parametrize("replan", [True, False])
async def test_one_member_without_capacity_leaves_the_others_ready(env: WorkflowEnvironment, replan: bool) -> None:
    inp = batch(3, replan_when_unavailable=replan)
    world = World(no_capacity_requests={(member_id(inp.id, 1), "kwok-cx22")})
    _, status = await run_batch(env, world, inp)
    first, second, third = status.members
    assert first.phase == third.phase == RequestPhase.READY and first.current_pool == "kwok-cx22"
    if replan:  # its pods go back to the loop's planner
        assert second.phase == RequestPhase.REPLANNED and not second.node_name
        assert [(a.pool, a.result) for a in second.attempts] == [("kwok-cx22", AttemptResult.INSUFFICIENT_CAPACITY)]
    else:  # started by hand: it falls back to its next pool
        assert second.phase == RequestPhase.READY and second.current_pool == "kwok-cx32"
        assert [a.result for a in second.attempts] == [AttemptResult.INSUFFICIENT_CAPACITY, AttemptResult.READY]


async def test_cancel_one_member_then_every_other(env: WorkflowEnvironment) -> None:
    world = World(hold_readiness=True)
    inp = batch(3)
    async with started(env, NodeRequestBatchWorkflow, inp, world) as handle:
        await describe_until(handle, lambda s: phases(s) == [RequestPhase.PROVISIONING] * 3)
        await handle.signal(NodeRequestBatchWorkflow.cancel, CancelMembers(index=1, reason="no longer needed"))
        one = await describe_until(handle, lambda s: s.members[1].final)
        assert one.members[1].phase == RequestPhase.UNMET and one.members[1].message == "no longer needed"
        assert one.members[1].attempts[-1].result == AttemptResult.CANCELLED
        assert world.deleted == [one.members[1].attempts[-1].node_name]
        assert one.members[0].phase == one.members[2].phase == RequestPhase.PROVISIONING
        await handle.signal(NodeRequestBatchWorkflow.cancel, CancelMembers())
        status = await handle.result()
    assert phases(status) == [RequestPhase.UNMET] * 3
    assert all(m.attempts[-1].result == AttemptResult.CANCELLED for m in status.members)
    assert status.members[1].message == "no longer needed"  # a final member stays as it was
    assert status.members[0].message == "cancelled by operator"
    assert sorted(world.deleted) == sorted(m.attempts[-1].node_name for m in status.members)


NODES_GATE = ApprovalGate(nodes="3 nodes for group general in one loop (approval above 2)", timeout_s=1800)


@pytest.mark.parametrize("approve", [True, False])
async def test_one_decision_covers_the_batch(env: WorkflowEnvironment, approve: bool) -> None:
    world = World()
    inp = batch(3, approval=NODES_GATE)
    async with started(env, NodeRequestBatchWorkflow, inp, world) as handle:
        waiting = await describe_until(handle, lambda s: phases(s) == [RequestPhase.AWAITING_APPROVAL] * 3)
        assert waiting.approval is not None and waiting.approval.reason == NODES_GATE.nodes
        assert not world.created
        answer = await handle.execute_update(
            NodeRequestBatchWorkflow.approve if approve else NodeRequestBatchWorkflow.deny, "looked at it"
        )
        assert answer == f"{inp.id}: {'approved' if approve else 'denied'}"
        with pytest.raises(WorkflowUpdateFailedError) as refused:  # one decision: a second is refused
            await handle.execute_update(NodeRequestBatchWorkflow.approve, "again")
        assert "already" in str(refused.value.cause) and inp.id in str(refused.value.cause)
        status = await handle.result()
    if approve:
        assert phases(status) == [RequestPhase.READY] * 3 and len(world.created) == 3
    else:
        assert phases(status) == [RequestPhase.UNMET] * 3 and not world.created
        assert all(m.attempts[-1].result == AttemptResult.DENIED for m in status.members)
        assert all(m.message.startswith("Denied by operator: looked at it") for m in status.members)
    assert status.approval is not None and status.approval.by == "operator"


async def test_the_timeout_default_decides_for_every_member_with_one_timer(env: WorkflowEnvironment) -> None:
    world = World()
    inp = batch(3, approval=NODES_GATE.model_copy(update={"default": "approve", "timeout_s": 60}))
    handle, status = await run_batch(env, world, inp)
    assert phases(status) == [RequestPhase.READY] * 3
    assert status.approval is not None and status.approval.by == "timeout"
    timers = [e async for e in handle.fetch_history_events() if e.event_type == EventType.EVENT_TYPE_TIMER_STARTED]
    assert len(timers) == 2  # the approval's (one for the batch) and the TTL's


async def test_a_decision_on_a_batch_not_waiting_is_refused_naming_the_id(env: WorkflowEnvironment) -> None:
    world = World(hold_readiness=True)
    inp = batch(2)
    async with started(env, NodeRequestBatchWorkflow, inp, world) as handle:
        await describe_until(handle, lambda s: phases(s) == [RequestPhase.PROVISIONING] * 2)
        with pytest.raises(WorkflowUpdateFailedError) as refused:
            await handle.execute_update(NodeRequestBatchWorkflow.approve, "")
        assert str(refused.value.cause).endswith(f"id: {inp.id} is not awaiting approval")
        world.hold_readiness = False
        await handle.result()


@workflow.defn(name="BatchReportRecorder", sandboxed=False)
class BatchReportRecorder:
    """Stands for the NodeAutoscaler: the member reports a batch sends it."""

    def __init__(self) -> None:
        self.reports: list[NodeRequestStatus] = []

    @workflow.signal(name="requests_changed")
    def requests_changed(self, updates: list[NodeRequestStatus]) -> None:
        self.reports.extend(updates)

    @workflow.run
    async def run(self, members: int) -> list[NodeRequestStatus]:
        await workflow.wait_condition(lambda: sum(r.final for r in self.reports) == members)
        return self.reports


async def test_members_reports_reach_the_loop_in_a_few_signals_in_order(env: WorkflowEnvironment) -> None:
    n = 12
    queue = tq()
    async with new_worker(
        env.client, queue, workflows=[NodeRequestBatchWorkflow, BatchReportRecorder], activities=World().activities()
    ):
        loop = await env.client.start_workflow(
            BatchReportRecorder.run, n, id=f"loop-{uuid.uuid4().hex[:6]}", task_queue=queue
        )
        inp = batch(n, parent_workflow_id=loop.id)
        await env.client.start_workflow(NodeRequestBatchWorkflow.run, inp, id=inp.id, task_queue=queue)
        reports = await loop.result()
    signals = [
        e async for e in loop.fetch_history_events() if e.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED
    ]
    # 12 members changed twice each (Provisioning, Ready): far fewer signals than changes.
    assert 1 <= len(signals) < n
    by_member: dict[str, list[RequestPhase]] = {}
    for r in reports:
        assert not r.pods and not r.pod_uids  # without pods, as a NodeRequest reports
        by_member.setdefault(r.id, []).append(r.phase)
    assert sorted(by_member) == sorted(member_id(inp.id, i) for i in range(n))
    for seen in by_member.values():  # each member's last report is its final one, once
        assert seen[-1] == RequestPhase.READY and seen.count(RequestPhase.READY) == 1


async def test_replay_of_recorded_batch_history() -> None:
    """A recorded history must replay on the current code: catches non-determinism."""
    await assert_replay([NodeRequestBatchWorkflow], committed(HISTORY))


async def record_history(env: WorkflowEnvironment) -> None:
    """Used by python -m tests.workflows.record_history to make the file above: a batch of three,
    one member without capacity on its first pool (it falls back to the next)."""
    inp = batch(3)
    world = World(no_capacity_requests={(member_id(inp.id, 1), "kwok-cx22")})
    handle, _ = await run_batch(env, world, inp)
    history = await handle.fetch_history()
    HISTORY.write_text(json.dumps(history.to_json_dict(), indent=1))
