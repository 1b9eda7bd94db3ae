"""ComponentAutoscaler on the time-skipping server with the scripted TiDB world.

Time moves only through env.sleep (durable timers fire as the server skips); the world's state
is then checked with deadlines, never a bare sleep-then-assert."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta

import pytest
from temporalio.client import WorkflowHandle, WorkflowUpdateFailedError
from temporalio.service import RPCError
from temporalio.testing import WorkflowEnvironment

from activities.updates import execute_update
from scaling.components.state import (
    AutoscalerReport,
    BlockScaleInRequest,
    ComponentAutoscalerInput,
    ComponentAutoscalerSettings,
    PinRequest,
)
from tests.polling import until
from tests.workflows.cleanup import running
from tests.workflows.components.stubs import ComponentsWorld
from tests.workflows.replayer import new_replayer
from tests.workflows.workers import new_worker
from workflows.components.autoscaler import ComponentAutoscalerWorkflow, workflow_id
from workflows.components.registry import WORKFLOWS

CPU_RULE = {"max_threshold": 0.8, "min_threshold": 0.2}
SCAN_S = 30


def tikv_spec(**extra: object) -> dict:
    tikv = {
        "resources": {"big": {"cpu": "4", "memory": "8Gi", "count": 2}},
        "rules": {"cpu": dict(CPU_RULE)},
        **extra,
    }
    return {"cluster": {"name": "db"}, "tikv": tikv}


async def skip(env: WorkflowEnvironment, seconds: float) -> None:
    """Skip `seconds` of server time in scan-sized steps, measured on the server's clock.

    On a loaded machine a step can outlast the sleep call's own RPC deadline ("Timeout
    expired"), or its HTTP/2 stream can be reset ("h2 protocol error", seen once with a CPU hog
    and three test runs beside it), while the server still moved time on: the next step
    skips only what is left."""
    target = await env.get_current_time() + timedelta(seconds=seconds)
    for _ in range(1000):
        left = (target - await env.get_current_time()).total_seconds()
        if left <= 0:
            return
        try:
            await env.sleep(min(left, 2 * SCAN_S))
        except RPCError as err:
            if "Timeout expired" not in str(err) and "h2 protocol error" not in str(err):
                raise
    raise AssertionError(f"server time did not reach {target}")


async def report(handle: WorkflowHandle) -> AutoscalerReport:
    for _ in range(50):
        try:
            # A deadline: under a CPU hog the time-skipping server once left a query unanswered
            # until pytest's 300 s timeout; asking again is what a caller would do.
            return await handle.query(ComponentAutoscalerWorkflow.status, rpc_timeout=timedelta(seconds=20))
        except RPCError as exc:  # a query racing a continue-as-new hand-over, or past its deadline
            error = exc
            await asyncio.sleep(0.1)
    raise AssertionError(f"status query kept failing: {error}")


async def skip_until(env: WorkflowEnvironment, check, most_s: float) -> None:  # type: ignore[no-untyped-def]
    """Skip server time in 5 s steps until `check` holds (at most `most_s` of server time): a
    change that takes a round (or several, behind a gate) lands whenever its round runs, so
    waiting on the world without moving time can leave that round's timer unfired."""
    for _ in range(int(most_s / 5)):
        if check():
            return
        await skip(env, 5)
    await until(check)


async def rounds_past(env: WorkflowEnvironment, handle: WorkflowHandle, n: int) -> AutoscalerReport:
    """Skip time scan by scan until the loop has finished `n` more rounds than now."""
    start = (await report(handle)).rounds
    deadline = asyncio.get_running_loop().time() + 60
    while True:
        rep = await report(handle)
        if rep.rounds >= start + n:
            return rep
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"loop stuck at round {rep.rounds}")
        await skip(env, SCAN_S)


@asynccontextmanager
async def autoscaler(
    env: WorkflowEnvironment, world: ComponentsWorld, task_queue: str | None = None, **kw: object
) -> AsyncIterator[WorkflowHandle]:
    tq = task_queue or f"components-{uuid.uuid4().hex[:6]}"
    settings = ComponentAutoscalerSettings(
        namespace=world.namespace, name=world.name, **{"scan_interval_s": SCAN_S, **kw}
    )
    async with running(new_worker(env.client, tq, activities=world.activities())):
        handle = await env.client.start_workflow(
            ComponentAutoscalerWorkflow.run,
            ComponentAutoscalerInput(settings=settings),
            id=f"{workflow_id(world.namespace, world.name)}-{uuid.uuid4().hex[:6]}",
            task_queue=tq,
        )
        try:
            yield handle
        finally:
            await handle.terminate()


def base_patches(world: ComponentsWorld) -> list[int]:
    return [r for cluster, comp, r in world.patches if cluster == world.base and comp == "tikv"]


