"""NodeReplacement on the time-skipping server: the successor Ready before the node is marked, cordoned
and drained (Karpenter's orchestration queue, pkg/controllers/disruption/orchestration/queue.go), the
old node kept serving when the successor fails or the drain's re-check refuses. Provider and Kubernetes
activities are stubs under the real names; planning and re-checks are the real rules."""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from temporalio import activity, workflow
from temporalio.client import WorkflowHandle, WorkflowHistory
from temporalio.testing import WorkflowEnvironment

from scaling.history import RecordedHistory
from scaling.kube.drain import NO_PLACE_TO_MOVE
from scaling.kube.labels import label_value
from scaling.kube.models import Resources
from scaling.nodes.contracts import (
    CreateNodeInput,
    CreateNodeResult,
    EvictPodInput,
    EvictResult,
    ReplacementPlan,
    ReplacementPlanInput,
    ScaleDownObservation,
    WaitReadyInput,
)
from scaling.nodes.disruption.do_not_disrupt import ANNOTATION_DO_NOT_DISRUPT, DO_NOT_DISRUPT
from scaling.nodes.disruption.drift import LABEL_POOL_HASH, LABEL_REPLACEMENT, LABEL_REPLACES
from scaling.nodes.disruption.multi_node import plan_for_input
from scaling.nodes.disruption.orchestration import (
    ALREADY_REMOVING,
    REPLACEMENT_FAILED,
    REPLACEMENT_UNPLANNED,
    NodeReplacementInput,
    command_id,
    successor_id,
)
from scaling.nodes.disruption.refusals import NOT_WORTH_IT, cluster_digest
from scaling.nodes.models import LABEL_POOL, ApprovalPolicy, NodeGroup, PoolSpec
from scaling.nodes.providers.kwok import kwok_catalogue
from scaling.nodes.scale_down.removals import (
    FINAL_SCALE_DOWN_PHASES,
    NodeScaleDownInput,
    ScaleDownPhase,
    ScaleDownStatus,
)
from scaling.nodes.trail import node_trail
from starters.history import decode_events
from tests.polling import until
from tests.workflows.nodes.test_node_scale_down import GIB, GROUP, DownWorld, app_pod, node, worker  # noqa: F401
from tests.workflows.replayer import assert_replay, committed, record_again
from tests.workflows.workers import new_worker
from workflows.all import WORKFLOWS
from workflows.nodes.replacement import NodeReplacementWorkflow
from workflows.nodes.scale_down import NodeScaleDownWorkflow, scale_down_id

SUCCESSOR = "kwok-cx22-1"  # the stub provider's name for the first machine it makes


@dataclass
class ReplaceWorld(DownWorld):
    """The scale-down world, plus the plan: planned on ``plan_obs`` (the cluster before the successor),
    re-checked on ``down_obs``, which a created successor joins."""

    plan_obs: ScaleDownObservation = field(default_factory=ScaleDownObservation)
    plans: list[ReplacementPlan] = field(default_factory=list)
    made: dict[tuple[str, int], str] = field(default_factory=dict)  # the create's key -> machine
    held_evictions: set[str] = field(default_factory=set)  # pods whose eviction waits while listed here
    late_cpu: int = 0  # a pod of this many millicores lands on each successor once it is made
    order: list[str] = field(default_factory=list)  # the plan's drain_order, when it names one

    def activities(self) -> list:
        w = self
        # DownWorld's `machines` are find_orphans' machines: this create keeps its own key map.
        base = [a for a in super().activities() if activity._Definition.from_callable(a).name != "create_node"]

        @activity.defn(name="create_node")
        async def create(inp: CreateNodeInput) -> CreateNodeResult:
            w.created.append(inp)
            w.calls.append(("create", inp.request_id))
            key = (inp.request_id, inp.attempt)
            name = w.made.get(key)
            if name is None:
                name = w.made[key] = f"{inp.pool.name}-{len(w.made) + 1}"
                # The successor joins the cluster the re-check and the loop read.
                # As big as its server type: a re-check checks the whole command against its room.
                size = next(t.allocatable for t in kwok_catalogue() if t.name == inp.pool.server_type)
                made = node(name).model_copy(
                    update={
                        "labels": {**node(name).labels, **inp.labels},
                        "allocatable": size.model_copy(update={"extended": ()}),
                    }
                )
                late = [busy(name, cpu=w.late_cpu)[0].model_copy(update={"name": f"late-{name}"})] if w.late_cpu else []
                w.down_obs = w.down_obs.model_copy(
                    update={"nodes": [*w.down_obs.nodes, made], "pods": [*w.down_obs.pods, *late]}
                )
            return CreateNodeResult(outcome="created", node_name=name, provider_id=f"kwok://{name}")

        @activity.defn(name="plan_replacement")
        async def plan(inp: ReplacementPlanInput) -> ReplacementPlan:
            w.calls.append(("plan", inp.node))
            p = plan_for_input(w.plan_obs, kwok_catalogue(), inp)
            if w.order:
                p = p.model_copy(update={"drain_order": w.order})
            w.plans.append(p)
            return p

        waits = next(a for a in base if activity._Definition.from_callable(a).name == "wait_node_ready")
        evicts = next(a for a in base if activity._Definition.from_callable(a).name == "evict_pod")

        @activity.defn(name="evict_pod")
        async def evict(inp: EvictPodInput) -> EvictResult:
            while f"{inp.namespace}/{inp.name}" in w.held_evictions:
                activity.heartbeat()
                await asyncio.sleep(0.05)
            return await evicts(inp)

        @activity.defn(name="wait_node_ready")
        async def wait_ready(inp: WaitReadyInput) -> bool:
            ready = await waits(inp)
            if ready:
                w.calls.append(("ready", inp.node_name))
            return ready

        return [*(a for a in base if a not in (waits, evicts)), create, plan, wait_ready, evict]


