"""The NodeAutoscaler's scale-down half, driven through its loop: real time with short timers,
watched through the status query, so on the dev server (the time-skipping server stalled such
tests under CPU load). The NodeScaleDown workflow's own timers are tested in
test_node_scale_down.py with time skipping."""

from __future__ import annotations

import asyncio
import json
import uuid

import pytest
from temporalio.client import WorkflowHandle, WorkflowUpdateFailedError, WorkflowUpdateStage
from temporalio.testing import WorkflowEnvironment

from activities.updates import execute_update
from scaling.kube.models import NodeInfo
from scaling.nodes.contracts import ClusterObservation, OrphanObservation, ScaleDownObservation
from scaling.nodes.models import NodeGroup, PoolSpec
from scaling.nodes.scale_down.removals import NodeScaleDownInput, ScaleDownPhase
from scaling.nodes.scale_down.storage import LonghornReplica, LonghornState, LonghornVolume
from tests.polling import until
from tests.workflows.nodes.test_node_scale_down import (  # noqa: F401 (worker is a fixture)
    GROUP,
    DownWorld,
    app_pod,
    node,
    observed,
    start_autoscaler,
    worker,
)
from tests.workflows.replayer import new_replayer
from workflows.all import WORKFLOWS
from workflows.nodes.autoscaler import NodeAutoscalerWorkflow


@pytest.fixture(scope="module")
def env(dev_env: WorkflowEnvironment) -> WorkflowEnvironment:
    return dev_env


async def test_autoscaler_removes_empty_nodes_down_to_the_pool_minimum(env: WorkflowEnvironment, worker) -> None:  # noqa: ANN001
    group = NodeGroup(
        name="g",
        pools=[PoolSpec(provider="kwok", serverType=["cx22"], priority=10, minNodes=1)],
        scaleDown={"unneeded_time_s": 3},
    )
    world = DownWorld()
    nodes = [node("a"), node("b"), node("c"), node("static", managed=False)]
    world.observation = ClusterObservation(nodes=nodes, groups=[group])
    world.down_obs = ScaleDownObservation(nodes=nodes, pods=[app_pod("web-1", "c")], groups=[group])
    tq, handles = await worker(world)
    h = await start_autoscaler(env, world, handles, tq)
    handles.extend(env.client.get_workflow_handle(f"{h.id}/scale-down/{n}") for n in ("a", "b", "c"))

    async def removed():  # noqa: ANN202
        s = await h.query(NodeAutoscalerWorkflow.status)
        return s if s.scale_down_by_phase.get("Removed", 0) >= 2 else None

    try:
        status = await until(removed, timeout=60)
    except AssertionError:
        print((await h.query(NodeAutoscalerWorkflow.status)).model_dump_json(indent=1)[:4000])
        raise
    assert sorted(world.deleted) == ["a", "b"]
    # c runs a pod: with a and b leaving it is the pool's last node (minNodes 1), never removed.
    c = next(x for x in status.candidates if x.node == "c")
    assert c.state in ("Utilized", "Blocked", "UnneededWaiting")
    assert "static" not in {x.node for x in status.candidates}
    assert sum(status.candidates_by_state.values()) == 3  # growth's nodes only
    # The loop evaluated beside the cluster: no observation of every node and pod in its history.
    assert await scheduled(h, "evaluate_scale_down") >= 1
    assert await scheduled(h, "observe_scale_down") == 0


async def test_autoscaler_overrides_protect_and_refuse_data_loss(env: WorkflowEnvironment, worker) -> None:  # noqa: ANN001
    world = DownWorld()
    nodes = [node("a"), node("b"), node("c")]
    world.down_obs = ScaleDownObservation(
        storage=LonghornState(
            volumes=[LonghornVolume(name="vol", state="attached", node="b")],
            replicas=[LonghornReplica(name="r1", volume="vol", node="b", healthy=True)],
        )
    )
    observed(world, nodes, [app_pod("web-1", "a"), app_pod("web-2", "b"), app_pod("web-3", "c")])
    tq, handles = await worker(world)
    # Long timers: nothing is removed by the loop during this test; only the operator acts.
    h = await start_autoscaler(env, world, handles, tq, pdb_retry_s=10)
    handles.extend(env.client.get_workflow_handle(f"{h.id}/scale-down/{n}") for n in ("a", "b", "c"))
    await until(lambda: _status_has(h, lambda s: len(s.candidates) == 3))

    with pytest.raises(WorkflowUpdateFailedError) as err:
        await execute_update(h, NodeAutoscalerWorkflow.remove_node, "b")
    assert "LonghornVolumeAttached" in str(err.value.cause) or "volume vol attached" in str(err.value.cause)
    with pytest.raises(WorkflowUpdateFailedError):
        await execute_update(h, NodeAutoscalerWorkflow.unprotect_node, "a")  # not protected: validator refuses

    assert await execute_update(h, NodeAutoscalerWorkflow.protect_node, "c") == ["c"]
    status = await until(
        lambda: _status_has(h, lambda s: any(x.node == "c" and x.reason == "ProtectedByOperator" for x in s.candidates))
    )
    assert status.protected_nodes == ["c"]
    assert await execute_update(h, NodeAutoscalerWorkflow.unprotect_node, "c") == []

    wid = await execute_update(h, NodeAutoscalerWorkflow.remove_node, "a")
    assert wid.endswith("/scale-down/a")
    await until(lambda: _status_has(h, lambda s: s.scale_down_by_phase.get("Removed", 0) == 1), timeout=60)
    assert world.deleted == ["a"] and ("evict", "default/web-1") in world.calls


async def _status_has(h: WorkflowHandle, check):  # noqa: ANN001, ANN202
    s = await h.query(NodeAutoscalerWorkflow.status)
    return s if check(s) else None