async def test_homogeneous_scale_out_honours_the_scale_out_interval(env: WorkflowEnvironment) -> None:
    world = ComponentsWorld(spec=tikv_spec(), load={"tikv": 5.4})  # 5.4 of 6 cores: 0.9 > max 0.8
    async with autoscaler(env, world, iterations_per_run=3) as handle:
        await until(lambda: base_patches(world) == [6])  # 5.4 / 0.5 = 10.8 cores -> 6 instances
        world.load["tikv"] = 11.5  # still over max after the scale-out (11.5 / 12)
        await skip(env, 150)  # several scans, some continue-as-new, all inside the 300 s interval
        rep = await rounds_past(env, handle, 2)
        assert base_patches(world) == [6]
        assert rep.components["tikv"].deferred and rep.components["tikv"].deferred_until is not None
        await skip_until(env, lambda: len(base_patches(world)) == 2, 470)  # past 300 s since the first change
        assert base_patches(world)[1] == 12  # 11.5 / 0.5 = 23 cores -> 12 instances
        rep = await report(handle)
        assert rep.runs >= 1 and rep.counters.homogeneous_scale_outs == 2
        assert "ScaledOut" in world.reasons()
        # the status is written at the end of the round that patched, after the patch
        await until(lambda: world.last_status().get("tikv", {}).get("db", {}).get("currentReplicas") == 12)
        assert world.last_status()["tikv"]["db"]["lastAutoScalingTimestamp"]


async def test_invalid_component_is_reported_and_the_other_keeps_working(env: WorkflowEnvironment) -> None:
    spec = {
        "cluster": {"name": "db"},
        "tikv": {"rules": {"cpu": {"max_threshold": 0.3, "min_threshold": 0.6}}},
        "tidb": {"rules": {"cpu": dict(CPU_RULE)}},
    }
    world = ComponentsWorld(spec=spec, load={"tikv": 5.9, "tidb": 3.8})
    async with autoscaler(env, world) as handle:
        await until(lambda: ("db", "tidb", 4) in world.patches)
        await until(lambda: world.last_status().get("conditions", [{}])[0].get("status") == "False")
        cond = world.last_status()["conditions"][0]
        assert "spec.tikv.rules.cpu.min_threshold" in cond["message"] and cond["reason"] == "InvalidSpec"
        assert not [p for p in world.patches if p[1] == "tikv"]
        await skip(env, 90)
        await rounds_past(env, handle, 2)
        assert world.reasons().count("InvalidSpec") == 1  # reported once, not every round
        rep = await report(handle)
        assert rep.counters.invalid_specs_reported == 1 and rep.errors[0].field == "spec.tikv.rules.cpu.min_threshold"
        # Fixed by the user: the condition clears and TiKV scales.
        world.spec = {**spec, "tikv": {"rules": {"cpu": dict(CPU_RULE)}}}
        await skip_until(env, lambda: world.last_status()["conditions"][0]["status"] == "True", 340)
        await until(lambda: ("db", "tikv", 6) in world.patches)


async def test_metrics_failure_never_scales_in_or_deletes(env: WorkflowEnvironment) -> None:
    world = ComponentsWorld(spec=tikv_spec(), load={"tikv": 0.1}, metrics_down=True)
    async with autoscaler(env, world) as handle:
        # A standing group from an earlier run, found by its labels.
        world.autos["auto-x"] = _auto("auto-x", replicas=2)
        await skip(env, 2000)  # long past every interval
        rep = await rounds_past(env, handle, 2)
        assert world.patches == [] and world.deletes == [] and world.autos["auto-x"].replicas == 2
        assert rep.components["tikv"].metrics_error.startswith("MetricsUnavailable")
        assert world.reasons().count("MetricsUnavailable") == 1
        assert "auto-x" in rep.components["tikv"].groups  # adopted, kept
        # Metrics return, all cool: the group is scaled in one instance per interval.
        world.metrics_down = False
        await skip_until(env, lambda: world.autos["auto-x"].replicas == 1, 340)
        assert (await report(handle)).components["tikv"].metrics_error == ""


def _auto(name: str, replicas: int, cpu: float = 4.0):  # type: ignore[no-untyped-def]
    from tests.workflows.components.stubs import AutoCluster

    labels = {"group": "pd-auto-scaling-tikv-big", "resource-type": "big", "specialUse": "hotRegion"}
    return AutoCluster(
        name=name,
        uid=f"uid-{name}",
        component="tikv",
        group=labels["group"],
        replicas=replicas,
        pods=replicas,
        cpu=cpu,
        labels=labels,
        resource_type="big",
    )


