"""On the real dev server (the time-skipping server keeps no summaries): a NodeRequest started
the loop's way reads in the Web UI without a query: its list line names type, pods, group and
pool; its details follow its phase, and once finished it says so (details and GrowthPhase) for
as long as its record is kept."""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from contextlib import suppress

from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import AddSearchAttributesRequest
from temporalio.api.sdk.v1 import WorkflowMetadata
from temporalio.client import WorkflowExecutionStatus, WorkflowHandle
from temporalio.service import RPCError
from temporalio.testing import ActivityEnvironment, WorkflowEnvironment

from activities.nodes.requests import start_node_requests
from scaling.nodes.scale_up.requests import StartRequestsInput
from tests.workflows.nodes.stubs import World
from tests.workflows.nodes.test_node_request import pools, request
from tests.workflows.nodes.test_node_request_batch import batch
from tests.workflows.workers import new_worker
from workflows.nodes.request import NodeRequestWorkflow
from workflows.nodes.request_batch import NodeRequestBatchWorkflow
from workflows.search import ALL, PHASE


async def web_ui(handle: WorkflowHandle) -> tuple[str | None, str | None, str]:
    """What the Web UI shows: the list's summary, the page's fixed details, the current details."""
    desc = await handle.describe()
    meta = await handle.query("__temporal_workflow_metadata", result_type=WorkflowMetadata)
    return await desc.static_summary(), await desc.static_details(), meta.current_details


async def wait_details(handle: WorkflowHandle, prefix: str, timeout: float = 60) -> str:
    deadline = asyncio.get_running_loop().time() + timeout
    details = ""
    while not details.startswith(prefix):
        assert asyncio.get_running_loop().time() < deadline, f"details never began {prefix!r}: {details!r}"
        await asyncio.sleep(0.2)
        with suppress(RPCError):  # a query can race the first workflow task
            details = (await web_ui(handle))[2]
    return details


async def test_a_request_reads_in_the_list_and_stays_visibly_finished(dev_env: WorkflowEnvironment) -> None:
    client = dev_env.client
    with suppress(RPCError):  # already registered by an earlier test
        await client.operator_service.add_search_attributes(
            AddSearchAttributesRequest(
                namespace=client.namespace,
                search_attributes={k.name: IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD for k in ALL},
            )
        )
    tq = f"web-ui-{uuid.uuid4().hex[:6]}"
    world = World(no_capacity_pools={"kwok-cx22"})  # the first pool is full: a second attempt
    inp = request(pools("kwok-cx22", "kwok-cx32"), use_search_attributes=True)  # its record stays 600 s
    inp.pods = {"shape-a": 5, "shape-b": 2}
    starter = ActivityEnvironment(client=client)
    starter.info = dataclasses.replace(starter.info, task_queue=tq)  # the activity starts on its own queue
    batch = StartRequestsInput(cluster="test", requests=[inp], use_search_attributes=True)
    async with new_worker(client, tq, workflows=[NodeRequestWorkflow], activities=world.activities()):
        assert await starter.run(start_node_requests, batch) == 1
        handle = client.get_workflow_handle(inp.id)
        details = await wait_details(handle, "Finished Ready")
        summary, fixed, _ = await web_ui(handle)
        assert summary == "NodeRequest cx22 for 7 pods of general, pool kwok-cx22"  # as planned, first pool
        assert fixed is not None and "pools in order: kwok-cx22 (kwok cx22), kwok-cx32 (kwok cx32)" in fixed
        status = await handle.query(NodeRequestWorkflow.describe)
        assert details.startswith("Finished Ready at ") and f"node {status.node_name}, pool kwok-cx32" in details
        assert "Record kept until" in details
        # Still running (its record kept for the TTL), yet listed by its final phase.
        assert (await handle.describe()).status == WorkflowExecutionStatus.RUNNING
        found: list[str] = []
        deadline = asyncio.get_running_loop().time() + 60
        while inp.id not in found:
            assert asyncio.get_running_loop().time() < deadline, "never listed with GrowthPhase = 'Ready'"
            await asyncio.sleep(0.2)
            found = [w.id async for w in client.list_workflows(f"GrowthCluster = 'test' AND {PHASE.name} = 'Ready'")]
        await handle.terminate("test over")


async def test_a_batch_reads_in_the_list_by_its_least_advanced_member(dev_env: WorkflowEnvironment) -> None:
    """A NodeRequestBatch started the loop's way: one list line for its nodes; its details count
    members by phase, and GrowthPhase is its least advanced member's (Ready once all are)."""
    client = dev_env.client
    with suppress(RPCError):
        await client.operator_service.add_search_attributes(
            AddSearchAttributesRequest(
                namespace=client.namespace,
                search_attributes={k.name: IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD for k in ALL},
            )
        )
    tq = f"web-ui-{uuid.uuid4().hex[:6]}"
    world = World(hold_readiness=True)
    inp = batch(3, use_search_attributes=True, cluster=f"web-{uuid.uuid4().hex[:6]}")
    starter = ActivityEnvironment(client=client)
    starter.info = dataclasses.replace(starter.info, task_queue=tq)
    start = StartRequestsInput(cluster=inp.cluster, batches=[inp], use_search_attributes=True)

    async def listed(phase: str) -> None:
        deadline = asyncio.get_running_loop().time() + 60
        query = f"GrowthCluster = '{inp.cluster}' AND {PHASE.name} = '{phase}'"
        while inp.id not in [w.id async for w in client.list_workflows(query)]:
            assert asyncio.get_running_loop().time() < deadline, f"never listed with GrowthPhase = {phase!r}"
            await asyncio.sleep(0.2)

    async with new_worker(client, tq, workflows=[NodeRequestBatchWorkflow], activities=world.activities()):
        assert await starter.run(start_node_requests, start) == 1
        handle = client.get_workflow_handle(inp.id)
        details = await wait_details(handle, "3 nodes: 3 Provisioning")
        assert "#0: Provisioning: pool kwok-cx22, node " in details  # the first of the least advanced
        summary, fixed, _ = await web_ui(handle)
        assert summary == "NodeRequestBatch 3 × cx22 for 3 pods of general, pool kwok-cx22"
        assert fixed is not None and fixed.startswith("3 nodes, each its own request")
        await listed("Provisioning")
        world.hold_readiness = False
        await wait_details(handle, "3 nodes: 3 Ready")
        await listed("Ready")
        await handle.terminate("test over")