async def waiting_on_a(env: WorkflowEnvironment, worker, **settings):  # noqa: ANN001, ANN003, ANN201
    """Empty a and busy b in a group whose timer (5 min) never fires during a test: the loop's
    removal of a waits on it. The world, the loop's handle, the group and b's pods (``settings``: the
    loop's)."""
    group = NodeGroup(
        name="g",
        pools=[PoolSpec(provider="kwok", serverType=["cx22"], priority=10)],
        scaleDown={"unneeded_time_s": 300},
    )
    world = DownWorld()
    nodes = [node("a"), node("b")]
    busy = [app_pod("web-1", "b")]
    world.observation = ClusterObservation(nodes=nodes, groups=[group])
    world.down_obs = ScaleDownObservation(nodes=nodes, pods=busy, groups=[group])
    tq, handles = await worker(world)
    h = await start_autoscaler(env, world, handles, tq, **settings)
    handles.append(env.client.get_workflow_handle(f"{h.id}/scale-down/a"))
    return world, h, group, busy


async def test_cancelled_wait_is_re_armed_when_the_node_empties_again(env: WorkflowEnvironment, worker) -> None:  # noqa: ANN001
    world, h, group, busy = await waiting_on_a(env, worker)
    nodes = [node("a"), node("b")]

    armed = await until(lambda: _status_has(h, lambda s: _waiting(s, "a")))
    first_at = _waiting(armed, "a").scale_down_at
    # The loop records the wait as it starts the child; the child then marks the node.
    await until(_async(lambda: ("soft-mark", "a") in world.calls))
    # A pod lands on a during the wait: the removal is cancelled and the node unmarked.
    world.down_obs = ScaleDownObservation(nodes=nodes, pods=[*busy, app_pod("web-2", "a")], groups=[group])
    cancelled = await until(
        lambda: _status_has(h, lambda s: s.scale_down_by_phase.get("Cancelled") == 1 and not _waiting(s, "a"))
    )
    assert any(c[0].startswith("unmark") and c[1] == "a" for c in world.calls)
    assert [r.node for r in cancelled.recent_scale_downs if r.phase.value == "Cancelled"] == ["a"]
    # It empties again: a new wait is armed, with a later ScaleDownAt.
    world.down_obs = ScaleDownObservation(nodes=nodes, pods=busy, groups=[group])
    again = await until(lambda: _status_has(h, lambda s: _waiting(s, "a")))
    assert _waiting(again, "a").scale_down_at > first_at
    # The loop records the new wait as it starts the child; the child then marks the node.
    await until(_async(lambda: world.calls.count(("soft-mark", "a")) == 2))
    assert [sd.node for sd in again.scale_downs] == ["a"]  # the busy node is never marked


async def test_a_waiting_removal_whose_node_is_gone_ends_at_once(env: WorkflowEnvironment, worker) -> None:  # noqa: ANN001
    """a is empty and waits on its timer (5 min); another command deletes it meanwhile (the
    consolidation bench: a successor its NodeReplacement deleted unused). The removal ends now as
    NodeGone, not at its timer (an unready node's waits 20 min: the bench never settled)."""
    world, h, group, busy = await waiting_on_a(env, worker)
    await until(lambda: _status_has(h, lambda s: _waiting(s, "a")))
    await until(_async(lambda: ("soft-mark", "a") in world.calls))
    world.down_obs = ScaleDownObservation(nodes=[node("b")], pods=busy, groups=[group])
    ended = await until(lambda: _status_has(h, lambda s: s.scale_down_by_phase.get("Cancelled") == 1), timeout=30)
    (gone,) = [r for r in ended.recent_scale_downs if r.node == "a"]
    assert (gone.phase.value, gone.reason) == ("Cancelled", "NodeGone") and not ended.scale_downs
    assert world.deleted == []


async def test_a_removal_terminated_from_outside_lets_its_node_go(env: WorkflowEnvironment, worker) -> None:  # noqa: ANN001
    """a waits on its timer; an operator terminates its NodeScaleDown (the Web UI, the CLI), which says
    nothing more to the loop. The loop's periodic look at the removals it holds finds the workflow closed
    and lets a go as a failed removal, unmarked and uncordoned: held for good before, it kept its group's
    budget slot and was never evaluated again. The node is empty still, so a new removal is armed."""
    from scaling.nodes.state import REMOVAL_ENDED_UNHEARD

    world, h, _, _ = await waiting_on_a(env, worker, scan_interval_s=0.3)  # the look comes every 10 loops
    first = await until(lambda: _status_has(h, lambda s: _waiting(s, "a")))
    await until(_async(lambda: ("soft-mark", "a") in world.calls))
    await env.client.get_workflow_handle(f"{h.id}/scale-down/a").terminate("an operator stops it")
    ended = await until(
        lambda: _status_has(h, lambda s: any(r.reason == REMOVAL_ENDED_UNHEARD for r in s.recent_scale_downs)),
        timeout=60,
    )
    (gone,) = [r for r in ended.recent_scale_downs if r.node == "a"]
    assert gone.phase.value == "Failed" and "ended without a final report" in gone.message
    # The loop records the end, then unmarks (best effort): a query may see the one before the other.
    await until(_async(lambda: ("unmark+uncordon", "a") in world.calls))
    again = await until(lambda: _status_has(h, lambda s: _waiting(s, "a")), timeout=60)
    assert _waiting(again, "a").scale_down_at > _waiting(first, "a").scale_down_at  # a new removal, armed anew


def _waiting(status, node_name: str):  # noqa: ANN001, ANN202
    """The node's scale-down, if one is waiting on its timer."""
    return next((sd for sd in status.scale_downs if sd.node == node_name and sd.phase.value == "Marked"), None)


def _async(check):  # noqa: ANN001, ANN202
    async def probe():  # noqa: ANN202
        return check()

    return probe