async def test_hot_subset_creates_a_group_then_graceful_scale_in_deletes_it(env: WorkflowEnvironment) -> None:
    world = ComponentsWorld(spec=tikv_spec(), load={"tikv": 3.0}, hot={"tikv": (1, 0.95)})
    async with autoscaler(env, world) as handle:
        await until(lambda: len(world.autos) == 1)
        (name,) = world.autos
        assert name.startswith("auto-") and world.autos[name].replicas == 1
        assert world.base not in [p[0] for p in world.patches]  # the average was not over max
        # Load drops everywhere: one heterogeneous instance goes, only after the scale-in interval.
        world.hot, world.load["tikv"], world.hold_pods = {}, 0.2, True
        await skip(env, 400)
        await rounds_past(env, handle, 1)
        assert world.autos[name].replicas == 1  # 400 s < 500 s since the creation
        await skip_until(env, lambda: world.autos[name].replicas == 0, 420)
        await skip(env, 60)
        await rounds_past(env, handle, 2)
        assert name in world.autos and world.deletes == []  # pods still there: not deleted yet
        rep = await report(handle)
        assert rep.components["tikv"].groups[name].phase == "draining"
        world.release_pods()
        await skip_until(env, lambda: world.deletes == [name], 340)
        rep = await report(handle)
        assert name not in rep.components["tikv"].groups and rep.counters.groups_deleted == 1
        assert rep.counters.heterogeneous_created == [name] and rep.counters.scale_ins == 1
        assert {"GroupCreated", "ScaledIn", "GroupDeleted"} <= set(world.reasons())
        rep = await rounds_past(env, handle, 1)
        assert name not in rep.components["tikv"].timing.groups  # no state left for a deleted group
        assert rep.components["tikv"].timing.last_change_at is not None  # the component's stays


async def test_overrides_pause_pin_and_block_scale_in(env: WorkflowEnvironment) -> None:
    world = ComponentsWorld(spec=tikv_spec(), load={"tikv": 0.1})
    world.autos["auto-x"] = _auto("auto-x", replicas=2)
    async with autoscaler(env, world) as handle:
        await until(lambda: world.autos["auto-x"].replicas == 1)  # all cool: one instance goes
        await execute_update(handle, ComponentAutoscalerWorkflow.block_scale_in, BlockScaleInRequest(component="tikv"))
        await skip(env, 600)
        rep = await rounds_past(env, handle, 2)
        assert world.autos["auto-x"].replicas == 1 and any("blocked" in n for n in rep.components["tikv"].notes)
        with pytest.raises(WorkflowUpdateFailedError):
            await execute_update(
                handle, ComponentAutoscalerWorkflow.block_scale_in, BlockScaleInRequest(component="pd")
            )
        with pytest.raises(WorkflowUpdateFailedError):
            await execute_update(
                handle,
                ComponentAutoscalerWorkflow.pin_replicas,
                PinRequest(component="tikv", cluster="auto-nope", replicas=1),
            )
        with pytest.raises(WorkflowUpdateFailedError):
            await execute_update(
                handle, ComponentAutoscalerWorkflow.pin_replicas, PinRequest(component="tikv", replicas=-1)
            )
        pins = await execute_update(
            handle, ComponentAutoscalerWorkflow.pin_replicas, PinRequest(component="tikv", replicas=5)
        )
        assert pins == {"tikv/db": 5}
        await until(lambda: world.replicas["tikv"] == 5)
        await execute_update(handle, ComponentAutoscalerWorkflow.pause)
        world.load["tikv"] = 50.0
        await skip(env, 900)
        await rounds_past(env, handle, 2)
        assert world.replicas["tikv"] == 5 and (await report(handle)).paused
        await execute_update(handle, ComponentAutoscalerWorkflow.pin_replicas, PinRequest(component="tikv"))
        await execute_update(handle, ComponentAutoscalerWorkflow.resume)
        await until(lambda: world.replicas["tikv"] > 5)


