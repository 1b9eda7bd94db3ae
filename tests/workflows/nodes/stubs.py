"""The nodes loop's World: stub activities registered under the contract names
(scaling.nodes.contracts), scripted per test."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from temporalio import activity
from temporalio.client import WorkflowHandle
from temporalio.exceptions import ApplicationError
from temporalio.testing import WorkflowEnvironment

from activities.nodes.planning import plan_scale_up
from activities.nodes.requests import report_to_loop, start_node_requests
from scaling.kube.models import NodeInfo, Resources
from scaling.nodes import contracts
from scaling.nodes.contracts import (
    ClusterObservation,
    CreateNodeInput,
    CreateNodeResult,
    DeleteNodeInput,
    GroupStatusInput,
    ObserveInput,
    PodEvent,
    PodEventsInput,
    WaitNodesReadyInput,
    WaitReadyInput,
)
from scaling.nodes.headroom import headroom_pods
from scaling.nodes.models import ServerType, SpecProblem
from scaling.nodes.providers.kwok import kwok_catalogue
from scaling.nodes.scale_up.decision import ScaleUpDecision, ScaleUpInput
from scaling.nodes.scale_up.demand import MAX_SHAPES, SHAPE_SAMPLE, observe_demand
from scaling.nodes.state import requests_with_ready_node
from tests.workflows.workers import new_worker


@dataclass
class World:
    """What the stubs answer, and what they were asked to do."""

    no_capacity_pools: set[str] = field(default_factory=set)
    quota_pools: set[str] = field(default_factory=set)
    never_ready_pools: set[str] = field(default_factory=set)
    hold_readiness: bool = False  # wait_node_ready blocks (heartbeating) until released
    hold_observe: asyncio.Event | None = None  # observe_cluster answers once it is set
    observation: ClusterObservation = field(default_factory=ClusterObservation)
    created: list[CreateNodeInput] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    labelled: dict[str, dict[str, str]] = field(default_factory=dict)
    events: list[PodEvent] = field(default_factory=list)
    group_problems: list[list[SpecProblem]] = field(default_factory=list)
    observe_calls: int = 0
    observe_fresh: list[dict[str, str]] = field(default_factory=list)  # ObserveInput.fresh per call
    catalogue_calls: int = 0
    # (request id, pool): that request's creates there answer no capacity (a batch member's own).
    no_capacity_requests: set[tuple[str, str]] = field(default_factory=set)
    # (request id, attempt) -> node name: the provider's idempotency key, as the real providers
    # derive a machine's name or label from both; a repeated create finds the machine.
    machines: dict[tuple[str, int], str] = field(default_factory=dict)
    lost_create_answers: int = 0  # the next N new machines are made, then the answer is lost
    crash_after_create: set[str] = field(default_factory=set)  # request ids: make it, then hang
    crashed: asyncio.Event = field(default_factory=asyncio.Event)
    readiness_rounds: list[list[str]] = field(default_factory=list)  # wait_nodes_ready's nodes per call
    # Nodes labelled Ready join the observation full (other pods took their room): the pods stay
    # pending and the loop plans again. Otherwise the observation never shows them, and a request
    # that reported Ready covers its pods for LANDING_HOLD_S, as for a cache that lags.
    ready_nodes_join_full: bool = False
    plan_s: float = 0.0  # the scale-up decision takes this long (wall clock)

    def activities(self) -> list:
        world = self

        @activity.defn(name=contracts.PLAN_SCALE_UP)
        async def plan(inp: ScaleUpInput) -> ScaleUpDecision:
            await asyncio.sleep(world.plan_s)
            return await plan_scale_up(inp)  # the real one: the loop's decision

        @activity.defn(name=contracts.CREATE_NODE)
        async def create_node(inp: CreateNodeInput) -> CreateNodeResult:
            world.created.append(inp)
            if (
                inp.pool.name in world.no_capacity_pools
                or (inp.request_id, inp.pool.name) in world.no_capacity_requests
            ):
                return CreateNodeResult(outcome="no_capacity", message=f"{inp.pool.name} is full")
            if inp.pool.name in world.quota_pools:
                return CreateNodeResult(outcome="quota_exceeded", message="server limit reached")
            key = (inp.request_id, inp.attempt)
            name = world.machines.get(key)
            if name is None:
                name = world.machines[key] = f"{inp.pool.name}-{len(world.created)}"
                if world.lost_create_answers > 0:
                    world.lost_create_answers -= 1
                    raise ApplicationError("connection reset before the provider's answer")
                if inp.request_id in world.crash_after_create:
                    # The machine exists; the worker dies before the answer reaches the server.
                    world.crash_after_create.discard(inp.request_id)
                    world.crashed.set()
                    try:
                        await asyncio.Event().wait()
                    except asyncio.CancelledError:
                        raise RuntimeError("worker went away before answering") from None
            return CreateNodeResult(outcome="created", node_name=name, provider_id=f"kwok://{name}")

        @activity.defn(name=contracts.WAIT_NODE_READY)
        async def wait_node_ready(inp: WaitReadyInput) -> bool:
            await report_to_loop(inp)  # the real one: it signals the loop on the test's own server
            while world.hold_readiness:
                activity.heartbeat()
                await asyncio.sleep(0.05)
            ready = not any(inp.node_name.startswith(p + "-") for p in world.never_ready_pools)
            if ready and inp.labels:  # as the real wait does once the node is Ready
                world.labelled[inp.node_name] = inp.labels
            return ready

        @activity.defn(name=contracts.WAIT_NODES_READY)
        async def wait_nodes_ready(inp: WaitNodesReadyInput) -> dict[str, bool]:
            world.readiness_rounds.append([w.node_name for w in inp.nodes])
            while world.hold_readiness:
                activity.heartbeat()
                await asyncio.sleep(0.05)
            settled: dict[str, bool] = {}
            for w in inp.nodes:
                settled[w.node_name] = not any(w.node_name.startswith(p + "-") for p in world.never_ready_pools)
                if settled[w.node_name] and w.labels:
                    world.labelled[w.node_name] = w.labels
            return settled

        @activity.defn(name=contracts.DELETE_NODE)
        async def delete_node(inp: DeleteNodeInput) -> None:
            world.deleted.append(inp.node_name)

        @activity.defn(name=contracts.OBSERVE_CLUSTER)
        async def observe_cluster(inp: ObserveInput | str) -> ClusterObservation:
            world.observe_calls += 1
            if world.hold_observe is not None:
                await world.hold_observe.wait()
            requests = {} if isinstance(inp, str) else inp.requests
            world.observe_fresh.append({} if isinstance(inp, str) else dict(inp.fresh))
            # Aggregated as the real observer does: tests describe pods and nodes one by one.
            obs = world.observation
            if world.ready_nodes_join_full:
                joined = [
                    NodeInfo(name=name, labels=labels, ready=True, allocatable=Resources(cpu_m=100, memory=1, pods=1))
                    for name, labels in world.labelled.items()
                ]
                obs = obs.model_copy(update={"nodes": [*obs.nodes, *joined]})
            demand = observe_demand(
                obs.unschedulable,
                obs.nodes,
                virtual=headroom_pods(obs.groups),
                sample=SHAPE_SAMPLE,
                max_shapes=MAX_SHAPES,
            )
            return obs.model_copy(
                update={
                    "demand": demand,
                    "unschedulable": [],
                    "nodes": [],
                    "requests_with_ready_node": requests_with_ready_node(requests, obs.nodes),
                    # As a watch-fed cache reports them: a version per kind, newer each call.
                    "resource_versions": {"pods": str(100 + world.observe_calls), "nodes": "7"},
                }
            )

        @activity.defn(name=contracts.GET_CATALOGUE)
        async def get_catalogue(providers: list[str]) -> list[ServerType]:
            world.catalogue_calls += 1
            return [t for t in kwok_catalogue() if t.provider in providers]

        @activity.defn(name=contracts.EMIT_POD_EVENTS)
        async def emit_pod_events(inp: PodEventsInput) -> None:
            world.events.extend(inp.events)

        @activity.defn(name=contracts.REPORT_NODE_GROUP_STATUS)
        async def report_node_group_status(inp: GroupStatusInput) -> None:
            world.group_problems.append(inp.problems)

        return [
            create_node,
            wait_node_ready,
            wait_nodes_ready,
            delete_node,
            observe_cluster,
            get_catalogue,
            emit_pod_events,
            report_node_group_status,
            start_node_requests,  # the real one: it starts the requests on the test's own server
            plan,
        ]


@asynccontextmanager
async def started(
    env: WorkflowEnvironment, workflow: Any, inp: Any, world: World, **worker_kw: Any
) -> AsyncIterator[WorkflowHandle]:
    """`workflow` started on `inp` (its id inp.id) and run by a worker of its own, on a task queue of
    its own, with `world`'s stubs, for as long as the block lasts."""
    tq = f"tq-{uuid.uuid4().hex[:6]}"
    async with new_worker(env.client, tq, workflows=[workflow], activities=world.activities(), **worker_kw):
        yield await env.client.start_workflow(workflow.run, inp, id=inp.id, task_queue=tq)