async def test_no_scale_down_while_pending_pods_are_about_to_land(env: WorkflowEnvironment, worker) -> None:  # noqa: ANN001
    """A just-Ready node is empty until the scheduler binds the pods it was made for: it must not
    be marked (tainted) meanwhile, or those pods are stranded and another node is made."""
    group = NodeGroup(
        name="g",
        pools=[PoolSpec(provider="kwok", serverType=["cx22"], priority=10)],
        scaleDown={"unneeded_time_s": 300, "delay_after_add_s": 0},
    )
    world = DownWorld()
    nodes = [node("fresh")]
    pending = app_pod("web-1", "").model_copy(update={"node_name": None, "phase": "Pending", "unschedulable": True})
    world.observation = ClusterObservation(nodes=nodes, groups=[group], unschedulable=[pending])
    world.down_obs = ScaleDownObservation(nodes=nodes, pods=[pending], groups=[group])
    tq, handles = await worker(world)
    h = await start_autoscaler(env, world, handles, tq)
    handles.append(env.client.get_workflow_handle(f"{h.id}/scale-down/fresh"))
    settled = await until(lambda: _status_has(h, lambda s: s.iterations >= 4))
    assert settled.last_loop.fits_existing == 1 and settled.last_loop.planned_nodes == 0
    assert not any(n == "fresh" for _, n in world.calls) and not settled.scale_downs
    # Once nothing waits to land, the empty node is marked as usual.
    world.observation = ClusterObservation(nodes=nodes, groups=[group])
    world.down_obs = ScaleDownObservation(nodes=nodes, pods=[], groups=[group])
    await until(_async(lambda: ("soft-mark", "fresh") in world.calls))


async def test_remove_node_waits_for_the_loops_scale_down_step(env: WorkflowEnvironment, worker) -> None:  # noqa: ANN001
    """The update and the loop's step both read and change the removals: the update's own
    observation is not even scheduled while the loop's step is under way (the lock)."""
    world = DownWorld(observe_gate=asyncio.Event())
    observed(world, [node("a"), node("b")], [app_pod("web-1", "a"), app_pod("web-2", "b")])
    tq, handles = await worker(world)
    h = await start_autoscaler(env, world, handles, tq)
    handles.extend(env.client.get_workflow_handle(f"{h.id}/scale-down/{n}") for n in ("a", "b"))
    await until(lambda: _true(world.observing == 1))  # the loop's step is evaluating, held
    update = await h.start_update(NodeAutoscalerWorkflow.remove_node, "a", wait_for_stage=WorkflowUpdateStage.ACCEPTED)
    # The task that accepted the update has completed: without the lock it would have scheduled
    # the update's check_node_removal beside the loop's evaluate_scale_down.
    assert await scheduled(h, "evaluate_scale_down") == 1
    assert await scheduled(h, "check_node_removal") == 0
    world.observe_gate.set()
    assert await update.result() == f"{h.id}/scale-down/a"
    assert await scheduled(h, "check_node_removal") >= 1


async def _true(value: bool) -> bool:
    return value


async def scheduled(h: WorkflowHandle, activity_type: str) -> int:
    events = [e async for e in h.fetch_history_events() if e.HasField("activity_task_scheduled_event_attributes")]
    return sum(1 for e in events if e.activity_task_scheduled_event_attributes.activity_type.name == activity_type)


async def test_an_idle_loop_keeps_its_candidates_without_receiving_them_again(env: WorkflowEnvironment, worker) -> None:  # noqa: ANN001
    group = NodeGroup(
        name="g",
        pools=[PoolSpec(provider="kwok", serverType=["cx22"], priority=10)],
        scaleDown={"unneeded_time_s": 300},
    )  # nothing is removed during the test
    world = DownWorld()
    nodes = [node("a"), node("b")]
    world.observation = ClusterObservation(nodes=nodes, groups=[group])
    world.down_obs = ScaleDownObservation(nodes=nodes, pods=[app_pod("web-1", "b")], groups=[group])
    tq, handles = await worker(world)
    h = await start_autoscaler(env, world, handles, tq)
    await until(lambda: _evaluations(h, unchanged=True, at_least=3), timeout=60)
    status = await h.query(NodeAutoscalerWorkflow.status)
    # Sent once, then named by digest: the status still shows both nodes.
    assert sorted(c.node for c in status.candidates) == ["a", "b"]
    assert sum(status.candidates_by_state.values()) == 2
    assert await _evaluations(h, unchanged=False, at_least=1)


async def test_an_unchanged_cluster_is_not_evaluated_again_until_a_timer_runs_out(
    env: WorkflowEnvironment,
    worker,  # noqa: ANN001
) -> None:
    """While the observation shows the cluster as the last evaluation read it (the same view) and
    the loop's state is the same, the loop skips the evaluation until its first timer: the
    underused node is still removed once its unneeded time is over, and a change is evaluated."""
    group = NodeGroup(
        name="g", pools=[PoolSpec(provider="kwok", serverType=["cx22"], priority=10)], scaleDown={"unneeded_time_s": 6}
    )
    world = DownWorld()
    nodes = [node("a"), node("b")]
    busy = [app_pod(f"web-{i}", "a") for i in range(12)]  # 60 % of a: utilized, with room for b's pod
    world.observation = ClusterObservation(nodes=nodes, groups=[group], scale_down_view="v1")
    world.down_obs = ScaleDownObservation(nodes=nodes, pods=[*busy, app_pod("lone", "b")], groups=[group])
    tq, handles = await worker(world)
    h = await start_autoscaler(env, world, handles, tq)
    handles.append(env.client.get_workflow_handle(f"{h.id}/scale-down/b"))

    def removing() -> bool:
        return any(ev.to_remove for ev in world.evaluations)

    await until(lambda: asyncio.sleep(0, removing()), timeout=60)
    waited = [ev for ev in world.evaluations if not ev.to_remove]
    # The timer starts, the next loop sees it running; then nothing until it runs out (6 s of
    # 1 s loops). A loop on a busy machine may come late, so "few", not an exact count.
    assert waited[0].unneeded_started == ["b"] and len(waited) <= 3, [e.unneeded_started for e in waited]
    assert world.observe_calls >= len(world.evaluations) + 3
    assert [t.name for t in world.evaluations[-1].to_remove] == ["b"]
    # The cluster changes (another view): evaluated at the next loop.
    count = len(world.evaluations)
    world.observation = world.observation.model_copy(update={"scale_down_view": "v2"})
    await until(lambda: asyncio.sleep(0, len(world.evaluations) > count), timeout=30)