async def test_pd_null_plans_nothing_and_pd_plans_are_the_full_group_set(env: WorkflowEnvironment) -> None:
    from scaling.components.contracts import PdPlan

    world = ComponentsWorld(spec=tikv_spec(), pd_plans=None)
    world.autos["auto-x"] = _auto("auto-x", replicas=2)
    async with autoscaler(env, world, planner="pd") as handle:
        await skip(env, 1000)
        await rounds_past(env, handle, 2)
        assert world.patches == [] and world.autos["auto-x"].replicas == 2  # null is not "no groups"
        # A plan for the other component only (PD within thresholds for tikv): tikv's groups stay.
        world.pd_plans = [PdPlan(component="tidb", count=1, resource_type="big", labels={"group": "g"})]
        await skip(env, 1000)
        await rounds_past(env, handle, 2)
        assert world.patches == [] and world.autos["auto-x"].replicas == 2
        # PD's plan for auto-x's own group, with the labels released PD gives a standing group
        # ({group, resource-type}: not the ones auto-x was named from). tidb-operator's syncPlans
        # matches plans to TidbClusters by the autoscaling-group label: auto-x goes to 1 itself.
        labels = {"group": "pd-auto-scaling-tikv-big", "resource-type": "big"}
        world.pd_plans = [PdPlan(component="tikv", count=1, resource_type="big", labels=labels)]
        await skip_until(env, lambda: world.autos["auto-x"].replicas == 1, 600)
        assert len(world.autos) == 1
        # A plan for another group only: that group is created, auto-x (not in the plan) drained.
        other = {"group": "pd-auto-scaling-tikv-other", "resource-type": "big"}
        world.pd_plans = [PdPlan(component="tikv", count=1, resource_type="big", labels=other)]
        await skip_until(env, lambda: len(world.autos) == 2, 300)
        await skip_until(env, lambda: world.autos["auto-x"].replicas == 0, 600)


async def test_external_recommendation_capped_at_max_replicas(env: WorkflowEnvironment) -> None:
    spec = {
        "cluster": {"name": "db"},
        "tidb": {"external": {"endpoint": {"host": "rec", "port": 8080}, "maxReplicas": 4}},
    }
    world = ComponentsWorld(spec=spec, recommended=9)
    async with autoscaler(env, world):
        await until(lambda: len(world.autos) == 1)
        (auto,) = world.autos.values()
        # tidb-operator's syncExternal: min(9, maxReplicas 4) is the external group's own count
        assert auto.component == "tidb" and auto.replicas == 4
        assert auto.labels == {}


async def test_autoscaler_deleted_ends_the_workflow_and_leaves_groups(env: WorkflowEnvironment) -> None:
    world = ComponentsWorld(spec=tikv_spec(), load={"tikv": 1.0})
    world.autos["auto-x"] = _auto("auto-x", replicas=1)
    tq = f"components-{uuid.uuid4().hex[:6]}"
    settings = ComponentAutoscalerSettings(namespace="ns", name="tas", scan_interval_s=30)
    async with new_worker(env.client, tq, activities=world.activities()):
        handle = await env.client.start_workflow(
            ComponentAutoscalerWorkflow.run,
            ComponentAutoscalerInput(settings=settings),
            id=f"components/ns/tas-{uuid.uuid4().hex[:6]}",
            task_queue=tq,
        )
        await until(lambda: bool(world.statuses))
        world.found = False
        assert await handle.result() == "ns/tas deleted"
        assert "auto-x" in world.autos and world.deletes == []


async def test_history_replays_deterministically(env: WorkflowEnvironment) -> None:

    world = ComponentsWorld(spec=tikv_spec(), load={"tikv": 3.0}, hot={"tikv": (1, 0.95)})
    async with autoscaler(env, world) as handle:
        await until(lambda: len(world.autos) == 1)
        world.hot, world.load["tikv"] = {}, 0.2
        await skip_until(env, lambda: world.deletes != [], 900)
        await execute_update(handle, ComponentAutoscalerWorkflow.pin_replicas, PinRequest(component="tikv", replicas=4))
        await until(lambda: world.replicas["tikv"] == 4)
        history = await handle.fetch_history()
    await new_replayer(WORKFLOWS).replay_workflow(history)


async def test_an_update_during_a_round_starts_the_next_round_at_once(env: WorkflowEnvironment) -> None:
    """An operator's change while a round runs asks for a round after it: the next one starts as
    that round ends, not a scan (an hour here) later. The wake was reset after the round, so one
    that came during it was forgotten (patch wake-kept-during-round)."""
    world = ComponentsWorld(spec=tikv_spec(), load={"tikv": 5.4}, hold=asyncio.Event())
    async with autoscaler(env, world, scan_interval_s=3600) as handle:
        # The first round scales TiKV out; its replicas write is held, so the round is still on.
        await until(lambda: world.held, what="the replicas write (held)")
        blocked = await execute_update(handle, "block_scale_in", BlockScaleInRequest(component="tikv"))
        assert blocked == ["tikv"] and world.patches == [] and world.statuses == []  # during the round
        world.hold.set()
        await until(lambda: _rounds(handle, 2), what="a second round at once")
        assert world.patches == [("db", "tikv", 6)]
        history = await handle.fetch_history()
    # The second round began right after the first's reports (local activities): its clock is
    # the update's time, which replays the same.
    await new_replayer(WORKFLOWS).replay_workflow(history)


async def _rounds(handle: WorkflowHandle, n: int) -> bool:
    return (await report(handle)).rounds >= n
