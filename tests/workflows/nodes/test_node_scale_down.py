"""NodeScaleDown and the NodeAutoscaler's scale-down half on the time-skipping server.

Kubernetes and provider activities are stubs under the real names; the rules are the real ones."""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime

import pytest
from temporalio import activity
from temporalio.client import WorkflowHandle
from temporalio.exceptions import ApplicationError
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from activities.nodes.scale_down import removals_ended
from scaling.kube.drain import TAINT_DELETION_CANDIDATE, PdbInfo
from scaling.kube.models import NodeInfo, PodInfo, Resources, Taint
from scaling.nodes.contracts import (
    ClusterObservation,
    DeleteNodeInput,
    DisruptedTaintInput,
    EvictInOrderInput,
    EvictPodInput,
    EvictResult,
    MarkNodeInput,
    NodeEvent,
    NodeEventsInput,
    NodeRef,
    NodeRemovalCheck,
    NodeRemovalCheckInput,
    OrderedEviction,
    OrphanObservation,
    ScaleDownEvaluation,
    ScaleDownEvaluationInput,
    ScaleDownObservation,
    SoftTaintInput,
    UnmarkNodeInput,
    WaitPodsGoneInput,
)
from scaling.nodes.gc.orphans import Orphan, OrphanSearchInput, find_orphans
from scaling.nodes.models import LABEL_GROUP, LABEL_POOL, NodeGroup, PoolSpec
from scaling.nodes.scale_down.evaluation import check_node_removal, evaluate_scale_down
from scaling.nodes.scale_down.removals import NodeScaleDownInput, ScaleDownPhase
from scaling.nodes.settings import AutoscalerSettings
from scaling.nodes.state import AutoscalerInput
from tests.workflows.cleanup import stop_worker, terminate_runs
from tests.workflows.nodes.stubs import World
from tests.workflows.replayer import new_replayer
from tests.workflows.workers import new_worker
from workflows.all import WORKFLOWS
from workflows.nodes.autoscaler import NodeAutoscalerWorkflow
from workflows.nodes.scale_down import NodeScaleDownWorkflow

GIB = 1 << 30
GROUP = NodeGroup(name="g", pools=[PoolSpec(provider="kwok", serverType=["cx22"], priority=10)])


def node(name: str, managed: bool = True) -> NodeInfo:
    labels = {LABEL_GROUP: "g", LABEL_POOL: "kwok-cx22"} if managed else {}
    return NodeInfo(
        name=name,
        labels=labels,
        ready=True,
        provider_id=f"kwok://{name}",
        allocatable=Resources(cpu_m=2000, memory=4 * GIB, pods=110),
    )


