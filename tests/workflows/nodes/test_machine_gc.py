"""MachineGC on the time-skipping server, with stub activities under the real names: which
machines it deletes, what it reports, and that it deletes nothing when it cannot judge."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest
from temporalio import activity
from temporalio.api.enums.v1 import EventType, WorkflowExecutionStatus
from temporalio.client import WorkflowFailureError, WorkflowHandle
from temporalio.exceptions import ApplicationError, CancelledError
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from scaling.kube.labels import request_key
from scaling.nodes.contracts import CollectedMachine, DeleteNodeInput, ProviderMachine, UnusablePool
from scaling.nodes.models import LABEL_CLUSTER, LABEL_GROUP, LABEL_REQUEST
from tests.polling import query_until, until
from tests.workflows.cleanup import stop_worker, terminate_runs
from tests.workflows.polling import signalled
from tests.workflows.workers import new_worker
from workflows.nodes.machine_gc import (
    MachineGCInput,
    MachineGCSettings,
    MachineGCStatus,
    MachineGCWorkflow,
    machine_gc_id,
)

OLD = 0.0  # created at the epoch: far older than any grace period
YOUNG = 1e12  # created in the far future: never past the grace period


def machine(i: int, created_at: float | None, request: str = "", group: str = "general") -> ProviderMachine:
    labels = {LABEL_CLUSTER: "c", LABEL_GROUP: group}
    if request:
        labels[LABEL_REQUEST] = request_key(request)
    return ProviderMachine(
        provider="hetzner", provider_id=f"hcloud://{i}", name=f"m{i}", labels=labels, created_at=created_at
    )


@dataclass
class Cloud:
    machines: list[ProviderMachine] = field(default_factory=list)
    node_ids: list[str] = field(default_factory=list)
    live: list[str] | None = field(default_factory=list)
    fail_deletes: int = 0
    deleted: list[str] = field(default_factory=list)
    reports: list[CollectedMachine] = field(default_factory=list)
    unusable: list[UnusablePool] = field(default_factory=list)
    live_asked: list[str] = field(default_factory=list)
    listings: int = 0
    hold: asyncio.Event | None = None  # set: listing the machines waits for it

    def activities(self) -> list[Callable]:
        cloud = self

        @activity.defn(name="list_provider_machines")
        async def list_provider_machines(cluster: str) -> list[ProviderMachine]:
            cloud.listings += 1
            if cloud.hold is not None:
                await cloud.hold.wait()
            return list(cloud.machines)

        @activity.defn(name="list_node_provider_ids")
        async def list_node_provider_ids(cluster: str) -> list[str]:
            return list(cloud.node_ids)

        @activity.defn(name="live_node_request_ids")
        async def live_node_request_ids(autoscaler_id: str) -> list[str] | None:
            cloud.live_asked.append(autoscaler_id)
            return cloud.live

        @activity.defn(name="delete_node")
        async def delete_node(inp: DeleteNodeInput) -> None:
            if cloud.fail_deletes > 0:
                cloud.fail_deletes -= 1
                raise ApplicationError("provider unavailable", non_retryable=True)
            cloud.deleted.append(inp.provider_id)
            cloud.machines = [m for m in cloud.machines if m.provider_id != inp.provider_id]

        @activity.defn(name="report_collected_machine")
        async def report_collected_machine(m: CollectedMachine) -> None:
            cloud.reports.append(m)

        @activity.defn(name="report_unusable_pools")
        async def report_unusable_pools(cluster: str) -> list[UnusablePool]:
            return list(cloud.unusable)

        return [
            list_provider_machines,
            list_node_provider_ids,
            live_node_request_ids,
            delete_node,
            report_collected_machine,
            report_unusable_pools,
        ]


async def poll(
    handle: WorkflowHandle, check: Callable[[MachineGCStatus], bool], timeout: float = 20.0
) -> MachineGCStatus:
    return await query_until(handle, MachineGCWorkflow.status, check, timeout)


@pytest.fixture
async def gc(env: WorkflowEnvironment):
    started: list[tuple[WorkflowHandle, Worker]] = []

    async def _start(cloud: Cloud, **settings: object) -> WorkflowHandle:
        tq = f"gc-{uuid.uuid4().hex[:6]}"
        # Its activities beat as the worker process's do (new_worker): a listing held past the 6 s
        # heartbeat timeout (a loaded machine) was retried, a second listing in the same round.
        worker = new_worker(env.client, tq, workflows=[MachineGCWorkflow], activities=cloud.activities())
        await worker.__aenter__()
        cluster = f"c{uuid.uuid4().hex[:6]}"
        handle = await env.client.start_workflow(
            MachineGCWorkflow.run,
            MachineGCInput(
                settings=MachineGCSettings(**{"cluster": cluster, "interval_s": 0.5, "grace_s": 600, **settings})
            ),
            id=machine_gc_id(cluster),
            task_queue=tq,
        )
        started.append((handle, worker))
        return handle

    yield _start
    for handle, worker in started:
        await terminate_runs(env.client, [handle.id])
        await stop_worker(worker)


async def test_deletes_only_old_machines_without_node_or_live_request(gc) -> None:  # noqa: ANN001
    cloud = Cloud(
        machines=[
            machine(1, OLD, request="nodes/c/request/000001-aaaa"),  # its request is over: leaked
            machine(2, OLD, request="nodes/c/request/000002-bbbb"),  # backs a Node
            machine(3, OLD, request="nodes/c/request/000003-cccc"),  # its request is in flight
            machine(4, YOUNG, request="nodes/c/request/000004-dddd"),  # inside the grace period
            machine(5, None),  # unknown age: never judged
            machine(6, OLD, group="batch"),  # no request label at all: leaked
        ],
        node_ids=["hcloud://2"],
        live=["nodes/c/request/000003-cccc"],
    )
    handle = await gc(cloud)
    status = await poll(handle, lambda s: s.state.collected_total >= 2 and len(cloud.reports) >= 2)
    assert sorted(cloud.deleted) == ["hcloud://1", "hcloud://6"]
    assert {r.provider_id for r in status.state.collected} == {"hcloud://1", "hcloud://6"}
    by_id = {r.provider_id: r for r in cloud.reports}
    assert by_id["hcloud://6"].group == "batch"
    assert by_id["hcloud://1"].request == request_key("nodes/c/request/000001-aaaa")
    assert "grace" in by_id["hcloud://1"].reason
    # The next rounds find nothing more to delete: the rest is accounted for.
    await handle.signal(MachineGCWorkflow.collect_now)
    later = await poll(handle, lambda s: s.state.rounds > status.state.rounds)
    assert later.state.collected_total == 2
    assert sorted(cloud.deleted) == ["hcloud://1", "hcloud://6"]
    assert cloud.live_asked[0] == f"nodes/{later.cluster}"


async def test_nothing_is_deleted_when_the_autoscaler_cannot_say_what_is_in_flight(gc) -> None:  # noqa: ANN001
    cloud = Cloud(machines=[machine(1, OLD, request="nodes/c/request/000001-aaaa")], live=None)
    handle = await gc(cloud)
    status = await poll(handle, lambda s: s.state.skipped_rounds >= 2)
    assert cloud.deleted == []
    assert status.state.collected_total == 0
    assert "in-flight" in status.state.last_error
    # Once it answers, the leak goes.
    cloud.live = []
    await handle.signal(MachineGCWorkflow.collect_now)
    await poll(handle, lambda s: s.state.collected_total == 1)
    assert cloud.deleted == ["hcloud://1"]


async def continued(
    env: WorkflowEnvironment, handle: WorkflowHandle, run_id: str, timeout: float = 30.0
) -> tuple[str, MachineGCInput]:
    """The run after `run_id` and the input that run `run_id` continued-as-new with, read from
    its history. Not a status query: on the time-skipping server a query that met a hand-over
    kept answering from the old run's state (rounds=1 for 30 s while describe showed the
    workflow running new runs, the delete long done), where a history is what happened."""
    deadline = asyncio.get_running_loop().time() + timeout
    run = env.client.get_workflow_handle(handle.id, run_id=run_id)
    while True:
        events = (await run.fetch_history()).events
        if events and events[-1].event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW:
            attrs = events[-1].workflow_execution_continued_as_new_event_attributes
            return attrs.new_execution_run_id, MachineGCInput.model_validate_json(attrs.input.payloads[0].data)
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"run {run_id} did not continue-as-new within {timeout:.0f} s")
        await asyncio.sleep(0.25)


async def test_failed_delete_is_retried_next_round_and_state_survives_continue_as_new(
    env: WorkflowEnvironment,
    gc,  # noqa: ANN001
) -> None:
    # Two rounds per run on a short real interval; deletes fail in rounds 1-3, round 4 deletes.
    cloud = Cloud(machines=[machine(1, OLD)], fail_deletes=3)
    cloud.unusable = [
        UnusablePool(group="g", pool="hetzner-cx31", provider="hetzner", server_type="CX31", reason="removed")
    ]
    handle = await gc(cloud, rounds_per_run=2)
    assert handle.result_run_id is not None
    run, first = await continued(env, handle, handle.result_run_id)
    # Run 1 hands its failures on: nothing deleted, both attempts counted, the last one named.
    assert (first.state.runs, first.state.rounds, first.state.delete_failures) == (2, 2, 2)
    assert first.state.collected_total == 0
    assert "delete hcloud://1" in first.state.last_error
    assert first.state.unusable_pools[0].pool == "hetzner-cx31"
    _, second = await continued(env, handle, run)
    # Run 2 failed once more, then deleted it, and hands on the failures of both runs.
    assert cloud.deleted == ["hcloud://1"]
    assert (second.state.runs, second.state.delete_failures, second.state.collected_total) == (3, 3, 1)
    assert [c.provider_id for c in second.state.collected] == ["hcloud://1"]


async def test_a_collector_cancelled_mid_round_ends_cancelled(env: WorkflowEnvironment, gc) -> None:  # noqa: ANN001
    """Cancelled (the Web UI's Cancel, `temporal workflow cancel`) while it lists machines, it
    ends as cancelled: its activity's cancellation is not a provider failure to note and carry on
    from (it did, and collected on, every round, until terminated by hand)."""
    cloud = Cloud(machines=[machine(1, OLD)], hold=asyncio.Event())
    handle = await gc(cloud)
    try:
        await until(lambda: cloud.listings == 1, what="a round listing machines")
        await handle.cancel()

        async def ended_or_listing_again() -> bool:
            running = WorkflowExecutionStatus.WORKFLOW_EXECUTION_STATUS_RUNNING
            return (await handle.describe()).status != running or cloud.listings > 1

        await until(ended_or_listing_again, what="MachineGC ended or in its next round")
        assert (await handle.describe()).status == WorkflowExecutionStatus.WORKFLOW_EXECUTION_STATUS_CANCELED
        with pytest.raises(WorkflowFailureError) as failed:
            await handle.result()
        assert isinstance(failed.value.cause, CancelledError)
        assert cloud.listings == 1 and cloud.deleted == []  # no round after the cancel
    finally:
        cloud.hold.set()


async def test_a_wake_during_a_round_starts_the_next_round_at_once(gc) -> None:  # noqa: ANN001
    """collect_now while a round lists machines asks for a round after it: the next one starts
    as that round ends, not an interval (an hour here) later. It was reset after the round, so
    a wake that came during one was forgotten (patch wake-kept-during-round)."""
    cloud = Cloud(hold=asyncio.Event())
    handle = await gc(cloud, interval_s=3600)
    await until(lambda: cloud.listings == 1, what="the first round listing machines")
    await handle.signal(MachineGCWorkflow.collect_now)
    await until(lambda: signalled(handle), what="collect_now in the history, the round still listing")
    cloud.hold.set()
    # Round 2 counts itself as it starts, before it lists (report_unusable_pools comes first):
    # wait for its listing too, or a loaded machine shows rounds=2 with listings=1.
    status = await poll(handle, lambda s: s.state.rounds >= 2 and cloud.listings >= 2)
    assert cloud.listings == 2 and status.state.rounds == 2