async def test_orphans_are_found_beside_the_cluster(env: WorkflowEnvironment, worker) -> None:  # noqa: ANN001
    """The loop's orphan check sends its orphans so far and gets orphans back: every node and
    machine stays in the worker (they made a 50 KB event every ten loops at 330 nodes)."""
    world = DownWorld()
    nodes = [node("a"), node("b")]
    world.observation = ClusterObservation(nodes=nodes, groups=[GROUP])
    world.down_obs = ScaleDownObservation(nodes=nodes, pods=[app_pod("web-1", "a"), app_pod("web-2", "b")])
    world.machines = OrphanObservation(
        nodes={"a": "kwok://a", "b": "kwok://b"},
        machines=[
            {"provider": "kwok", "provider_id": f"kwok://{m}", "name": m} for m in ("a", "b", "lost-1", "lost-2")
        ],
        checked=["kwok"],
    )
    tq, handles = await worker(world)
    h = await start_autoscaler(env, world, handles, tq, orphan_grace_s=0)

    async def reported():  # noqa: ANN202
        s = await h.query(NodeAutoscalerWorkflow.status)
        return s.orphans or None

    orphans = await until(reported, timeout=60)
    assert [(o.kind, o.name, o.reported) for o in orphans] == [
        ("MachineWithoutNode", "lost-1", True),
        ("MachineWithoutNode", "lost-2", True),
    ]
    assert await scheduled(h, "find_orphans") >= 1 and await scheduled(h, "observe_orphans") == 0
    async for e in h.fetch_history_events():  # no node or machine list crossed the history
        if e.HasField("activity_task_completed_event_attributes"):
            assert b"kwok://a" not in e.activity_task_completed_event_attributes.result.payloads[0].data


async def _evaluations(h: WorkflowHandle, unchanged: bool, at_least: int) -> bool:
    """Whether at least `at_least` evaluate_scale_down results said (or did not say) that the
    candidates were unchanged."""
    names: dict[int, str] = {}
    found = 0
    async for e in h.fetch_history_events():
        if e.HasField("activity_task_scheduled_event_attributes"):
            names[e.event_id] = e.activity_task_scheduled_event_attributes.activity_type.name
        elif e.HasField("activity_task_completed_event_attributes"):
            attrs = e.activity_task_completed_event_attributes
            if names.get(attrs.scheduled_event_id) == "evaluate_scale_down":
                result = json.loads(attrs.result.payloads[0].data)
                found += bool(result.get("candidates_unchanged")) == unchanged
    return found >= at_least


def drifted_a() -> tuple[NodeGroup, NodeInfo]:
    """GROUP with a new image (budget: one node at a time), and node a, made from the old one: Drifted."""
    from scaling.nodes.disruption.drift import LABEL_POOL_HASH, pool_hash
    from scaling.nodes.disruption.models import Budget, Disruption
    from scaling.nodes.nodegroups import flatten_pools

    old = GROUP.model_copy(update={"pools": [GROUP.pools[0].model_copy(update={"config": {"image": "old"}})]})
    new = old.model_copy(
        update={
            "pools": [GROUP.pools[0].model_copy(update={"config": {"image": "new"}})],
            "disruption": Disruption(budgets=[Budget(nodes="1")]),
        }
    )
    made_old = {LABEL_POOL_HASH: pool_hash(old.labels, old.taints, flatten_pools(old)[0])}
    return new, node("a").model_copy(update={"labels": {**node("a").labels, **made_old}})


async def test_a_drifted_node_is_replaced_successor_first_within_its_budget(env: WorkflowEnvironment, worker) -> None:  # noqa: ANN001, F811
    """The loop selects a node made from an earlier spec, starts its NodeReplacement, follows it as a
    removal (in flight for the budgets), and the node goes only after its successor was made."""
    from scaling.nodes.disruption.drift import LABEL_REPLACES
    from tests.workflows.nodes.test_node_replacement import ReplaceWorld, busy

    new, a = drifted_a()
    pods = busy("a")
    world = ReplaceWorld(
        plan_obs=ScaleDownObservation(nodes=[a], pods=pods, groups=[new]),
        down_obs=ScaleDownObservation(nodes=[a], pods=pods, groups=[new]),  # the successor joins when made
    )
    world.observation = ClusterObservation(nodes=[a], groups=[new])
    tq, handles = await worker(world)
    h = await start_autoscaler(env, world, handles, tq)
    handles.extend(env.client.get_workflow_handle(f"{h.id}/{k}/a") for k in ("replace", "scale-down"))

    async def removed():  # noqa: ANN202
        s = await h.query(NodeAutoscalerWorkflow.status)
        return s if s.scale_down_by_phase.get("Removed", 0) >= 1 else None

    try:
        status = await until(removed, timeout=90)
    except AssertionError:
        print((await h.query(NodeAutoscalerWorkflow.status)).model_dump_json(indent=1)[:4000])
        raise
    assert world.deleted == ["a"] and [c.labels[LABEL_REPLACES] for c in world.created] == ["a"]
    # planned, tainted karpenter.sh/disrupted before the successor's create, and marked once it was Ready
    assert [c for c, n in world.calls if n == "a"][:3] == ["plan", "disrupted", "mark"]
    assert world.calls.index(("disrupted", "a")) < world.calls.index(("create", world.created[0].request_id))
    assert status.recent_scale_downs[-1].kind == "Drifted"


async def replacing_drifted_a(env: WorkflowEnvironment, worker, cpu: int = 1800, **settings):  # noqa: ANN001, ANN003, ANN201
    """The loop replacing drifted a (its pod of ``cpu`` millicores) with a cx22 successor made and held
    joining: the world, the loop's handle, the handles, the group and a (``settings``: the loop's)."""
    from tests.workflows.nodes.test_node_replacement import ReplaceWorld, busy

    new, a = drifted_a()
    pods = busy("a", cpu=cpu)
    world = ReplaceWorld(
        plan_obs=ScaleDownObservation(nodes=[a], pods=pods, groups=[new]),
        down_obs=ScaleDownObservation(nodes=[a], pods=pods, groups=[new]),
        hold_readiness=True,
    )
    world.observation = ClusterObservation(nodes=[a], groups=[new])
    tq, handles = await worker(world)
    h = await start_autoscaler(env, world, handles, tq, **settings)
    handles.extend(env.client.get_workflow_handle(f"{h.id}/{k}/a") for k in ("replace", "scale-down"))
    await until(lambda: len(world.created) == 1)  # the successor, held joining
    return world, h, handles, new, a


