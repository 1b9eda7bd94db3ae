"""On the real dev server: a data-plane cluster is findable in the Web UI's list by provider,
region and phase (the time-skipping server keeps no visibility)."""

from __future__ import annotations

import asyncio
import uuid
from contextlib import suppress

from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import AddSearchAttributesRequest
from temporalio.service import RPCError
from temporalio.testing import WorkflowEnvironment

from scaling.fleet import contracts
from tests.workflows.fleet.stubs import FleetWorld
from tests.workflows.fleet.test_cluster import cluster_input
from tests.workflows.workers import new_worker
from workflows.fleet.cluster import DataPlaneClusterWorkflow
from workflows.search import CLUSTER, PHASE, PROVIDER, REGION


async def test_cluster_is_listed_by_provider_region_and_phase(dev_env: WorkflowEnvironment) -> None:
    client = dev_env.client
    with suppress(RPCError):  # already registered by an earlier test
        await client.operator_service.add_search_attributes(
            AddSearchAttributesRequest(
                namespace=client.namespace,
                search_attributes={
                    k.name: IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD for k in (CLUSTER, PHASE, PROVIDER, REGION)
                },
            )
        )
    world = FleetWorld()
    inp = cluster_input().model_copy(update={"use_search_attributes": True})
    tq = f"fleet-sa-{uuid.uuid4().hex[:6]}"
    async with new_worker(client, tq, workflows=[DataPlaneClusterWorkflow], activities=world.activities()):
        handle = await client.start_workflow(
            DataPlaneClusterWorkflow.run, inp, id=contracts.cluster_workflow_id(inp.cluster_id), task_queue=tq
        )
        query = (
            f"GrowthProvider = 'aws' AND GrowthRegion = 'us-east-1' AND GrowthCluster = '{inp.cluster_id}'"
            " AND GrowthPhase = 'waiting_for_kas_fleetshard_operator'"
        )
        deadline = asyncio.get_running_loop().time() + 90
        found: list[str] = []
        while not found:
            found = [wf.id async for wf in client.list_workflows(query)]
            if asyncio.get_running_loop().time() > deadline:
                raise AssertionError("the cluster never appeared in the list under its phase")
            await asyncio.sleep(0.5)
        assert found == [handle.id]
        await handle.terminate()
