"""NodeRequest state machine on the time-skipping server, with scripted provider stubs."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

from hcloud import APIException
from temporalio import activity, workflow
from temporalio.exceptions import ApplicationError
from temporalio.testing import WorkflowEnvironment

from scaling.kube.models import Resources
from scaling.nodes import contracts
from scaling.nodes.contracts import CreateNodeInput, CreateNodeResult
from scaling.nodes.models import LABEL_GROUP, LABEL_POOL, AttemptResult, Pool, RequestPhase
from scaling.nodes.scale_up.requests import NodeRequestInput, NodeRequestStatus
from tests.workflows.nodes.stubs import World, started
from tests.workflows.replayer import assert_replay, committed
from tests.workflows.workers import new_worker
from workflows.nodes.request import NodeRequestWorkflow

HISTORIES = Path(__file__).parents[1] / "histories"


def pools(*names: str, priority: int = 50) -> list[Pool]:
    return [
        Pool(group="general", name=n, provider="kwok", server_type=n.split("-", 1)[1], priority=priority) for n in names
    ]


def request(candidates: list[Pool], **kw) -> NodeRequestInput:
    rid = f"nodes/test/request/{uuid.uuid4().hex[:8]}"
    return NodeRequestInput(
        id=rid,
        cluster="test",
        group="general",
        group_labels={"team": "a"},
        requirements=Resources(cpu_m=1000, memory=1 << 30, pods=2),
        pod_uids=["p1", "p2"],
        candidates=candidates,
        readiness_timeout_s=60,
        ttl_s=600,
        **kw,
    )


async def run_request(env: WorkflowEnvironment, world: World, inp: NodeRequestInput):
    async with started(env, NodeRequestWorkflow, inp, world) as handle:
        return handle, await handle.result()


async def test_falls_back_to_next_pool_on_insufficient_capacity(env: WorkflowEnvironment) -> None:
    world = World(no_capacity_pools={"kwok-cx22"})
    _, status = await run_request(env, world, request(pools("kwok-cx22", "kwok-cx32")))
    assert status.phase == RequestPhase.READY
    assert [(a.pool, a.result) for a in status.attempts] == [
        ("kwok-cx22", AttemptResult.INSUFFICIENT_CAPACITY),
        ("kwok-cx32", AttemptResult.READY),
    ]
    assert status.current_pool == "kwok-cx32"
    labels = world.labelled[status.node_name]
    assert labels[LABEL_GROUP] == "general" and labels[LABEL_POOL] == "kwok-cx32" and labels["team"] == "a"
    assert world.deleted == []


async def test_autoscaler_request_hands_its_pods_back_on_insufficient_capacity(env: WorkflowEnvironment) -> None:
    """Started by the NodeAutoscaler (replan_when_unavailable): no fallback with a pod set sized
    for the full pool; the request ends Replanned and the loop plans its pods again."""
    world = World(no_capacity_pools={"kwok-cx22"})
    _, status = await run_request(env, world, request(pools("kwok-cx22", "kwok-cx32"), replan_when_unavailable=True))
    assert status.phase == RequestPhase.REPLANNED and status.final
    assert [(a.pool, a.result) for a in status.attempts] == [("kwok-cx22", AttemptResult.INSUFFICIENT_CAPACITY)]
    assert [c.pool.name for c in world.created] == ["kwok-cx22"]  # the next pool was not tried
    assert "kwok-cx22" in status.message and not status.node_name


async def test_node_never_ready_is_removed_and_next_pool_tried(env: WorkflowEnvironment) -> None:
    world = World(never_ready_pools={"kwok-cx22"})
    _, status = await run_request(env, world, request(pools("kwok-cx22", "kwok-cx32")))
    assert [a.result for a in status.attempts] == [AttemptResult.READINESS_TIMEOUT, AttemptResult.READY]
    assert world.deleted == [status.attempts[0].node_name]
    assert status.phase == RequestPhase.READY


async def test_unmet_after_every_pool_fails(env: WorkflowEnvironment) -> None:
    world = World(no_capacity_pools={"kwok-cx22"}, quota_pools={"kwok-cx32"})
    _, status = await run_request(env, world, request(pools("kwok-cx22", "kwok-cx32")))
    assert status.phase == RequestPhase.UNMET
    assert [a.result for a in status.attempts] == [AttemptResult.INSUFFICIENT_CAPACITY, AttemptResult.QUOTA_EXCEEDED]
    assert "kwok-cx22" in status.message and "kwok-cx32" in status.message


async def test_max_attempts_stops_trying(env: WorkflowEnvironment) -> None:
    world = World(never_ready_pools={"kwok-cx22", "kwok-cx32", "kwok-cx42"})
    _, status = await run_request(env, world, request(pools("kwok-cx22", "kwok-cx32", "kwok-cx42"), max_attempts=2))
    assert status.phase == RequestPhase.UNMET
    assert len(status.attempts) == 2
    assert len(world.created) == 2 and len(world.deleted) == 2


async def test_cancel_during_provisioning_removes_the_node(env: WorkflowEnvironment) -> None:
    world = World(hold_readiness=True)
    inp = request(pools("kwok-cx22"))
    tq = f"tq-{uuid.uuid4().hex[:6]}"
    async with new_worker(env.client, tq, workflows=[NodeRequestWorkflow], activities=world.activities()):
        handle = await env.client.start_workflow(NodeRequestWorkflow.run, inp, id=inp.id, task_queue=tq)
        # Wait (by query, not by sleeping) until the request is Provisioning.
        for _ in range(200):
            s = await handle.query(NodeRequestWorkflow.describe)
            if s and s.phase == RequestPhase.PROVISIONING:
                break
        assert s.phase == RequestPhase.PROVISIONING
        await handle.signal(NodeRequestWorkflow.cancel, "no longer needed")
        status = await handle.result()
    assert status.phase == RequestPhase.UNMET
    assert status.attempts[-1].result == AttemptResult.CANCELLED
    assert world.deleted == [status.attempts[-1].node_name]
    assert status.message == "no longer needed"


async def test_final_state_is_kept_for_the_ttl(env: WorkflowEnvironment) -> None:
    world = World()
    inp = request(pools("kwok-cx22"))
    handle, status = await run_request(env, world, inp)
    desc = await handle.describe()
    # The run closed only after the TTL timer: its close time is >= ttl after the request finished.
    assert status.finished_at is not None and desc.close_time is not None
    assert (desc.close_time - status.finished_at).total_seconds() >= inp.ttl_s - 1


async def test_provider_error_keeps_the_actionable_outer_message(env: WorkflowEnvironment) -> None:
    """An InvalidToken from the provider: the attempt says which token (growth's outer message)
    and what the API answered (the cause), not only "unable to authenticate"."""
    world = World()
    outer = (
        "Hetzner API rejected the token (401 unauthorized): the token in /etc/growth/hcloud-token is invalid or revoked"
    )

    @activity.defn(name=contracts.CREATE_NODE)
    async def create_node(inp: CreateNodeInput) -> CreateNodeResult:
        world.created.append(inp)
        try:
            raise APIException(code="unauthorized", message="unable to authenticate", details=None)
        except APIException as exc:
            raise ApplicationError(outer, type="InvalidToken", non_retryable=True) from exc

    stubs = [a for a in world.activities() if a.__temporal_activity_definition.name != contracts.CREATE_NODE]
    inp = request(pools("kwok-cx22", "kwok-cx32"))
    tq = f"tq-{uuid.uuid4().hex[:6]}"
    async with new_worker(env.client, tq, workflows=[NodeRequestWorkflow], activities=[create_node, *stubs]):
        handle = await env.client.start_workflow(NodeRequestWorkflow.run, inp, id=inp.id, task_queue=tq)
        status = await handle.result()
    assert status.phase == RequestPhase.UNMET
    assert [a.result for a in status.attempts] == [AttemptResult.PROVIDER_ERROR, AttemptResult.PROVIDER_ERROR]
    assert len(world.created) == 2  # non-retryable: one call per pool
    for a in status.attempts:
        assert a.message == f"{outer}: unable to authenticate (unauthorized)"
        assert "Activity task failed" not in a.message


async def test_replay_of_recorded_fallback_history() -> None:
    """A recorded history must replay on the current code: catches non-determinism."""
    history_file = HISTORIES / "node_request_fallback.json"
    await assert_replay([NodeRequestWorkflow], committed(history_file))


async def record_history(env: WorkflowEnvironment) -> None:
    """Used once (python -m tests.workflows.record_history) to make the file above."""
    world = World(no_capacity_pools={"kwok-cx22"})
    handle, _ = await run_request(env, world, request(pools("kwok-cx22", "kwok-cx32")))
    history = await handle.fetch_history()
    (HISTORIES / "node_request_fallback.json").write_text(json.dumps(history.to_json_dict(), indent=1))


@workflow.defn(name="ReportRecorder", sandboxed=False)
class ReportRecorder:
    """Stands for the NodeAutoscaler: the phases a request reports to it."""

    def __init__(self) -> None:
        self.phases: list[RequestPhase] = []

    @workflow.signal(name="request_changed")
    def request_changed(self, update: NodeRequestStatus) -> None:
        self.phases.append(update.phase)

    @workflow.run
    async def run(self) -> list[RequestPhase]:
        await workflow.wait_condition(lambda: RequestPhase.READY in self.phases)
        return self.phases


async def test_a_request_reports_to_its_loop_from_its_first_attempt_on(env: WorkflowEnvironment) -> None:
    """The loop recorded the request Pending when it started it: no report says so again (in a
    burst, a third of the signals the loop took)."""
    tq = f"tq-{uuid.uuid4().hex[:6]}"
    async with new_worker(
        env.client, tq, workflows=[NodeRequestWorkflow, ReportRecorder], activities=World().activities()
    ):
        loop = await env.client.start_workflow(ReportRecorder.run, id=f"loop-{uuid.uuid4().hex[:6]}", task_queue=tq)
        inp = request(pools("kwok-cx22"), parent_workflow_id=loop.id)
        await env.client.start_workflow(NodeRequestWorkflow.run, inp, id=inp.id, task_queue=tq)
        assert await loop.result() == [RequestPhase.PROVISIONING, RequestPhase.READY]