async def test_a_pod_pending_while_a_successor_is_made_takes_its_spare_room(env: WorkflowEnvironment, worker) -> None:  # noqa: ANN001, F811
    """While a NodeReplacement makes its successor, the loop's planner counts the successor's spare room
    (its room less the pods it is made for) for pending pods, as Karpenter nominates pending pods to an
    in-flight NodeClaim: a pod that fits it buys no node, one that does not fit buys one."""
    from scaling.kube.drain import TAINT_DISRUPTED
    from scaling.kube.models import Taint
    from tests.workflows.nodes.test_node_autoscaler import pod

    # the cx22 successor (1,930 m) keeps 930 m spare
    world, h, _, new, a = await replacing_drifted_a(env, worker, cpu=1000)
    iterations = (await h.query(NodeAutoscalerWorkflow.status)).iterations
    a = a.model_copy(update={"taints": [Taint(key=TAINT_DISRUPTED, effect="NoSchedule")]})  # no pod lands on it
    world.observation = ClusterObservation(nodes=[a], groups=[new], unschedulable=[pod(1, cpu_m=800)])

    async def planned():  # noqa: ANN202
        s = await h.query(NodeAutoscalerWorkflow.status)
        return s if s.iterations >= iterations + 3 and s.last_loop.unschedulable == 1 else None

    status = await until(planned, timeout=60)
    assert status.last_loop.covered_in_flight == 1 and status.last_loop.planned_nodes == 0
    assert len(world.created) == 1 and not status.in_flight  # no node bought for it
    world.observation = ClusterObservation(
        nodes=[a], groups=[new], unschedulable=[pod(1, cpu_m=800), pod(2, cpu_m=800)]
    )
    await until(lambda: len(world.created) == 2)  # the second does not fit the spare room: a node of its own
    status = await h.query(NodeAutoscalerWorkflow.status)
    assert [sum(r.pods.values()) for r in status.in_flight] == [1]  # one of the two: the other has the room
    world.observation = ClusterObservation(nodes=[a], groups=[new])
    world.hold_readiness = False
    await until(lambda: world.deleted == ["a"], timeout=60)


async def test_a_replacement_terminated_while_its_successor_is_made_lets_its_node_go(
    env: WorkflowEnvironment, worker
) -> None:  # noqa: ANN001, F811
    """Drifted a's NodeReplacement is terminated while its successor is held joining: it says nothing
    more to the loop. The loop lets a go (RemovalEndedUnheard), the successor's room with it; the
    successor, Ready and empty, is then removed as any empty node, within the group's budget."""
    from scaling.nodes.state import REMOVAL_ENDED_UNHEARD

    world, h, handles, _, _ = await replacing_drifted_a(env, worker, scan_interval_s=0.3)  # looks every 10 loops
    await env.client.get_workflow_handle(f"{h.id}/replace/a").terminate("an operator stops it")
    ended = await until(
        lambda: _status_has(h, lambda s: any(r.reason == REMOVAL_ENDED_UNHEARD for r in s.recent_scale_downs)),
        timeout=60,
    )
    (gone,) = [r for r in ended.recent_scale_downs if r.node == "a"]
    assert gone.phase.value == "Failed" and not gone.successors
    await until(_async(lambda: ("unmark+uncordon", "a") in world.calls))  # after the end is recorded
    # The successor the terminated run made is an empty node like any other: removed as Empty, and
    # that removal is the budget's one disruption, so a waits for it.
    successor = world.made[(world.created[0].request_id, 0)]
    handles.append(env.client.get_workflow_handle(f"{h.id}/scale-down/{successor}"))
    await until(_async(lambda: ("soft-mark", successor) in world.calls), timeout=60)
    blocked = await until(
        lambda: _status_has(
            h, lambda s: any(c.node == "a" and c.reason == "DisruptionBudgetExhausted" for c in s.candidates)
        ),
        timeout=60,
    )
    assert [sd.node for sd in blocked.scale_downs] == [successor] and len(world.created) == 1


async def test_three_utilized_nodes_are_consolidated_into_one_by_the_loop(env: WorkflowEnvironment, worker) -> None:  # noqa: ANN001, F811
    """Multi-node consolidation through the loop: three cpx31 at 51 % (utilized: Cluster Autoscaler keeps
    them, and no pod fits another node) become one cx42 (0.0273/h against 3 x 0.0228/h). The loop hands
    them to one NodeReplacement, which makes the cx42 Ready, then drains and deletes the three together."""
    g = cx42_over_cpx31()
    names = ("a", "b", "c")
    world = half_full_cpx31(names, g)
    tq, handles = await worker(world)
    h = await start_autoscaler(env, world, handles, tq)
    handles.append(env.client.get_workflow_handle(f"{h.id}/replace/a"))
    handles.extend(env.client.get_workflow_handle(f"{h.id}/scale-down/{n}") for n in names)

    async def removed():  # noqa: ANN202
        s = await h.query(NodeAutoscalerWorkflow.status)
        return s if s.scale_down_by_phase.get("Removed", 0) >= 3 else None

    try:
        status = await until(removed, timeout=90)
    except AssertionError:
        print((await h.query(NodeAutoscalerWorkflow.status)).model_dump_json(indent=1)[:4000])
        raise
    assert sorted(world.deleted[:3]) == ["a", "b", "c"]  # drained together: in no fixed order
    assert [c.pool.server_type for c in world.created] == ["cx42"]
    assert [p.nodes for p in world.plans] == [["a", "b", "c"]]  # one command, planned once
    assert {r.node for r in status.recent_scale_downs if r.phase.value == "Removed"} >= set(names)