def busy(name: str, cpu: int = 1800) -> list:
    return [
        app_pod(f"{name}-web", name).model_copy(
            update={"requests": app_pod("x", name).requests.model_copy(update={"cpu_m": cpu})}
        )
    ]


def world(*, pods: list | None = None, **kw: object) -> ReplaceWorld:
    a = node("a")
    pods = pods if pods is not None else busy("a")
    return ReplaceWorld(
        plan_obs=ScaleDownObservation(nodes=[a], pods=pods, groups=[GROUP]),
        down_obs=ScaleDownObservation(nodes=[a], pods=pods, groups=[GROUP]),
        **kw,
    )


def arrived_do_not_disrupt(w: ReplaceWorld, *nodes: str) -> ReplaceWorld:
    """A do-not-disrupt pod on each of ``nodes`` after the plan: the drain's re-check sees it."""
    held = [
        app_pod(f"late-{n}", n).model_copy(update={"annotations": {ANNOTATION_DO_NOT_DISRUPT: "true"}}) for n in nodes
    ]
    w.down_obs = w.down_obs.model_copy(update={"pods": [*w.down_obs.pods, *held]})
    return w


async def trail_of(env: WorkflowEnvironment, wid: str, node_name: str = "a") -> list[str]:
    """`growth nodes trail`'s entries for the node, from this replacement's and its removal's histories."""
    histories = [await env.client.get_workflow_handle(w).fetch_history() for w in (wid, scale_down_id("c", node_name))]
    removal = RecordedHistory(
        workflow_id=wid,
        events=sorted((e for h in histories for e in decode_events("r", list(h.events))), key=lambda e: e.at),
        runs=["r"],
    )
    trail = node_trail(node_name, RecordedHistory(workflow_id="nodes/c", events=[], runs=[]), None, removal)
    return [e.what for e in trail.entries]


async def start_replace(
    env: WorkflowEnvironment, tq: str, node_name: str = "a", kind: str = "Drifted", wid: str | None = None
) -> WorkflowHandle:
    wid = wid or f"nodes/c/replace/{node_name}-{uuid.uuid4().hex[:6]}"
    now = (await env.get_current_time()).timestamp()
    removal = NodeScaleDownInput(cluster="c", node=node_name, group="g", kind=kind, scale_down_at=now)
    return await env.client.start_workflow(
        NodeReplacementWorkflow.run, NodeReplacementInput(removal=removal, readiness_poll_s=1), id=wid, task_queue=tq
    )


async def replace(env: WorkflowEnvironment, tq: str, node_name: str = "a") -> tuple[str, object]:
    h = await start_replace(env, tq, node_name)
    return h.id, await h.result()


async def test_the_successor_is_ready_before_the_node_is_marked_and_drained(env: WorkflowEnvironment, worker) -> None:  # noqa: ANN001, F811
    w = world()
    tq, _ = await worker(w)
    h = await start_replace(env, tq)
    wid, result = h.id, await h.result()
    assert result.phase == ScaleDownPhase.REMOVED, result.message
    # One successor, made from the group's spec now, keyed by this run, naming the node it replaces.
    assert len(w.created) == 1 and w.created[0].request_id == successor_id(command_id(wid, h.first_execution_run_id), 0)
    labels = w.created[0].labels
    assert labels[LABEL_REPLACES] == "a" and labels[LABEL_POOL_HASH]
    assert w.labelled[SUCCESSOR][LABEL_REPLACES] == "a"  # ... and Ready (the readiness wait labels it)
    # Tainted karpenter.sh/disrupted before the successor's create (no new pod lands on it from then on,
    # as Karpenter's executeCommand), and only once the successor is Ready: marked, re-checked, cordoned,
    # drained, deleted. Removed, it needs no untaint.
    assert [c for c, n in w.calls if n == "a"] == ["plan", "disrupted", "mark", "check", "cordon", "delete-node"]
    assert [c for c, _ in w.calls if c in ("disrupted", "create", "ready", "mark")] == [
        "disrupted",
        "create",
        "ready",
        "mark",
    ]
    assert ("evict", "default/a-web") in w.calls and w.deleted == ["a"]
    assert await trail_of(env, wid) == [
        "ReplacementPlanned",
        "DisruptionTainted",
        "SuccessorAttempt",
        "SuccessorReady",
        "Marked",
        "Rechecked",
        "Evicted",
        "DeletedAtProvider",
        "Removed",
        "ScaleDownEnded",
    ]


