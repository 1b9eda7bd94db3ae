"""Approval gate on creating a heterogeneous group (scaling.components.approvals), on the
time-skipping server with the scripted TiDB world: the loop keeps working while a group waits,
an operator's approve/deny is an update, and the timeout's default is a durable timer."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest
from temporalio.client import WorkflowUpdateFailedError
from temporalio.testing import WorkflowEnvironment

from activities.updates import execute_update
from scaling.components.state import DecisionRequest
from tests.polling import until
from tests.workflows.components.stubs import ComponentsWorld
from tests.workflows.components.test_autoscaler import autoscaler, report, rounds_past, skip, tikv_spec
from tests.workflows.replayer import new_replayer
from tests.workflows.task_times import task_started_after
from workflows.components.autoscaler import ComponentAutoscalerWorkflow
from workflows.components.registry import WORKFLOWS

GATED = {"approve_group_create": True, "approval_timeout_s": 600}


def hot_world() -> ComponentsWorld:
    return ComponentsWorld(spec=tikv_spec(), load={"tikv": 3.0}, hot={"tikv": (1, 0.95)})


async def waiting_group(handle) -> str:  # noqa: ANN001
    """The name of the group whose creation awaits approval, once the loop recorded the wait."""
    deadline = asyncio.get_running_loop().time() + 60
    while True:
        tikv = (await report(handle)).components.get("tikv")
        found = [k for k, a in (tikv.approvals if tikv else {}).items() if not a.decision]
        if found:
            return found[0]
        assert asyncio.get_running_loop().time() < deadline, "no group awaits approval"
        await asyncio.sleep(0.1)


async def test_a_group_waits_for_approval_then_is_created(env: WorkflowEnvironment) -> None:
    world = hot_world()
    async with autoscaler(env, world, **GATED) as handle:
        name = await waiting_group(handle)
        assert name.startswith("auto-") and world.autos == {}
        rep = await rounds_past(env, handle, 2)  # the loop goes on; the group still waits
        assert world.autos == {} and rep.components["tikv"].approvals[name].decision == ""
        assert "GroupCreateAwaitingApproval" in world.reasons()
        with pytest.raises(WorkflowUpdateFailedError) as refused:
            await execute_update(handle, ComponentAutoscalerWorkflow.approve, DecisionRequest(id="auto-nope"))
        assert refused.value.cause.message == "id: no heterogeneous group 'auto-nope' awaits approval"
        assert (
            await execute_update(handle, ComponentAutoscalerWorkflow.approve, DecisionRequest(id=name, note="ok"))
            == f"{name}: approved"
        )
        with pytest.raises(WorkflowUpdateFailedError) as refused:
            await execute_update(handle, ComponentAutoscalerWorkflow.deny, DecisionRequest(id=name))
        # Refused either way: approved and not yet created, or (a round can run between the two
        # updates) created, so no longer awaiting approval.
        assert refused.value.cause.message in (
            f"id: {name} was already approved (by operator)",
            f"id: no heterogeneous group '{name}' awaits approval",
        )
        await until(lambda: name in world.autos)
        rep = await rounds_past(env, handle, 1)
        assert rep.counters.heterogeneous_created == [name] and rep.components["tikv"].approvals == {}
        history = await handle.fetch_history()
    await new_replayer(WORKFLOWS).replay_workflow(history)


async def test_the_timeout_denies_and_the_plan_asks_again_later(env: WorkflowEnvironment) -> None:
    world = hot_world()
    async with autoscaler(env, world, **GATED) as handle:
        name = await waiting_group(handle)
        await skip(env, 660)  # past the 600 s deadline: the default (deny) applies
        rep = await rounds_past(env, handle, 1)
        denied = rep.components["tikv"].approvals[name]
        assert (denied.decision, denied.by) == ("denied", "timeout") and world.autos == {}
        assert any(f"group {name}: creation denied by timeout" in m for m in rep.messages)
        await skip(env, 660)  # the denial's backoff (approval_timeout_s) passes: asked again
        rep = await rounds_past(env, handle, 1)
        again = rep.components["tikv"].approvals[name]
        assert again.decision == "" and world.autos == {}


async def test_an_operator_denial_keeps_the_group_out(env: WorkflowEnvironment) -> None:
    world = hot_world()
    async with autoscaler(env, world, **GATED, approval_default="approve") as handle:
        name = await waiting_group(handle)
        await execute_update(handle, ComponentAutoscalerWorkflow.deny, DecisionRequest(id=name, note="budget"))
        rep = await rounds_past(env, handle, 3)
        assert world.autos == {} and rep.components["tikv"].approvals[name].note == "budget"


async def test_without_the_setting_groups_are_created_at_once(env: WorkflowEnvironment) -> None:
    world = hot_world()
    async with autoscaler(env, world):
        await until(lambda: len(world.autos) == 1)


async def test_a_wait_s_deadline_counts_from_its_round_s_start(env: WorkflowEnvironment) -> None:
    """A round's reads are local activities, after which the workflow's time may not replay the
    same: the deadline is the round's start (here its run's first workflow task) plus the
    timeout, not moved by the half second its first read took."""
    world = hot_world()
    world.read_s = 0.5
    async with autoscaler(env, world, **GATED) as handle:
        name = await waiting_group(handle)
        deadline = (await report(handle)).components["tikv"].approvals[name].deadline
        history = (await handle.fetch_history()).events
    asked_at = deadline - timedelta(seconds=GATED["approval_timeout_s"])
    assert abs(asked_at - task_started_after(history)) < timedelta(milliseconds=1), asked_at