def app_pod(name: str, on: str, labels: dict[str, str] | None = None) -> PodInfo:
    return PodInfo(
        namespace="default",
        name=name,
        uid=name,
        node_name=on,
        phase="Running",
        controller_kind="ReplicaSet",
        labels=labels or {"app": "web"},
        requests=Resources(cpu_m=100, memory=GIB // 8, pods=1),
    )


def ds_pod(name: str, on: str) -> PodInfo:
    return PodInfo(
        namespace="kube-system",
        name=name,
        uid=name,
        node_name=on,
        phase="Running",
        controller_kind="DaemonSet",
        is_daemonset=True,
    )


@dataclass
class DownWorld(World):
    """The scale-up stubs plus the scale-down ones."""

    down_obs: ScaleDownObservation = field(default_factory=ScaleDownObservation)
    refuse: set[str] = field(default_factory=set)  # pods whose eviction a PDB refuses
    provider_failures: int = 0  # delete_node raises this many times first
    calls: list[tuple[str, str]] = field(default_factory=list)
    node_events: list[NodeEvent] = field(default_factory=list)
    observe_gate: asyncio.Event | None = None  # evaluate_scale_down waits on it when set
    observing: int = 0  # evaluate_scale_down calls under way
    evaluations: list[ScaleDownEvaluation] = field(default_factory=list)  # what the loop got back
    machines: OrphanObservation = field(default_factory=OrphanObservation)  # what find_orphans looks at
    marks_lifted: list[str] = field(default_factory=list)  # taint_disrupted's lifts with the deletion marks
    soft_taints: list[tuple[str, str]] = field(default_factory=list)  # ("taint" | "untaint", node), in order

    def activities(self) -> list:
        w = self
        base = [a for a in super().activities() if activity._Definition.from_callable(a).name != "delete_node"]

        @activity.defn(name="delete_node")
        async def delete_node(inp: DeleteNodeInput) -> None:
            if w.provider_failures > 0:
                w.provider_failures -= 1
                raise ApplicationError("provider says 503")
            w.deleted.append(inp.node_name)

        @activity.defn(name="evaluate_scale_down")
        async def evaluate(inp: ScaleDownEvaluationInput) -> ScaleDownEvaluation:
            # The real activity's evaluation, on the world's observation instead of a cluster's.
            w.observing += 1
            try:
                if w.observe_gate is not None:
                    await w.observe_gate.wait()
                ev = evaluate_scale_down(w.down_obs, inp)
                ev.view = w.observation.scale_down_view  # the token the worker's cache gives
                w.evaluations.append(ev)
                return ev
            finally:
                w.observing -= 1

        @activity.defn(name="check_node_removal")
        async def check(inp: NodeRemovalCheckInput) -> NodeRemovalCheck:
            w.calls.append(("check", inp.node))
            return check_node_removal(w.down_obs, inp)

        @activity.defn(name="mark_node_for_scale_down")
        async def mark(inp: MarkNodeInput) -> bool:
            w.calls.append(("soft-mark" if inp.candidate else "mark", inp.node))
            return True

        @activity.defn(name="unmark_node")
        async def unmark(inp: UnmarkNodeInput) -> None:
            w.calls.append(("unmark+uncordon" if inp.uncordon else "unmark", inp.node))

        @activity.defn(name="cordon_node")
        async def cordon(inp: NodeRef) -> None:
            w.calls.append(("cordon", inp.node))

        @activity.defn(name="taint_disrupted")
        async def taint_disrupted(inp: DisruptedTaintInput) -> list[str]:
            w.calls.extend(("disrupted" if inp.present else "undisrupted", n) for n in inp.nodes)
            if inp.marks:
                w.marks_lifted.extend(inp.nodes)
            return inp.nodes

        @activity.defn(name="update_soft_deletion_taints")
        async def soft_taints(inp: SoftTaintInput) -> list[str]:
            w.soft_taints.extend([*(("untaint", n) for n in inp.untaint), *(("taint", n) for n in inp.taint)])
            soft = Taint(key=TAINT_DELETION_CANDIDATE, value="1", effect="PreferNoSchedule")

            def applied(n: NodeInfo) -> NodeInfo:  # as the API server has the node afterwards
                kept = [t for t in n.taints if t.key != TAINT_DELETION_CANDIDATE or n.name not in inp.untaint]
                return n.model_copy(update={"taints": [*kept, soft] if n.name in inp.taint else kept})

            w.down_obs = w.down_obs.model_copy(update={"nodes": [applied(n) for n in w.down_obs.nodes]})
            return [*inp.untaint, *inp.taint]

        @activity.defn(name="evict_pod")
        async def evict(inp: EvictPodInput) -> EvictResult:
            key = f"{inp.namespace}/{inp.name}"
            if key in w.refuse:
                return EvictResult(
                    outcome="refused", message="Cannot evict pod as it would violate the pod's disruption budget."
                )
            w.calls.append(("evict", key))
            return EvictResult(outcome="evicted")

        @activity.defn(name="evict_in_order")
        async def evict_in_order(inp: EvictInOrderInput) -> list[OrderedEviction]:
            w.calls.extend(("evict-in-order", f"{key}@{','.join(inp.nodes)}") for key in inp.pods)
            return [OrderedEviction(pod=key, outcome="evicted", at=0.0) for key in inp.pods]

        @activity.defn(name="wait_pods_gone")
        async def wait_gone(inp: WaitPodsGoneInput) -> list[str]:
            return []

        @activity.defn(name="delete_node_object")
        async def delete_obj(inp: NodeRef) -> None:
            w.calls.append(("delete-node", inp.node))

        @activity.defn(name="emit_node_events")
        async def events(inp: NodeEventsInput) -> None:
            w.node_events.extend(inp.events)

        @activity.defn(name="find_orphans")
        async def find(inp: OrphanSearchInput) -> list[Orphan]:
            # The real activity's search, on the world's nodes and machines.
            return find_orphans(w.machines, inp)

        return base + [
            delete_node,
            evaluate,
            check,
            mark,
            unmark,
            cordon,
            taint_disrupted,
            soft_taints,
            evict,
            evict_in_order,
            wait_gone,
            delete_obj,
            events,
            find,
            removals_ended,  # the real one: it describes the removals on the test's own server
        ]


@pytest.fixture
async def worker(env: WorkflowEnvironment):
    made: list[tuple[Worker, list[WorkflowHandle]]] = []

    async def _make(world: DownWorld) -> tuple[str, list[WorkflowHandle]]:
        tq = f"tq-{uuid.uuid4().hex[:6]}"
        w = new_worker(env.client, tq, activities=world.activities())
        await w.__aenter__()
        handles: list[WorkflowHandle] = []
        made.append((w, handles))
        return tq, handles

    yield _make
    for w, handles in made:
        await terminate_runs(env.client, [h.id for h in handles])
        await stop_worker(w)


async def run_child(env: WorkflowEnvironment, tq: str, inp: NodeScaleDownInput) -> WorkflowHandle:
    return await env.client.start_workflow(
        NodeScaleDownWorkflow.run, inp, id=f"sd-{uuid.uuid4().hex[:6]}", task_queue=tq
    )


async def test_empty_node_waits_then_is_drained_and_deleted(env: WorkflowEnvironment, worker) -> None:  # noqa: ANN001
    world = DownWorld(
        down_obs=ScaleDownObservation(nodes=[node("a"), node("b")], pods=[ds_pod("ds-a", "a")], groups=[GROUP])
    )
    tq, _ = await worker(world)
    now = (await env.get_current_time()).timestamp()
    h = await run_child(env, tq, NodeScaleDownInput(cluster="c", node="a", scale_down_at=now + 600, kind="Empty"))
    result = await h.result()
    assert result.phase == ScaleDownPhase.REMOVED
    # Order matters: soft-tainted for the wait, tainted hard before the re-check beside the cluster,
    # then cordoned; the machine deleted before the Node object.
    names = [c for c, n in world.calls if n == "a"]
    assert names == ["soft-mark", "mark", "check", "cordon", "delete-node"]
    assert world.deleted == ["a"]
    assert not any(c == "evict" for c, _ in world.calls)  # DaemonSet pods go with the node
    assert [e.reason for e in world.node_events] == ["ScaleDown", "ScaleDown"]
    # The durable timer really ran: the workflow ended after ScaleDownAt.
    assert (await env.get_current_time()).timestamp() >= now + 600
    # The soft mark's branch (patch soft-mark-while-waiting) replays as it ran; 0.2.0's recording
    # (histories/nodes_NodeScaleDown.json, test_replay) replays the old one.
    history = await h.fetch_history()
    patches = [
        e.marker_recorded_event_attributes.marker_name
        for e in history.events
        if e.HasField("marker_recorded_event_attributes")
    ]
    assert patches == ["core_patch"]
    await new_replayer(WORKFLOWS).replay_workflow(history)


async def test_a_drain_gate_that_cannot_be_told_does_not_hold_the_drain(env: WorkflowEnvironment, worker) -> None:  # noqa: ANN001
    """A multi-node command's node tells its NodeReplacement (``drain_gate``) once cordoned and waits for
    the word to drain; a gate that is gone can never give it, so the drain goes on at once."""
    world = DownWorld(
        down_obs=ScaleDownObservation(nodes=[node("a"), node("b")], pods=[ds_pod("ds-a", "a")], groups=[GROUP])
    )
    tq, _ = await worker(world)
    now = (await env.get_current_time()).timestamp()
    inp = NodeScaleDownInput(cluster="c", node="a", scale_down_at=now, kind="Empty", drain_gate="nodes/c/replace/gone")
    result = await (await run_child(env, tq, inp)).result()
    assert result.phase == ScaleDownPhase.REMOVED, result.message
    assert [c for c, n in world.calls if n == "a"] == ["mark", "check", "cordon", "delete-node"]


async def test_long_terminating_pod_neither_cancels_nor_is_waited_for(env: WorkflowEnvironment, worker) -> None:  # noqa: ANN001
    """A pod deleted long ago (its kubelet gone) stays listed on the node: Cluster Autoscaler's
    rule treats it as gone, so the empty node is still removed and the drain does not evict it
    or wait for it."""
    now = (await env.get_current_time()).timestamp()
    stuck = app_pod("stuck", "a").model_copy(
        update={"controller_kind": None, "deletion_timestamp": datetime.fromtimestamp(now - 3600, UTC)}
    )
    world = DownWorld(
        down_obs=ScaleDownObservation(nodes=[node("a"), node("b")], pods=[ds_pod("ds-a", "a"), stuck], groups=[GROUP])
    )
    tq, _ = await worker(world)
    h = await run_child(env, tq, NodeScaleDownInput(cluster="c", node="a", scale_down_at=now + 60, kind="Empty"))
    result = await h.result()
    assert result.phase == ScaleDownPhase.REMOVED, result.message
    assert world.deleted == ["a"]
    assert not any(c == "evict" for c, _ in world.calls) and result.evicted == []


async def test_pod_landing_during_the_wait_cancels_and_unmarks(env: WorkflowEnvironment, worker) -> None:  # noqa: ANN001
    world = DownWorld(
        down_obs=ScaleDownObservation(nodes=[node("a"), node("b")], pods=[app_pod("web-1", "a")], groups=[GROUP])
    )
    tq, _ = await worker(world)
    now = (await env.get_current_time()).timestamp()
    h = await run_child(env, tq, NodeScaleDownInput(cluster="c", node="a", scale_down_at=now + 600, kind="Empty"))
    result = await h.result()
    assert result.phase == ScaleDownPhase.CANCELLED and result.reason == "PodsLandedOnNode"
    assert ("unmark", "a") in world.calls and ("cordon", "a") not in world.calls
    assert world.deleted == []
    assert world.node_events[-1].reason == "ScaleDownBlocked" and "web-1" in world.node_events[-1].message


async def test_pdb_refusal_is_retried_for_a_bounded_time_then_the_node_is_kept(
    env: WorkflowEnvironment, worker
) -> None:  # noqa: ANN001
    pods = [app_pod("web-1", "a"), app_pod("web-2", "a")]
    world = DownWorld(
        down_obs=ScaleDownObservation(
            nodes=[node("a"), node("b")],
            pods=pods,
            groups=[GROUP],
            pdbs=[PdbInfo(namespace="default", name="web", disruptions_allowed=5)],
        ),
        refuse={"default/web-2"},
    )
    tq, _ = await worker(world)
    now = (await env.get_current_time()).timestamp()
    h = await run_child(
        env,
        tq,
        NodeScaleDownInput(
            cluster="c", node="a", scale_down_at=now, kind="Underused", pdb_retry_s=60, eviction_retry_s=5
        ),
    )
    result = await h.result()
    assert result.phase == ScaleDownPhase.FAILED and result.reason == "NotEnoughPdb"
    assert result.evicted == ["default/web-1"]
    assert 10 <= result.evictions_refused <= 14  # every 5 s for 60 s
    assert ("unmark+uncordon", "a") in world.calls
    assert world.deleted == [] and ("delete-node", "a") not in world.calls
    assert world.node_events[-1].reason == "ScaleDownFailed"


async def test_provider_delete_failures_are_retried_reported_and_delete_once(env: WorkflowEnvironment, worker) -> None:  # noqa: ANN001
    world = DownWorld(
        down_obs=ScaleDownObservation(nodes=[node("a"), node("b")], pods=[], groups=[GROUP]), provider_failures=4
    )
    tq, _ = await worker(world)
    now = (await env.get_current_time()).timestamp()
    h = await run_child(env, tq, NodeScaleDownInput(cluster="c", node="a", scale_down_at=now, kind="Empty"))
    result = await h.result()
    assert result.phase == ScaleDownPhase.REMOVED
    assert result.provider_delete_failures == 1  # one round of 3 tries failed, the next worked
    assert "503" in result.last_error
    assert world.deleted == ["a"]
    assert any(e.reason == "ScaleDownFailed" and "503" in e.message for e in world.node_events)


# -- through the NodeAutoscaler --------------------------------------------------------------


async def start_autoscaler(
    env: WorkflowEnvironment, world: DownWorld, handles: list, tq: str, **settings
) -> WorkflowHandle:
    cluster = f"c{uuid.uuid4().hex[:6]}"
    h = await env.client.start_workflow(
        NodeAutoscalerWorkflow.run,
        AutoscalerInput(
            settings=AutoscalerSettings(**{"cluster": cluster, "scan_interval_s": 1, "machine_gc": False, **settings})
        ),
        id=f"nodes/{cluster}",
        task_queue=tq,
    )
    handles.append(h)
    return h


def observed(world: DownWorld, nodes: list[NodeInfo], pods: list[PodInfo]) -> None:
    world.observation = ClusterObservation(nodes=nodes, groups=[GROUP])
    world.down_obs = ScaleDownObservation(nodes=nodes, pods=pods, groups=[GROUP], storage=world.down_obs.storage)