async def test_a_successor_that_never_becomes_ready_leaves_the_node_serving(env: WorkflowEnvironment, worker) -> None:  # noqa: ANN001, F811
    w = world(never_ready_pools={"kwok-cx22"})
    tq, _ = await worker(w)
    _, result = await replace(env, tq)
    assert result.phase == ScaleDownPhase.FAILED and result.reason == REPLACEMENT_FAILED
    assert "keeps serving" in result.message
    assert not any(n == "a" and c in ("mark", "cordon", "evict", "delete-node") for c, n in w.calls)
    # The taint goes once the last failed machine is deleted: the node takes new pods again.
    assert [c for c, n in w.calls if n == "a"] == ["plan", "disrupted", "undisrupted"]
    assert "a" not in w.deleted and all(d.startswith("kwok-cx22-") for d in w.deleted)  # the failed machines went


async def test_a_do_not_disrupt_pod_arriving_before_the_drain_cancels_and_the_successor_goes(
    env: WorkflowEnvironment,
    worker,  # noqa: ANN001, F811
) -> None:
    w = arrived_do_not_disrupt(world(), "a")
    tq, _ = await worker(w)
    _, result = await replace(env, tq)
    assert result.phase == ScaleDownPhase.CANCELLED and result.reason == DO_NOT_DISRUPT
    assert ("unmark", "a") in w.calls and ("cordon", "a") not in w.calls
    assert [c for c, n in w.calls if n == "a"][-1] == "undisrupted"  # kept: it serves new pods again
    assert w.deleted == [SUCCESSOR]  # it took no pod: not kept


async def test_a_pod_no_successor_could_hold_is_reported_and_nothing_is_bought(
    env: WorkflowEnvironment, worker
) -> None:  # noqa: ANN001, F811
    huge = busy("a", cpu=10_000_000)
    w = world(pods=huge)
    tq, _ = await worker(w)
    _, result = await replace(env, tq)
    assert result.phase == ScaleDownPhase.CANCELLED and result.reason == REPLACEMENT_UNPLANNED
    assert "a-web" in result.message and w.created == []


async def test_pods_that_fit_the_other_nodes_need_no_successor(env: WorkflowEnvironment, worker) -> None:  # noqa: ANN001, F811
    w = world()
    w.down_obs = w.down_obs.model_copy(update={"nodes": [*w.down_obs.nodes, node("b")]})
    w.plan_obs = w.down_obs  # room on another node already
    tq, _ = await worker(w)
    _, result = await replace(env, tq)
    assert result.phase == ScaleDownPhase.REMOVED and w.created == [] and w.deleted == ["a"]


HISTORY = Path(__file__).parents[1] / "histories" / "node_replacement.json"


async def record_history(env: WorkflowEnvironment, worker) -> tuple[ReplaceWorld, WorkflowHistory]:  # noqa: ANN001, F811
    """A gated replacement (the group approves nothing above 0 nodes) the operator approves: the
    committed history below is one of these."""
    gated = GROUP.model_copy(update={"approval": ApprovalPolicy(nodes_above=0, timeout_s=3600)})
    w = world()
    w.plan_obs = w.plan_obs.model_copy(update={"groups": [gated]})
    tq, _ = await worker(w)
    wid = f"nodes/c/replace/a-{uuid.uuid4().hex[:6]}"
    removal = NodeScaleDownInput(cluster="c", node="a", group="g", kind="Expired", scale_down_at=0)
    h = await env.client.start_workflow(
        NodeReplacementWorkflow.run, NodeReplacementInput(removal=removal, readiness_poll_s=1), id=wid, task_queue=tq
    )
    await until(lambda: _awaiting(h), timeout=30)
    assert w.created == [] and not any(c == "mark" for c, _ in w.calls)  # nothing bought, nothing touched
    assert (await h.query(NodeReplacementWorkflow.describe)).successors == []  # lends the loop no room
    await h.execute_update(NodeReplacementWorkflow.approve, "recorded")
    result = await h.result()
    assert result.phase == ScaleDownPhase.REMOVED and len(w.created) == 1
    return w, await h.fetch_history()


async def _awaiting(h: WorkflowHandle) -> bool:
    return "AwaitingApproval" in (await h.query(NodeReplacementWorkflow.describe)).message


async def test_the_approval_gate_holds_the_successor_and_the_runs_replay(env: WorkflowEnvironment, worker) -> None:  # noqa: ANN001, F811
    """Both the run just recorded and the committed one (python -m tests.workflows.nodes.test_node_replacement)."""
    _, fresh = await record_history(env, worker)
    await assert_replay(WORKFLOWS, fresh, committed(HISTORY))


def priced_group() -> NodeGroup:
    """cx22 first, cx52 beside it: a cx52 node running little can become a cx22."""
    return NodeGroup(
        name="g",
        pools=[
            PoolSpec(provider="kwok", serverType=["cx22"], priority=20),
            PoolSpec(provider="kwok", serverType=["cx52"], priority=10),
        ],
    )


