"""NodeGroupWithPriority and TidbClusterAutoScaler objects a user can write, through the real
loops: drawn from the CRDs' own schemas (deploy/crds) and beyond them (any JSON value at the
fields they type, unknown fields, a huge string), each served in turn to ONE running loop, which
is woken to read it. Never a crash or a failed workflow task: the loop goes on to its next
round after every object, and what the CRD's structural schema refuses ends as a status
condition (ComponentAutoscaler) or a group status (NodeAutoscaler: spec problems it reports)
naming the field the API server would name, or its parent. Seeded, bounded: 40 objects per
kind through one time-skipping server, one worker, one workflow (test_crd_objects.py runs many
more through the parsers alone).

The stubs stand for the API server: the components' get_autoscaler serves the drawn spec, and
the workflow parses it (scaling.components.spec); the nodes' observe_cluster parses the drawn
object with the function the real activity calls (scaling.nodes.nodegroups.load_node_groups)
and the workflow plans with what it accepts (headroom included) and reports what it refuses."""

from __future__ import annotations

import copy
import uuid
from typing import Any

import jsonschema
from hypothesis import HealthCheck, Phase, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from temporalio import activity
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowHandle
from temporalio.testing import WorkflowEnvironment

from scaling.components.state import ComponentAutoscalerInput, ComponentAutoscalerSettings
from scaling.nodes import contracts as node_contracts
from scaling.nodes.contracts import ClusterObservation, ObserveInput
from scaling.nodes.nodegroups import load_node_groups
from scaling.nodes.settings import AutoscalerSettings
from scaling.nodes.state import AutoscalerInput
from tests.fuzz.test_crd_objects import (
    JSON,
    NGWP_SPEC,
    NGWP_TYPED,
    PROVIDERS,
    TCAS_SPEC,
    TCAS_TYPED,
    VALID_GROUP,
    VALID_TCAS,
    from_schema,
    group,
    pruned,
    put,
)
from tests.fuzz.test_loop_messages import no_failed_tasks
from tests.polling import until
from tests.workflows.components.stubs import ComponentsWorld
from tests.workflows.nodes.stubs import World
from tests.workflows.workers import new_worker
from worker import worker_interceptors
from workflows.components.autoscaler import ComponentAutoscalerWorkflow
from workflows.nodes.autoscaler import NodeAutoscalerWorkflow

PER_SOURCE = 20  # objects drawn from the CRD's schema, and as many with garbage at typed fields


def drawn(strategy: st.SearchStrategy[Any], n: int) -> list[Any]:
    """`n` values of `strategy`, the same every run (derandomized, no database)."""
    out: list[Any] = []

    @hsettings(
        max_examples=n,
        derandomize=True,
        database=None,
        deadline=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(strategy)
    def collect(value: Any) -> None:
        out.append(value)

    collect()
    return out


def garbage_at(valid: dict[str, Any], fields: list[tuple[str, str]]) -> st.SearchStrategy[dict[str, Any]]:
    def build(choice: tuple[tuple[str, str], Any]) -> dict[str, Any]:
        (where, key), value = choice
        spec = copy.deepcopy(valid)
        put(spec, where, key, value)
        return spec

    return st.tuples(st.sampled_from(fields), JSON).map(build)


HUGE = "x" * 200_000  # an object the API server takes (under its 1.5 MB), over what growth reads


def specs(schema: dict[str, Any], valid: dict[str, Any], fields: list[tuple[str, str]], huge: str) -> list[Any]:
    """Drawn from the schema, garbage at its typed fields, an unknown field, a huge string."""
    big = copy.deepcopy(valid)
    put(big, huge, "blob", HUGE)
    unknown = {**copy.deepcopy(valid), "notAField": {"x": 1}}  # pruned by the API server, ignored
    return drawn(from_schema(schema), PER_SOURCE) + drawn(garbage_at(valid, fields), PER_SOURCE) + [unknown, big]


def refused_paths(schema: dict[str, Any], spec: Any) -> list[str]:
    """Where the API server refuses `spec`, or "spec" for one too large for growth to read."""
    return refused_at(schema, spec) or (["spec"] if HUGE in str(spec) else [])


def refused_at(schema: dict[str, Any], spec: Any) -> list[str]:
    """The fields the API server's structural schema refuses, in its own notation (spec.a[0].b)."""
    return [
        "spec" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in err.absolute_path)
        for err in jsonschema.Draft7Validator(schema).iter_errors(pruned(spec))
    ]


def names_one_of(named: list[str], paths: list[str]) -> bool:
    """A named field is one the schema refuses, or its parent, or inside it."""
    return any(
        f == p or p.startswith((f + ".", f + "[")) or f.startswith((p + ".", p + "[")) for f in named for p in paths
    )