async def test_a_consolidation_not_worth_it_is_not_proposed_again_while_nothing_changed(
    env: WorkflowEnvironment,
    worker,  # noqa: ANN001, F811
) -> None:
    """Two cpx31 at 51 % in a group of cpx31 only: no successor holds both, and one of their own type
    saves nothing, so the command ends ConsolidationNotWorthIt. Their consolidateAfter is 1 s: before
    refusals were remembered the loop planned the same command again every few seconds."""
    from scaling.nodes.disruption.models import ConsolidationPolicy
    from scaling.nodes.disruption.refusals import NOT_WORTH_IT
    from scaling.nodes.models import ScaleDownSettings

    g = NodeGroup(
        name="g",
        pools=[PoolSpec(provider="kwok", serverType=["cpx31"], priority=10)],
        scaleDown=ScaleDownSettings(policy=ConsolidationPolicy.WHEN_EMPTY_OR_UNDERUTILIZED, unneeded_time_s=1),
    )
    world = half_full_cpx31(("a", "b"), g)
    tq, handles = await worker(world)
    h = await start_autoscaler(env, world, handles, tq)
    handles.append(env.client.get_workflow_handle(f"{h.id}/replace/a"))

    async def held(after: int = 0):  # noqa: ANN202
        s = await h.query(NodeAutoscalerWorkflow.status)
        a = next((c for c in s.candidates if c.node == "a"), None)
        return s if a is not None and a.reason == NOT_WORTH_IT and s.iterations >= after else None

    status = await until(held, timeout=60)
    assert [p.refused != "" for p in world.plans] == [True]
    # Several loops later (each past the nodes' 1 s consolidateAfter), still the one plan.
    await until(lambda: held(status.iterations + 4), timeout=60)
    assert len(world.plans) == 1 and world.created == []


async def test_a_budget_window_that_closed_while_the_worker_was_down_is_honoured_when_it_is_back(
    env: WorkflowEnvironment,
) -> None:
    """A budget of nodes "0" whose window opened at the top of this minute and closes 20 s from now:
    the loop holds the empty node a (DisruptionBudgetExhausted). The worker stops, the window closes
    while none runs, and a new worker takes the loop up: a goes at once, no earlier than the window's
    end. The loop's timers outlived the worker, and each evaluation reads the window on the
    workflow's clock (a node a budget holds is removable: no evaluation is reused past it)."""
    import time
    from datetime import UTC, datetime

    from scaling.nodes.disruption.models import Budget, Disruption
    from scaling.nodes.models import ScaleDownSettings
    from tests.workflows.cleanup import stop_worker, terminate_runs
    from tests.workflows.workers import new_worker

    now = datetime.now(UTC)
    top = now.replace(second=0, microsecond=0)
    duration = int(now.timestamp() - top.timestamp()) + 20
    closes = top.timestamp() + duration
    window = Budget(nodes="0", schedule=f"{top.minute} {top.hour} * * *", duration=duration)
    group = GROUP.model_copy(
        update={"scale_down": ScaleDownSettings(unneeded_time_s=1), "disruption": Disruption(budgets=[window])}
    )
    world = DownWorld()
    nodes = [node("a"), node("b")]
    world.observation = ClusterObservation(nodes=nodes, groups=[group])
    world.down_obs = ScaleDownObservation(nodes=nodes, pods=[app_pod("web-1", "b")], groups=[group])
    tq = f"tq-{uuid.uuid4().hex[:6]}"
    handles: list[WorkflowHandle] = []
    first = new_worker(env.client, tq, activities=world.activities())
    await first.__aenter__()
    running = [first]
    try:
        h = await start_autoscaler(env, world, handles, tq)
        handles.append(env.client.get_workflow_handle(f"{h.id}/scale-down/a"))
        await until(
            lambda: _status_has(
                h, lambda s: any(c.node == "a" and c.reason == "DisruptionBudgetExhausted" for c in s.candidates)
            ),
            timeout=15,
            what="a held by the window",
        )
        await stop_worker(running.pop())
        await until(lambda: time.time() > closes + 1, timeout=30, what="the window closed")
        assert world.deleted == []
        second = new_worker(env.client, tq, activities=world.activities())
        await second.__aenter__()
        running.append(second)
        await until(lambda: world.deleted == ["a"], timeout=30, what="a removed once the worker is back")
        started = (await handles[-1].describe()).start_time
        assert started is not None and started.timestamp() >= closes
    finally:
        await terminate_runs(env.client, [x.id for x in handles])
        for w in running:
            await stop_worker(w)


async def test_a_utilized_node_do_not_disrupt_holds_from_consolidation_is_explained_with_one_event(
    env: WorkflowEnvironment,
    worker,  # noqa: ANN001, F811
) -> None:
    """Three cpx31 at 51 % in a consolidating group, a's pod annotated karpenter.sh/do-not-disrupt: a is
    utilized (no removal method qualifies it) and do-not-disrupt keeps it out of any multi-node
    command. The status, explain node and one DisruptionBlocked Event say so (before, a read "utilized"
    with no reason and no Event was written), and b and c go to a command without it."""
    from scaling.nodes.disruption.do_not_disrupt import ANNOTATION_DO_NOT_DISRUPT, DO_NOT_DISRUPT, EVENT_REASON
    from scaling.nodes.explain import ExplainNodeInput

    g = cx42_over_cpx31()
    world = half_full_cpx31(("a", "b", "c"), g)
    dnd = {ANNOTATION_DO_NOT_DISRUPT: "true"}
    pods = [p.model_copy(update={"annotations": dnd}) if p.node_name == "a" else p for p in world.down_obs.pods]
    world.down_obs = world.down_obs.model_copy(update={"pods": pods})
    world.plan_obs = world.plan_obs.model_copy(update={"pods": pods})
    tq, handles = await worker(world)
    h = await start_autoscaler(env, world, handles, tq)
    handles.append(env.client.get_workflow_handle(f"{h.id}/replace/b"))
    handles.extend(env.client.get_workflow_handle(f"{h.id}/scale-down/{n}") for n in ("b", "c"))

    async def planned():  # noqa: ANN202
        s = await h.query(NodeAutoscalerWorkflow.status)
        a = next((c for c in s.candidates if c.node == "a"), None)
        return s if a is not None and a.reason == DO_NOT_DISRUPT and world.plans else None

    status = await until(planned, timeout=60)
    a = next(c for c in status.candidates if c.node == "a")
    assert a.state == "Utilized" and "pod default/" in a.message and ANNOTATION_DO_NOT_DISRUPT in a.message
    explained = await h.query(NodeAutoscalerWorkflow.explain_node, ExplainNodeInput(name="a", managed=True))
    assert explained.outcome == "Kept" and "held from consolidation by DoNotDisrupt: pod default/" in explained.summary
    assert [e.node for e in world.node_events if e.reason == EVENT_REASON] == ["a"]  # once, not every loop
    assert [sorted(p.nodes) for p in world.plans] == [["b", "c"]]