async def consolidate(env: WorkflowEnvironment, tq: str) -> object:
    now = (await env.get_current_time()).timestamp()
    removal = NodeScaleDownInput(cluster="c", node="a", group="g", kind="Consolidated", scale_down_at=now)
    h = await env.client.start_workflow(
        NodeReplacementWorkflow.run,
        NodeReplacementInput(removal=removal, readiness_poll_s=1),
        id=f"nodes/c/replace/a-{uuid.uuid4().hex[:6]}",
        task_queue=tq,
    )
    return await h.result()


async def test_consolidation_replaces_a_dear_node_by_a_cheaper_one(env: WorkflowEnvironment, worker) -> None:  # noqa: ANN001, F811
    a = node("a").model_copy(update={"labels": {**node("a").labels, LABEL_POOL: "kwok-cx52"}})
    pods = busy("a", cpu=500)
    w = ReplaceWorld(
        plan_obs=ScaleDownObservation(nodes=[a], pods=pods, groups=[priced_group()]),
        down_obs=ScaleDownObservation(nodes=[a], pods=pods, groups=[priced_group()]),
    )
    tq, _ = await worker(w)
    result = await consolidate(env, tq)
    assert result.phase == ScaleDownPhase.REMOVED, result.message
    assert [c.pool.server_type for c in w.created] == ["cx22"] and w.deleted == ["a"]
    assert w.plans[0].price_after < w.plans[0].price_before * 0.9  # type: ignore[operator]


async def test_consolidation_that_saves_too_little_buys_nothing(env: WorkflowEnvironment, worker) -> None:  # noqa: ANN001, F811
    pods = busy("a", cpu=500)
    w = ReplaceWorld(  # a is a cx22 already: its successor would cost the same
        plan_obs=ScaleDownObservation(nodes=[node("a")], pods=pods, groups=[priced_group()]),
        down_obs=ScaleDownObservation(nodes=[node("a")], pods=pods, groups=[priced_group()]),
    )
    tq, _ = await worker(w)
    result = await consolidate(env, tq)
    assert result.phase == ScaleDownPhase.CANCELLED and result.reason == NOT_WORTH_IT, result.message
    assert w.created == [] and not any(c == "mark" for c, _ in w.calls)
    # What the plan read goes back with the refusal: the loop asks again only once it changed.
    assert result.cluster_digest.partition(":")[0] == cluster_digest(w.plan_obs.nodes, w.plan_obs.pods) != ""


# --- multi-node consolidation: N nodes replaced by one successor ---------------------------------


