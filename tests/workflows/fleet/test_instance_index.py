"""The region's instances in the index shards (patch instance-index), on the dev server: a create
repeated (at once, or after continue-as-new) gets the first placement and never a second
instance; a deleted instance is gone from the shard; a region whose state still holds instances
(a run from before the patch) moves them into the index and keeps them; the limits name their
field; the recorded shard history replays."""

from __future__ import annotations

import asyncio

import pytest
from temporalio.client import WorkflowUpdateFailedError
from temporalio.testing import WorkflowEnvironment

from activities.updates import execute_update
from scaling.fleet.region import FleetAutoscalerState
from starters.cli import cause_of
from starters.fleet import find_instance
from tests.workflows.fleet.stubs import FleetWorld
from tests.workflows.fleet.test_autoscaler import eventually, run_input
from tests.workflows.fleet.test_registered_clusters import create
from tests.workflows.fleet.test_registered_clusters import region as registered_region
from workflows.fleet.autoscaler import FleetAutoscalerWorkflow

SHARDS = 4


@pytest.fixture
def env(dev_env: WorkflowEnvironment) -> WorkflowEnvironment:
    return dev_env


def region(env: WorkflowEnvironment, state: FleetAutoscalerState | None = None, **kw: object):  # noqa: ANN201
    """test_registered_clusters' region, its instances in SHARDS index shards."""
    return registered_region(env, FleetWorld(), state, index_shards=SHARDS, **kw)


async def test_a_repeated_create_gets_the_first_placement_also_after_continue_as_new(env: WorkflowEnvironment) -> None:
    async with region(env, iterations_per_run=4, listed_in_input=True) as handle:
        await eventually(handle, lambda s: sum(c.phase.value == "ready" for c in s.clusters) == 3)
        first = await create(handle, "s1", "standard")
        assert first.cluster_id
        # the same id three times at once: one instance, one answer
        dup = await asyncio.gather(*(create(handle, "dup", "standard") for _ in range(3)))
        assert len({d.cluster_id for d in dup}) == 1
        st = await eventually(handle, lambda s: s.instances_placed == 2)
        assert st.index_shards == SHARDS
        runs = st.runs
        await eventually(handle, lambda s: s.runs >= runs + 2)  # continued as new: the region forgot its answers
        # ... and carried its registry as columns, without the configuration's cluster list
        carried = await run_input(env.client, handle)
        assert carried.config.clusters == [] and carried.state is not None and carried.state.clusters == {}
        table = carried.state.cluster_table
        assert table is not None and table.id == ["both", "std", "ent"]
        assert await handle.query(FleetAutoscalerWorkflow.instance, "s1") is None
        again = await create(handle, "s1", "standard")
        assert again.cluster_id == first.cluster_id  # from the shard's record, not a second placement
        found = await find_instance(env.client, handle.id, "s1")
        assert found is not None and found.cluster_id == first.cluster_id
        st = await eventually(handle, lambda s: s.instances_placed == 2)
        assert sum(c.instances for c in st.clusters) == 2

        with pytest.raises(WorkflowUpdateFailedError) as refused:
            await create(handle, "s1", "developer")
        assert cause_of(refused.value).startswith("id: instance s1 exists with type standard")

        assert await execute_update(handle, FleetAutoscalerWorkflow.delete_instance, "s1")
        assert not await execute_update(handle, FleetAutoscalerWorkflow.delete_instance, "s1")
        assert await find_instance(env.client, handle.id, "s1") is None
        st = await eventually(handle, lambda s: s.instances_placed == 1 and sum(c.instances for c in s.clusters) == 1)


async def test_the_instance_limit_names_its_field(env: WorkflowEnvironment) -> None:
    async with region(env, max_instances=2) as handle:
        # Clusters first: a create then claims its id and is placed at once (under load, a create
        # sent while the region still starts its shards and clusters outlasted the update's wait).
        await eventually(handle, lambda s: sum(c.phase.value == "ready" for c in s.clusters) == 3)
        await create(handle, "a", "standard")
        await create(handle, "b", "developer")
        with pytest.raises(WorkflowUpdateFailedError) as refused:
            await create(handle, "c", "standard")
        assert "max_instances" in cause_of(refused.value) and cause_of(refused.value).startswith("id:")
        assert (await create(handle, "a", "standard")).id == "a"  # a repeat is answered, not refused