async def test_autoscalers_through_one_running_loop_end_as_conditions_naming_the_field(
    env: WorkflowEnvironment,
) -> None:
    world = ComponentsWorld(spec=copy.deepcopy(VALID_TCAS), base=VALID_TCAS["cluster"]["name"], load={"tikv": 3.0})
    tq = f"tq-{uuid.uuid4().hex[:6]}"
    async with new_worker(env.client, tq, activities=world.activities(), interceptors=worker_interceptors()):
        settings = ComponentAutoscalerSettings(
            namespace="ns", name="tas", scan_interval_s=3600, iterations_per_run=1000
        )
        handle = await env.client.start_workflow(
            ComponentAutoscalerWorkflow.run,
            ComponentAutoscalerInput(settings=settings),
            id=f"components-{uuid.uuid4().hex[:6]}",
            task_queue=tq,
        )
        loop = Waits(handle)
        await loop.round_over()
        refused = 0
        for spec in specs(TCAS_SPEC, VALID_TCAS, TCAS_TYPED, "tikv"):
            world.spec = spec
            world.base = cluster_named(spec, world.base)  # its TidbCluster exists: the whole spec is read
            await handle.execute_update(ComponentAutoscalerWorkflow.resume)  # wakes it; changes nothing
            await loop.round_over()
            condition = world.last_status()["conditions"][0]
            paths = refused_paths(TCAS_SPEC, spec)
            if paths:
                refused += 1
                assert condition["status"] == "False" and condition["reason"] == "InvalidSpec", (spec, condition)
                assert names_one_of(fields_in(condition["message"]), paths), (paths, condition["message"])
        assert refused >= PER_SOURCE // 2  # the garbage half is mostly refused: the test is not vacuous
        # Still serving: a valid object is read, and the condition clears.
        world.spec, world.base = copy.deepcopy(VALID_TCAS), VALID_TCAS["cluster"]["name"]
        await handle.execute_update(ComponentAutoscalerWorkflow.resume)
        await loop.round_over()
        assert world.last_status()["conditions"][0]["status"] == "True"
        assert (await handle.query(ComponentAutoscalerWorkflow.status)).rounds == 2 * PER_SOURCE + 4
        await no_failed_tasks(handle)
        await handle.terminate()


def cluster_named(spec: Any, otherwise: str) -> str:
    name = (
        spec.get("cluster", {}).get("name")
        if isinstance(spec, dict) and isinstance(spec.get("cluster"), dict)
        else None
    )
    return name if isinstance(name, str) and name else otherwise


def fields_in(message: str) -> list[str]:
    """The fields a condition's message names ("spec.a.b: reason; spec.c: reason")."""
    return [part.strip().split(":", 1)[0] for part in message.split(";") if part.strip().startswith("spec")]


class Waits:
    """A loop's history: a round is over when the loop starts its next wait's timer (nothing else
    in a round starts one). Each wake is sent once the loop waits, so each starts one round."""

    def __init__(self, handle: WorkflowHandle) -> None:
        self.handle = handle
        self.timers = 0

    async def round_over(self) -> None:
        self.timers = await until(self._more_timers, timeout=60, what="the loop's next wait", every=0.02)

    async def _more_timers(self) -> int:
        started = EventType.EVENT_TYPE_TIMER_STARTED
        n = len([e async for e in self.handle.fetch_history_events() if e.event_type == started])
        return n if n > self.timers else 0


async def test_node_groups_through_one_running_loop_end_as_problems_naming_the_field(
    env: WorkflowEnvironment,
) -> None:
    world = World()
    served: dict[str, Any] = {"spec": copy.deepcopy(VALID_GROUP["spec"])}
    base = [a for a in world.activities() if activity._Definition.must_from_callable(a).name != "observe_cluster"]
    stub_observe = next(a for a in world.activities() if activity._Definition.must_from_callable(a).name == "observe_cluster")  # fmt: skip

    @activity.defn(name=node_contracts.OBSERVE_CLUSTER)
    async def observe_cluster(inp: ObserveInput | str) -> ClusterObservation:
        """The API server's one NodeGroupWithPriority, parsed as the real observer parses it."""
        groups, problems = load_node_groups([group(served["spec"])], PROVIDERS)
        world.observation = ClusterObservation(groups=groups, invalid_groups=problems)
        return await stub_observe(inp)

    tq, cluster = f"tq-{uuid.uuid4().hex[:6]}", f"c{uuid.uuid4().hex[:6]}"
    async with new_worker(env.client, tq, activities=[*base, observe_cluster], interceptors=worker_interceptors()):
        settings = AutoscalerSettings(cluster=cluster, scan_interval_s=3600, machine_gc=False, iterations_per_run=1000)
        handle = await env.client.start_workflow(
            NodeAutoscalerWorkflow.run, AutoscalerInput(settings=settings), id=f"nodes/{cluster}", task_queue=tq
        )
        loop = Waits(handle)
        await loop.round_over()
        refused = 0
        for spec in specs(NGWP_SPEC, VALID_GROUP["spec"], NGWP_TYPED, "pools.0"):
            served["spec"] = spec
            await handle.signal(NodeAutoscalerWorkflow.scan_now)
            await loop.round_over()
            status = await handle.query(NodeAutoscalerWorkflow.status)
            paths = refused_paths(NGWP_SPEC, spec)
            if paths:
                refused += 1
                named = [p.field for p in status.invalid_groups]
                assert named and names_one_of(named, paths), (paths, status.invalid_groups)
                assert world.group_problems and world.group_problems[-1] == status.invalid_groups  # reported
        assert refused >= PER_SOURCE // 2
        served["spec"] = copy.deepcopy(VALID_GROUP["spec"])
        await handle.signal(NodeAutoscalerWorkflow.scan_now)
        await loop.round_over()
        status = await handle.query(NodeAutoscalerWorkflow.status)
        assert not status.invalid_groups and world.group_problems[-1] == []  # the group's status cleared
        assert status.iterations == 2 * PER_SOURCE + 4  # one per object, the first and the last
        await no_failed_tasks(handle)
        await handle.terminate()
