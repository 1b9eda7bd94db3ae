"""Registered clusters (dataplane-cluster-configuration.yaml, registered by the starter in batches
or listed in the region's input, and the register_cluster update) on the dev server: they are
never created at OCM, wait for their agent, run several instance types, and an instance their
agent rejects is placed on another cluster, never on two at once."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from pathlib import Path

import pytest
from temporalio.client import Client, WorkflowHandle, WorkflowUpdateFailedError
from temporalio.service import RPCError
from temporalio.testing import WorkflowEnvironment

from activities.updates import cause_of, execute_update
from scaling.fleet import contracts
from scaling.fleet.config import ManualCluster, load_fleet_config_text
from scaling.fleet.contracts import (
    MAX_REGISTER_BATCH,
    AgentClusterView,
    AgentStatusReport,
    ClusterRegistrations,
    CreateInstanceRequest,
    InstancePlacement,
    InstanceStatusReport,
)
from scaling.fleet.models import ClusterPhase
from scaling.fleet.region import FleetAutoscalerInput, FleetAutoscalerState, RegionStatus
from starters.fleet import register_listed
from tests.polling import until
from tests.workflows.fleet.stubs import FleetWorld, stop_agents
from tests.workflows.fleet.test_autoscaler import _terminate_all, eventually, settings, terminate_clusters
from tests.workflows.workers import new_worker
from workflows.fleet.autoscaler import FleetAutoscalerWorkflow
from workflows.fleet.cluster import DataPlaneClusterWorkflow

CONFIG = """
supported_providers:
  - name: aws
    regions:
      - name: us-east-1
        supported_instance_type:
          standard: {limit: 40}
          developer: {}
dynamic_scaling:
  enable_dynamic_data_plane_scale_up: false
supported_instance_types:
  - id: standard
    sizes: [{id: x1, capacity_consumed: 1}]
  - id: developer
    sizes: [{id: x1, capacity_consumed: 1}]
clusters:
  - {cluster_id: both, cloud_provider: aws, region: us-east-1, schedulable: true, kafka_instance_limit: -1}
  - {cluster_id: std, cloud_provider: aws, region: us-east-1, schedulable: true, kafka_instance_limit: 5,
     supported_instance_type: standard}
  - {cluster_id: ent, cloud_provider: aws, region: us-east-1, schedulable: true, kafka_instance_limit: -1,
     supported_instance_type: standard, cluster_type: enterprise}
  - {cluster_id: elsewhere, cloud_provider: aws, region: eu-west-1, schedulable: true}
"""
UNITS = 4
HISTORIES = Path(__file__).parent / "histories"


@pytest.fixture
def env(dev_env: WorkflowEnvironment) -> WorkflowEnvironment:
    return dev_env


async def agents(client: Client, region: WorkflowHandle) -> None:
    """Each registered cluster's agent: Ready, UNITS per type it runs, minus what is placed."""
    while True:
        with suppress(RPCError, WorkflowUpdateFailedError):
            st: RegionStatus = await region.query(FleetAutoscalerWorkflow.status)
            for rec in st.clusters:
                h = client.get_workflow_handle(contracts.cluster_workflow_id(rec.id))
                view: AgentClusterView = await h.query(DataPlaneClusterWorkflow.agent_view)
                capacity = {}
                for itype in view.capacity:
                    used = sum(i.units for i in view.instances if i.instance_type == itype)
                    capacity[itype] = {"maxUnits": UNITS, "remainingUnits": UNITS - used}
                if view.phase == ClusterPhase.READY and all(
                    view.capacity[t].remaining_units == c["remainingUnits"] for t, c in capacity.items()
                ):
                    continue
                body = {"conditions": [{"type": "Ready", "status": "True"}], "capacity": capacity}
                await execute_update(
                    h, DataPlaneClusterWorkflow.report_agent_status, AgentStatusReport.model_validate(body)
                )
        await asyncio.sleep(0.3)


@asynccontextmanager
async def region(
    env: WorkflowEnvironment,
    world: FleetWorld,
    state: FleetAutoscalerState | None = None,
    listed_in_input: bool = False,
    **kw: object,
) -> AsyncIterator[WorkflowHandle]:
    """A region over CONFIG's listed clusters, with their agents reporting; `kw` are settings. The
    clusters are registered as `growth fleet start` registers them (`register_clusters`), or, with
    `listed_in_input`, listed in the region's input as runs from before had them."""
    tq = f"fleet-{uuid.uuid4().hex[:6]}"
    config = load_fleet_config_text(CONFIG)
    listed = [c.cluster_id for c in config.clusters]
    await terminate_clusters(env.client, listed)  # the ids are fixed: no run of an earlier test may answer for them
    async with new_worker(env.client, tq, activities=world.activities()):
        handle = await env.client.start_workflow(
            FleetAutoscalerWorkflow.run,
            FleetAutoscalerInput(
                settings=settings(**kw), config=config if listed_in_input else config.without_clusters(), state=state
            ),
            id=f"fleet/aws/test-{uuid.uuid4().hex[:6]}",
            task_queue=tq,
        )
        if not listed_in_input:
            await register_listed(handle, config.manual_clusters("aws", "us-east-1"))
        agent = asyncio.create_task(agents(env.client, handle))
        try:
            yield handle
        finally:
            await stop_agents(agent)
            await _terminate_all(env.client, handle, listed)