def cx42_over_cpx31() -> NodeGroup:
    """A group that consolidates underutilized nodes after 1 s, cx42 its first choice, cpx31 its last."""
    from scaling.nodes.disruption.models import ConsolidationPolicy
    from scaling.nodes.models import ScaleDownSettings

    return NodeGroup(
        name="g",
        pools=[
            PoolSpec(provider="kwok", serverType=["cx42"], priority=10),
            PoolSpec(provider="kwok", serverType=["cpx31"], priority=1),
        ],
        scaleDown=ScaleDownSettings(policy=ConsolidationPolicy.WHEN_EMPTY_OR_UNDERUTILIZED, unneeded_time_s=1),
    )


def half_full_cpx31(names: tuple[str, ...], g: NodeGroup):  # noqa: ANN201
    """A ReplaceWorld of cpx31 nodes, each running one 2000m pod (51 %: utilized)."""
    from scaling.kube.models import Resources
    from scaling.nodes.models import LABEL_POOL
    from tests.workflows.nodes.test_node_replacement import ReplaceWorld, busy

    nodes = [
        node(n).model_copy(
            update={
                "labels": {**node(n).labels, LABEL_POOL: "kwok-cpx31"},
                "allocatable": Resources(cpu_m=3920, memory=6 << 30, pods=110),
                "requested": Resources(cpu_m=2000, memory=1 << 27, pods=1),
            }
        )
        for n in names
    ]
    pods = [p for n in names for p in busy(n, cpu=2000)]
    world = ReplaceWorld(
        plan_obs=ScaleDownObservation(nodes=nodes, pods=pods, groups=[g]),
        down_obs=ScaleDownObservation(nodes=nodes, pods=pods, groups=[g]),
    )
    world.observation = ClusterObservation(nodes=nodes, groups=[g])
    return world


async def test_a_replacement_that_cannot_start_beside_its_closing_run_does_not_hold_its_node(
    env: WorkflowEnvironment,
    worker,  # noqa: ANN001, F811
) -> None:
    """The consolidation bench never settled (600 s): a node's NodeReplacement ended (its NodeScaleDown
    child reported the node cancelled), the loop named the node again at once, under the id of the run
    still closing; the start failed, and the loop held the node for good, waiting for a report from a
    run that had closed. Here a run that never ends holds the id: once the child's final word is in,
    each failed start lets the node go, loop after loop."""
    from scaling.nodes.disruption.drift import LABEL_POOL_HASH, pool_hash
    from scaling.nodes.nodegroups import flatten_pools
    from scaling.nodes.scale_down.removals import ScaleDownStatus
    from scaling.nodes.settings import AutoscalerSettings
    from scaling.nodes.state import AutoscalerInput
    from tests.workflows.nodes.test_node_replacement import ReplaceWorld, busy
    from workflows.nodes.scale_down import NodeScaleDownWorkflow

    old = GROUP.model_copy(update={"pools": [GROUP.pools[0].model_copy(update={"config": {"image": "old"}})]})
    new = old.model_copy(update={"pools": [GROUP.pools[0].model_copy(update={"config": {"image": "new"}})]})
    made_old = {LABEL_POOL_HASH: pool_hash(old.labels, old.taints, flatten_pools(old)[0])}
    a = node("a").model_copy(update={"labels": {**node("a").labels, **made_old}})  # Drifted: replaced
    pods = busy("a")
    world = ReplaceWorld(
        plan_obs=ScaleDownObservation(nodes=[a], pods=pods, groups=[new]),
        down_obs=ScaleDownObservation(nodes=[a], pods=pods, groups=[new]),
    )
    world.observation = ClusterObservation(nodes=[a], groups=[new])
    tq, handles = await worker(world)
    cluster = f"c{uuid.uuid4().hex[:6]}"
    now = (await env.get_current_time()).timestamp()
    # The "closing" run: it holds the replacement's id and never reports (an empty node's wait, an hour).
    closing = await env.client.start_workflow(
        NodeScaleDownWorkflow.run,
        NodeScaleDownInput(cluster=cluster, node="elsewhere", kind="Empty", scale_down_at=now + 3600),
        id=f"nodes/{cluster}/replace/a",
        task_queue=tq,
    )
    handles.append(closing)
    h = await env.client.start_workflow(
        NodeAutoscalerWorkflow.run,
        AutoscalerInput(settings=AutoscalerSettings(cluster=cluster, scan_interval_s=1, machine_gc=False)),
        id=f"nodes/{cluster}",
        task_queue=tq,
    )
    handles.append(h)

    async def named():  # noqa: ANN202 - the loop tried to start a's replacement, and holds a
        s = await h.query(NodeAutoscalerWorkflow.status)
        return s if any(sd.node == "a" for sd in s.scale_downs) else None

    await until(named, timeout=60)
    # The child's final word on a, as a single node's replacement has it said.
    word = ScaleDownStatus(
        node="a", workflow_id=f"nodes/{cluster}/scale-down/a", kind="Drifted", phase=ScaleDownPhase.CANCELLED
    )
    await h.signal(NodeAutoscalerWorkflow.scale_down_changed, word)
    said = (await h.query(NodeAutoscalerWorkflow.status)).iterations

    async def let_go():  # noqa: ANN202 - loops later, a is named again and let go each time
        s = await h.query(NodeAutoscalerWorkflow.status)
        return s if s.iterations >= said + 3 and not any(sd.node == "a" for sd in s.scale_downs) else None

    await until(let_go, timeout=60)
    assert world.created == []  # the id held: nothing was bought