def three_dear_nodes() -> ReplaceWorld:
    """a, b and c are cx42 running 500m each: one cx22 holds all three pods (group: one tier of types)."""
    g = NodeGroup(name="g", pools=[PoolSpec(provider="kwok", serverType=["cx22", "cx32", "cx42"], priority=10)])
    dear = [
        node(n).model_copy(
            update={
                "labels": {**node(n).labels, LABEL_POOL: "kwok-cx42"},
                "allocatable": Resources(cpu_m=7910, memory=16 * GIB, pods=110),
                "requested": Resources(cpu_m=500, memory=GIB // 8, pods=1),
            }
        )
        for n in ("a", "b", "c")
    ]
    pods = [p for n in ("a", "b", "c") for p in busy(n, cpu=500)]
    return ReplaceWorld(
        plan_obs=ScaleDownObservation(nodes=dear, pods=pods, groups=[g]),
        down_obs=ScaleDownObservation(nodes=dear, pods=pods, groups=[g]),
    )


async def start_many(env: WorkflowEnvironment, tq: str, allowed: int = 3, wid: str | None = None) -> WorkflowHandle:
    now = (await env.get_current_time()).timestamp()
    a, b, c = (
        NodeScaleDownInput(cluster="c", node=n, group="g", kind="Consolidated", scale_down_at=now)
        for n in ("a", "b", "c")
    )
    return await env.client.start_workflow(
        NodeReplacementWorkflow.run,
        NodeReplacementInput(removal=a, others=[b, c], allowed=allowed, readiness_poll_s=1),
        id=wid or f"nodes/c/replace/a-{uuid.uuid4().hex[:6]}",
        task_queue=tq,
    )


async def consolidate_many(env: WorkflowEnvironment, tq: str, allowed: int = 3) -> object:
    return await (await start_many(env, tq, allowed)).result()


async def test_three_nodes_are_replaced_by_one_successor_ready_before_any_is_touched(
    env: WorkflowEnvironment,
    worker,  # noqa: ANN001, F811
) -> None:
    w = three_dear_nodes()
    tq, _ = await worker(w)
    h = await start_many(env, tq)
    result = await h.result()
    assert result.phase == ScaleDownPhase.REMOVED and "3 of 3 nodes removed" in result.message, result.message
    assert w.plans[0].nodes == ["a", "b", "c"]
    assert [c.pool.server_type for c in w.created] == ["cx22"]  # one successor, cheaper than the three
    # held from scale-down until the last is drained, and while any node of the command is in flight:
    # each node's NodeScaleDown reports the command the successor is labelled with
    command = command_id(h.id, h.first_execution_run_id)
    assert w.created[0].labels[LABEL_REPLACES] == "c"
    assert w.created[0].labels[LABEL_REPLACEMENT] == label_value(command) and result.command == command
    ready = w.calls.index(("ready", SUCCESSOR))
    touched = [i for i, (c, n) in enumerate(w.calls) if n in "abc" and c in ("mark", "cordon", "delete-node")]
    assert touched and min(touched) > ready  # nothing touched before the successor was Ready
    # each tainted before the successor's create; then, by its own NodeScaleDown: marked, re-checked,
    # cordoned, drained, deleted
    assert [c for c, n in w.calls if n == "b"] == ["disrupted", "mark", "check", "cordon", "delete-node"]
    assert sorted(w.deleted) == ["a", "b", "c"]  # together: in no fixed order


async def test_the_budget_bounds_how_many_go_together(env: WorkflowEnvironment, worker) -> None:  # noqa: ANN001, F811
    w = three_dear_nodes()
    tq, _ = await worker(w)
    result = await consolidate_many(env, tq, allowed=2)
    assert result.phase == ScaleDownPhase.REMOVED, result.message
    assert w.plans[0].nodes == ["a", "b"] and sorted(w.deleted) == ["a", "b"]
    assert not any(n == "c" for _, n in w.calls if _ != "plan")  # c was never touched


async def test_a_successor_that_fails_leaves_every_node_serving(env: WorkflowEnvironment, worker) -> None:  # noqa: ANN001, F811
    w = three_dear_nodes()
    w.never_ready_pools = {"kwok-cx22", "kwok-cx32"}  # every type that saves enough (cx42 is a candidate's)
    tq, _ = await worker(w)
    result = await consolidate_many(env, tq)
    assert result.phase == ScaleDownPhase.FAILED and result.reason == REPLACEMENT_FAILED, result.message
    assert "keeps serving" in result.message
    assert not any(n in "abc" and c in ("mark", "cordon", "evict", "delete-node") for c, n in w.calls)
    assert w.deleted and all(d.startswith(("kwok-cx22-", "kwok-cx32-")) for d in w.deleted)  # only failed successors
    # Every node of the command was tainted before the first create and untainted after the last delete.
    tainted = [n for c, n in w.calls if c == "disrupted"]
    assert sorted(tainted) == sorted(n for c, n in w.calls if c == "undisrupted") and len(tainted) >= 2
    first_create = next(i for i, (c, _) in enumerate(w.calls) if c == "create")
    assert all(i < first_create for i, (c, _) in enumerate(w.calls) if c == "disrupted")


async def test_a_node_another_command_is_removing_is_left_to_it(env: WorkflowEnvironment, worker) -> None:  # noqa: ANN001, F811
    """The consolidation bench's replacements failed with "Workflow execution already started": a
    single-node fallback took a node the loop then named to a second command, whose plan chose it too."""
    w = world()
    w.down_obs = w.down_obs.model_copy(update={"nodes": [*w.down_obs.nodes, node("b")]})
    w.plan_obs = w.down_obs  # a deletion: its pods fit b
    tq, _ = await worker(w)
    now = (await env.get_current_time()).timestamp()
    other = NodeScaleDownInput(cluster="c", node="a", group="g", kind="Consolidated", scale_down_at=now + 3600)
    await env.client.start_workflow(NodeScaleDownWorkflow.run, other, id=scale_down_id("c", "a"), task_queue=tq)
    _, result = await replace(env, tq)
    assert result.phase == ScaleDownPhase.CANCELLED and result.reason == ALREADY_REMOVING, result.message
    assert w.created == [] and w.deleted == []


def calls_of(w: ReplaceWorld, what: str) -> list[int]:
    return [i for i, (c, _) in enumerate(w.calls) if c == what]


async def test_every_node_is_cordoned_before_the_first_eviction(env: WorkflowEnvironment, worker) -> None:  # noqa: ANN001, F811
    """Karpenter taints every candidate of a command before any is drained: no pod evicted from one node
    may be scheduled onto another node of the command, to be evicted a second time."""
    w = three_dear_nodes()
    tq, _ = await worker(w)
    result = await consolidate_many(env, tq)
    assert result.phase == ScaleDownPhase.REMOVED and "3 of 3 nodes removed" in result.message, result.message
    cordons, evictions = calls_of(w, "cordon"), calls_of(w, "evict")
    assert len(cordons) == 3 and len(evictions) == 3
    assert max(cordons) < min(evictions), w.calls  # marked and cordoned, all three, before any pod is evicted


async def test_a_held_drain_keeps_no_other_node_of_the_command_from_draining(env: WorkflowEnvironment, worker) -> None:  # noqa: ANN001, F811
    """They drain together: a's eviction held, b and c are drained and deleted meanwhile."""
    w = three_dear_nodes()
    w.held_evictions = {"default/a-web"}
    tq, _ = await worker(w)
    h = await start_many(env, tq)
    await until(lambda: {"b", "c"} <= set(w.deleted), timeout=30, what="b and c deleted while a's drain is held")
    assert "a" not in w.deleted and ("evict", "default/a-web") not in w.calls
    w.held_evictions.clear()
    result = await h.result()
    assert result.phase == ScaleDownPhase.REMOVED and "3 of 3 nodes removed" in result.message, result.message
    assert sorted(w.deleted) == ["a", "b", "c"]


async def test_a_node_whose_recheck_cancels_keeps_serving_while_the_others_go(env: WorkflowEnvironment, worker) -> None:  # noqa: ANN001, F811
    """A do-not-disrupt pod arrived on b: its NodeScaleDown unmarks it and ends, and the drain of a and c,
    which waited for it, goes on. The successor took their pods: kept. The run and the committed ones
    replay (python -m tests.workflows.nodes.test_node_replacement drains records the first)."""
    w, fresh = await record_drains(env, worker)
    # Never cordoned, b serves on, and new pods may land on it again; a and c went with their taint.
    assert [c for c, n in w.calls if n == "b"] == ["disrupted", "mark", "check", "unmark", "undisrupted"]
    assert ("undisrupted", "a") not in w.calls and ("undisrupted", "c") not in w.calls
    assert max(i for i, (c, n) in enumerate(w.calls) if c == "cordon") < min(calls_of(w, "evict"))
    assert sorted(w.deleted) == ["a", "c"]
    await assert_replay(WORKFLOWS, fresh, committed(DRAINED_TOGETHER))


def drains_of(events: list[dict]) -> list[str]:
    """The NodeScaleDown children's starts and ends in a replacement's history, in order."""
    out = []
    for e in events:
        if "startChildWorkflowExecutionInitiatedEventAttributes" in e:
            out.append("start")
        elif "childWorkflowExecutionCompletedEventAttributes" in e:
            out.append("end")
    return out


def test_the_committed_drains_went_together() -> None:
    """The committed multi-node history starts every node's NodeScaleDown before any ends."""
    together = committed(DRAINED_TOGETHER).to_json_dict()["events"]
    assert drains_of(together) == ["start"] * 3 + ["end"] * 3


async def test_the_drains_recheck_the_command_as_a_whole(env: WorkflowEnvironment, worker) -> None:  # noqa: ANN001, F811
    """A pod landed on the successor after the plan: it has room for two of the three nodes' pods. Each
    node re-checked alone fits its pod there, and all three drained, one pod had nowhere to go; each
    re-check places the others' pods first (Karpenter validates a command as a whole), so none drains."""
    w = three_dear_nodes()
    w.late_cpu = 930  # the cx22 successor (1930m) keeps 1000m: two of the 500m pods
    tq, _ = await worker(w)
    h = await start_many(env, tq)
    result = await h.result()
    assert result.reason == NO_PLACE_TO_MOVE and "0 of 3 nodes removed (none)" in result.message, result.message
    assert sorted(n for c, n in w.calls if c == "unmark") == ["a", "b", "c"]
    assert calls_of(w, "cordon") == [] and calls_of(w, "evict") == []
    # Nothing moved to the successor, but a pod landed on it: it is not deleted under that pod (it was,
    # at the provider, undrained); the loop's scale-down judges it as any node. The run replays.
    assert w.deleted == [] and ("check", SUCCESSOR) in w.calls
    await assert_replay(WORKFLOWS, await h.fetch_history())


async def test_when_every_recheck_cancels_the_successor_goes_and_every_node_serves(
    env: WorkflowEnvironment,
    worker,  # noqa: ANN001, F811
) -> None:
    w = arrived_do_not_disrupt(three_dear_nodes(), "a", "b", "c")
    tq, _ = await worker(w)
    result = await consolidate_many(env, tq)
    assert result.reason == DO_NOT_DISRUPT and "0 of 3 nodes removed (none)" in result.message, result.message
    assert sorted(n for c, n in w.calls if c == "unmark") == ["a", "b", "c"]
    assert calls_of(w, "cordon") == [] and calls_of(w, "evict") == []
    assert w.deleted == [SUCCESSOR]  # nothing moved to it, nothing landed on it: checked, then deleted
    assert ("check", SUCCESSOR) in w.calls


async def test_a_later_command_under_the_same_id_buys_its_own_successor(env: WorkflowEnvironment, worker) -> None:  # noqa: ANN001, F811
    """A command's id is its first node's. a's re-check cancelled (a do-not-disrupt pod), b and c went
    and the successor holds their pods; the next command on a runs under the same id. Keyed by the id
    alone, its create found that successor as its own and, its re-check cancelling too, deleted it
    under the pods it held."""
    w = arrived_do_not_disrupt(three_dear_nodes(), "a")
    tq, _ = await worker(w)
    wid = f"nodes/c/replace/a-{uuid.uuid4().hex[:6]}"
    first = await (await start_many(env, tq, wid=wid)).result()
    assert "2 of 3 nodes removed (b, c)" in first.message, first.message
    assert sorted(w.deleted) == ["b", "c"] and w.made  # the successor serves b's and c's pods
    kept = next(iter(w.made.values()))
    a = w.plan_obs.nodes[0]
    w.plan_obs = w.plan_obs.model_copy(
        update={"nodes": [a], "pods": [p for p in w.plan_obs.pods if p.node_name == "a"]}
    )
    h = await start_replace(env, tq, kind="Consolidated", wid=wid)
    second = await h.result()
    assert second.reason == DO_NOT_DISRUPT, second.message
    assert w.created[1].request_id == successor_id(command_id(wid, h.first_execution_run_id), 0)
    assert w.created[1].request_id != w.created[0].request_id
    assert kept not in w.deleted and sorted(w.deleted) == sorted(["b", "c", w.made[(w.created[1].request_id, 0)]])


async def test_a_node_of_the_command_another_removes_is_left_to_it_and_the_others_drain(
    env: WorkflowEnvironment,
    worker,  # noqa: ANN001, F811
) -> None:
    w = three_dear_nodes()
    tq, handles = await worker(w)
    now = (await env.get_current_time()).timestamp()
    other = NodeScaleDownInput(cluster="c", node="b", group="g", kind="Consolidated", scale_down_at=now + 3600)
    handles.append(
        await env.client.start_workflow(NodeScaleDownWorkflow.run, other, id=scale_down_id("c", "b"), task_queue=tq)
    )
    result = await consolidate_many(env, tq)
    assert result.phase == ScaleDownPhase.REMOVED and "2 of 3 nodes removed (a, c)" in result.message, result.message
    assert sorted(w.deleted) == ["a", "c"] and ("cordon", "b") not in w.calls  # b is the other's to drain


DRAINED_TOGETHER = HISTORY.with_name("node_replacement_drained_together.json")


def one_node_held() -> ReplaceWorld:
    """three_dear_nodes, where a do-not-disrupt pod arrived on b after the plan: a and c go, b stays."""
    return arrived_do_not_disrupt(three_dear_nodes(), "b")


async def record_drains(env: WorkflowEnvironment, worker) -> tuple[ReplaceWorld, WorkflowHistory]:  # noqa: ANN001, F811
    """A multi-node consolidation of a, b and c whose re-check cancels b: the committed histories
    above are of these."""
    w = one_node_held()
    tq, _ = await worker(w)
    h = await start_many(env, tq)
    result = await h.result()
    assert result.phase == ScaleDownPhase.REMOVED and "2 of 3 nodes removed (a, c)" in result.message, result.message
    return w, await h.fetch_history()


# --- a plan the scheduler follows in one order only (ReplacementPlan.drain_order) ---------------

# A replacement of a whose plan names the order its two pods are evicted in.
DRAINED_IN_ORDER = HISTORY.with_name("node_replacement_drained_in_order.json")


def two_pods_in_order() -> ReplaceWorld:
    pods = [*busy("a", cpu=500), app_pod("a-cache", "a")]
    return world(pods=pods, order=["default/a-cache", "default/a-web"])


async def record_in_order(env: WorkflowEnvironment, worker) -> tuple[ReplaceWorld, WorkflowHistory]:  # noqa: ANN001, F811
    w = two_pods_in_order()
    tq, _ = await worker(w)
    h = await start_replace(env, tq)
    result = await h.result()
    assert result.phase == ScaleDownPhase.REMOVED, result.message
    return w, await h.fetch_history()


async def test_a_plan_that_names_an_order_is_evicted_in_it_once_the_node_is_cordoned(
    env: WorkflowEnvironment,
    worker,  # noqa: ANN001, F811
) -> None:
    """The one node's NodeScaleDown is gated as a command's: it cordons, then this workflow evicts the
    pods one at a time in the plan's order (evict_in_order waits for each to be bound again), then the
    drain takes what is left and deletes the node. The run and the committed one replay (python -m
    tests.workflows.nodes.test_node_replacement in-order records it)."""
    w, fresh = await record_in_order(env, worker)
    in_order = [n for c, n in w.calls if c == "evict-in-order"]
    assert in_order == ["default/a-cache@a", "default/a-web@a"]
    cordon, first, drain = calls_of(w, "cordon")[0], calls_of(w, "evict-in-order")[0], calls_of(w, "evict")
    assert cordon < first < min(drain), w.calls
    assert w.deleted == ["a"]
    await assert_replay(WORKFLOWS, fresh, committed(DRAINED_IN_ORDER))


async def test_a_plan_without_an_order_drains_as_before(env: WorkflowEnvironment, worker) -> None:  # noqa: ANN001, F811
    w = world(pods=[*busy("a", cpu=500), app_pod("a-cache", "a")])
    tq, _ = await worker(w)
    _, result = await replace(env, tq)
    assert result.phase == ScaleDownPhase.REMOVED, result.message
    assert not calls_of(w, "evict-in-order") and len(calls_of(w, "evict")) == 2


async def test_the_order_spares_the_pods_of_a_node_whose_recheck_kept_it(env: WorkflowEnvironment, worker) -> None:  # noqa: ANN001, F811
    """b's re-check cancels (a do-not-disrupt pod arrived): the ordered eviction is told only a and c."""
    w = one_node_held()
    w.order = ["default/b-web", "default/a-web", "default/c-web"]
    tq, _ = await worker(w)
    result = await consolidate_many(env, tq)
    assert result.phase == ScaleDownPhase.REMOVED and "2 of 3 nodes removed (a, c)" in result.message, result.message
    assert {n.partition("@")[2] for c, n in w.calls if c == "evict-in-order"} == {"a,c"}
    assert max(calls_of(w, "cordon")) < min(calls_of(w, "evict-in-order"))


# --- what a multi-node command tells its loop --------------------------------------------------


@workflow.defn(name="CommandReports", sandboxed=False)
class CommandReports:
    """Stands in for the NodeAutoscaler: the reports a command sends it, in order."""

    @workflow.init
    def __init__(self) -> None:
        self.reports: list[tuple[str, str]] = []

    @workflow.signal
    def scale_down_changed(self, status: ScaleDownStatus) -> None:
        self.reports.append((status.node, status.phase.value))

    @workflow.query
    def told(self) -> list[tuple[str, str]]:
        return self.reports

    @workflow.run
    async def run(self) -> None:
        await workflow.wait_condition(lambda: ("b", ScaleDownPhase.REMOVED.value) in self.reports)


def one_goes_alone() -> ReplaceWorld:
    """a and b are cx42 and c a cx22 beside them: a's pod (7,000m) fits no other node and needs a cx42 (no
    cheaper successor), b's two pods (600m each) fit c (b alone is deleted)."""
    w = three_dear_nodes()
    a, b, _ = w.plan_obs.nodes
    a = a.model_copy(update={"requested": Resources(cpu_m=7000, memory=GIB // 8, pods=1)})
    b = b.model_copy(update={"requested": Resources(cpu_m=1200, memory=GIB // 4, pods=2)})
    b_pods = [p.model_copy(update={"name": f"b-web-{i}", "uid": f"b-web-{i}"}) for i in (1, 2) for p in busy("b", 600)]
    pods = [*busy("a", cpu=7000), *b_pods]
    nodes, g = [a, b, node("c")], w.plan_obs.groups
    return ReplaceWorld(
        plan_obs=ScaleDownObservation(nodes=nodes, pods=pods, groups=g),
        down_obs=ScaleDownObservation(nodes=nodes, pods=pods, groups=g),
    )


async def run_one_goes_alone(env: WorkflowEnvironment, tq: str) -> tuple[WorkflowHandle, WorkflowHandle]:
    """A command holding a (the budget allows one) whose single-node fallback chooses b."""
    loop = await env.client.start_workflow(CommandReports.run, id=f"loop-{uuid.uuid4().hex[:6]}", task_queue=tq)
    now = (await env.get_current_time()).timestamp()
    a, b = (
        NodeScaleDownInput(
            cluster="c", node=n, group="g", kind="Consolidated", scale_down_at=now, parent_workflow_id=loop.id
        )
        for n in ("a", "b")
    )
    h = await env.client.start_workflow(
        NodeReplacementWorkflow.run,
        NodeReplacementInput(removal=a, others=[b], allowed=1, readiness_poll_s=1),
        id=f"nodes/c/replace/a-{uuid.uuid4().hex[:6]}",
        task_queue=tq,
    )
    return h, loop


async def test_a_command_holds_the_node_it_chose_before_it_releases_the_one_it_held(
    env: WorkflowEnvironment,
) -> None:
    """The consolidation bench counted a budget breach (seed 11): a command released the node the loop
    held for it before it told the loop of the node it chose, and the loop's evaluation in between
    started another disruption. The loop now counts the chosen node first."""
    w = one_goes_alone()
    tq = f"tq-{uuid.uuid4().hex[:6]}"
    async with new_worker(env.client, tq, workflows=[*WORKFLOWS, CommandReports], activities=w.activities()):
        h, loop = await run_one_goes_alone(env, tq)
        result = await h.result()
        await loop.result()
        reports = await loop.query(CommandReports.told)
    assert result.phase == ScaleDownPhase.REMOVED and w.deleted == ["b"], result.message
    held_b = reports.index(("b", ScaleDownPhase.MARKED.value))
    released_a = reports.index(("a", ScaleDownPhase.CANCELLED.value))
    assert held_b < released_a, reports
    # The loop's count of the command's nodes never fell to none before b was removed.
    held: set[str] = set()
    for node_name, phase in reports[: reports.index(("b", ScaleDownPhase.REMOVED.value))]:
        final = ScaleDownPhase(phase) in FINAL_SCALE_DOWN_PHASES
        held.discard(node_name) if final else held.add(node_name)
        assert held, reports


if __name__ == "__main__":
    import sys

    from temporalio.worker import Worker

    # `drains`: the multi-node consolidation's history (node_replacement_drained_together.json);
    # `in-order`: a plan that names its order (node_replacement_drained_in_order.json).
    recorder, path = {
        "drains": (record_drains, DRAINED_TOGETHER),
        "in-order": (record_in_order, DRAINED_IN_ORDER),
    }.get(" ".join(sys.argv[1:]), (record_history, HISTORY))

    async def record(env: WorkflowEnvironment) -> WorkflowHistory:
        workers: list[Worker] = []

        async def make(w: ReplaceWorld) -> tuple[str, list]:
            tq = f"tq-{uuid.uuid4().hex[:6]}"
            workers.append(new_worker(env.client, tq, activities=w.activities()))
            await workers[-1].__aenter__()
            return tq, []

        _, history = await recorder(env, make)
        for wk in workers:
            await wk.__aexit__(None, None, None)
        return history

    record_again(path, record)