async def create(handle: WorkflowHandle, iid: str, itype: str) -> InstancePlacement:
    req = CreateInstanceRequest(id=iid, instance_type=itype, size="x1")
    return await execute_update(handle, FleetAutoscalerWorkflow.create_instance, req)


async def on_cluster(client: Client, cluster_id: str) -> list[str]:
    h = client.get_workflow_handle(contracts.cluster_workflow_id(cluster_id))
    view: AgentClusterView = await h.query(DataPlaneClusterWorkflow.agent_view)
    return [i.id for i in view.instances]


async def test_listed_clusters_serve_several_types_and_a_rejected_instance_moves(env: WorkflowEnvironment) -> None:
    world = FleetWorld()
    async with region(env, world) as handle:
        st = await eventually(handle, lambda s: [c.phase for c in s.clusters] == [ClusterPhase.READY] * 3)
        assert [c.id for c in st.clusters] == ["both", "std", "ent"]  # not the other region's
        assert world.clusters == {}  # nothing created at OCM
        assert set(st.clusters[0].types) == {"standard", "developer"} and st.clusters[0].manual
        assert st.clusters_created == 0

        assert (await create(handle, "s1", "standard")).cluster_id == "both"
        assert (await create(handle, "d1", "developer")).cluster_id == "both"
        await eventually(handle, lambda s: s.clusters[0].instances == 2)

        # both's agent refuses s1: it leaves both and goes to std, never to the enterprise cluster.
        both = env.client.get_workflow_handle(contracts.cluster_workflow_id("both"))
        rejected = InstanceStatusReport.model_validate(
            {"conditions": [{"type": "Ready", "status": "False", "reason": "Rejected", "message": "no room"}]}
        )
        await execute_update(both, DataPlaneClusterWorkflow.report_instance_statuses, {"s1": rejected})
        st = await eventually(handle, lambda s: s.clusters[1].instances == 1)
        placed: InstancePlacement = await handle.query(FleetAutoscalerWorkflow.instance, "s1")
        assert placed.cluster_id == "std"
        assert await on_cluster(env.client, "both") == ["d1"]  # dropped by both before it was handed back
        # the region's placement reaches std's workflow by signal, after the region has recorded it
        await until(lambda: on_cluster(env.client, "std"), timeout=30)
        assert await on_cluster(env.client, "std") == ["s1"]
        assert await on_cluster(env.client, "ent") == []
        assert st.clusters[0].types["standard"].consumed_units == 0
        assert st.clusters[0].types["developer"].consumed_units == 1
        assert any("s1: rejected by both (no room)" in e for e in st.events)

        # Registering from outside: a cluster of another region is refused naming the field.
        with pytest.raises(WorkflowUpdateFailedError) as err:
            await execute_update(
                handle,
                FleetAutoscalerWorkflow.register_cluster,
                ManualCluster(cluster_id="x", cloud_provider="aws", region="eu-west-1", schedulable=True),
            )
        assert "region: cluster x is in aws/eu-west-1" in str(err.value.cause)
        listed = ManualCluster(cluster_id="y", cloud_provider="aws", region="us-east-1", schedulable=True)
        for batch, field in (
            ([listed, ManualCluster(cluster_id="x", cloud_provider="aws", region="eu-west-1")], "clusters[1].region"),
            ([listed] * (MAX_REGISTER_BATCH + 1), "clusters: 101 in one update, at most 100"),
        ):
            with pytest.raises(WorkflowUpdateFailedError) as err:
                await execute_update(
                    handle, FleetAutoscalerWorkflow.register_clusters, ClusterRegistrations(clusters=batch)
                )
            assert cause_of(err.value).startswith(field)
        added = ManualCluster(
            cluster_id="late", cloud_provider="aws", region="us-east-1", schedulable=True, kafka_instance_limit=-1
        )
        assert await execute_update(handle, FleetAutoscalerWorkflow.register_cluster, added) == "late"
        st = await eventually(handle, lambda s: len(s.clusters) == 4 and s.clusters[3].phase == ClusterPhase.READY)
        assert world.clusters == {}