async def test_a_disrupted_taint_no_removal_holds_is_lifted_by_the_loop(env: WorkflowEnvironment, worker) -> None:  # noqa: ANN001
    """a carries karpenter.sh/disrupted and no removal of the loop holds it (a NodeReplacement ended from
    outside, terminated, before it lifted the taint): no pod could land on it for good. The loop lifts
    it, as Karpenter lifts the taint from nodes no command in its queue holds; b, untainted, is left."""
    from scaling.kube.drain import TAINT_DISRUPTED
    from scaling.kube.models import Taint

    world = DownWorld()
    a = node("a").model_copy(update={"taints": [Taint(key=TAINT_DISRUPTED, effect="NoSchedule")]})
    observed(world, [a, node("b")], [app_pod("web-1", "a"), app_pod("web-2", "b")])
    tq, handles = await worker(world)
    h = await start_autoscaler(env, world, handles, tq)  # the group's timers: nothing is removed meanwhile

    def lifted():  # noqa: ANN202
        return ("undisrupted", "a") in world.calls

    await until(lifted, timeout=30)
    assert not any(c == "undisrupted" and n != "a" for c, n in world.calls)
    assert world.deleted == [] and not any(c in ("mark", "soft-mark") for c, _ in world.calls)
    assert await scheduled(h, "taint_disrupted") >= 1
    assert "a" in world.marks_lifted  # the loop's cleanup lifts the deletion marks with it


async def test_marks_a_stopped_cluster_autoscaler_left_are_kept_or_lifted_as_it_would(
    env: WorkflowEnvironment,
    worker,  # noqa: ANN001
) -> None:
    """A Cluster Autoscaler stopped for growth leaves its marks: DeletionCandidateOfClusterAutoscaler
    (PreferNoSchedule) on the nodes it found unneeded, ToBeDeletedByClusterAutoscaler (NoSchedule) on
    one it was deleting. It lifts the hard ones when it starts again (static_autoscaler.go
    cleanUpIfRequired), and in its loop puts the soft one on each unneeded node and lifts it from each
    node needed again (actuation/softtaint.go). growth, which took over, does the same: else the
    scheduler avoided a needed node for good, and growth's planners counted b as leaving."""
    from scaling.kube.drain import TAINT_DELETION_CANDIDATE, TAINT_TO_BE_DELETED
    from scaling.kube.models import Taint

    world = DownWorld()
    soft = [Taint(key=TAINT_DELETION_CANDIDATE, value="1", effect="PreferNoSchedule")]
    unneeded = node("a").model_copy(update={"taints": soft})  # one small pod: it fits elsewhere
    hard = node("b").model_copy(update={"taints": [Taint(key=TAINT_TO_BE_DELETED, value="1", effect="NoSchedule")]})
    needed = node("d").model_copy(update={"taints": soft})  # 60 % used: needed, now
    static = node("static", managed=False).model_copy(update={"taints": [*hard.taints, *soft]})  # not growth's
    busy = [app_pod(f"web-d{i}", "d") for i in range(12)]
    observed(world, [unneeded, hard, needed, static, node("c")], [*(app_pod(f"web-{n}", n) for n in "abc"), *busy])
    tq, handles = await worker(world)
    h = await start_autoscaler(env, world, handles, tq)  # the group's timers: nothing is removed meanwhile
    await until(lambda: "b" in world.marks_lifted and ("untaint", "d") in world.soft_taints, timeout=30)
    assert set(world.marks_lifted) == {"b"} and world.deleted == []
    # d lifted first (CA spends its calls on needed nodes first); c, unneeded too, tainted; a kept.
    assert world.soft_taints[0] == ("untaint", "d")
    await until(lambda: ("taint", "c") in world.soft_taints, timeout=30)
    assert not any(n in ("a", "static") for _, n in world.soft_taints)
    # The branch that calls update_soft_deletion_taints replays (the decision is the evaluation's result).
    history = await h.fetch_history()
    names = {
        e.activity_task_scheduled_event_attributes.activity_type.name
        for e in history.events
        if e.HasField("activity_task_scheduled_event_attributes")
    }
    assert "update_soft_deletion_taints" in names
    await new_replayer(WORKFLOWS).replay_workflow(history)


async def test_the_timers_a_stopped_cluster_autoscaler_soft_taints_say_carry_over_with_the_ttl(
    env: WorkflowEnvironment,
    worker,  # noqa: ANN001
) -> None:
    """CA started with --node-deletion-candidate-ttl takes each soft-tainted node's unneeded time
    from the taint's value (unneeded/nodes.go LoadFromExistingTaints). growth's first evaluation does
    so with node_deletion_candidate_ttl_s: a found unneeded by CA 595 s ago goes once its 600 s are
    out, c, unneeded too but untainted, starts its timer now and stays."""
    import time

    from scaling.kube.drain import TAINT_DELETION_CANDIDATE
    from scaling.kube.models import Taint

    world = DownWorld()
    at = str(int(time.time()) - 595)
    a = node("a").model_copy(
        update={"taints": [Taint(key=TAINT_DELETION_CANDIDATE, value=at, effect="PreferNoSchedule")]}
    )
    busy = [app_pod(f"web-d{i}", "d") for i in range(12)]
    observed(world, [a, node("c"), node("d")], [app_pod("web-a", "a"), app_pod("web-c", "c"), *busy])
    tq, handles = await worker(world)
    h = await start_autoscaler(env, world, handles, tq, node_deletion_candidate_ttl_s=3600)
    handles.append(env.client.get_workflow_handle(f"{h.id}/scale-down/a"))
    await until(lambda: world.deleted == ["a"], timeout=60)
    status = await h.query(NodeAutoscalerWorkflow.status)
    c = next(x for x in status.candidates if x.node == "c")
    assert c.state == "UnneededWaiting" and c.removable_at is not None and c.removable_at > time.time() + 500
    history = await h.fetch_history()
    await new_replayer(WORKFLOWS).replay_workflow(history)
