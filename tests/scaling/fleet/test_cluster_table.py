"""What the region carries across continue-as-new: its registry as columns
(scaling.fleet.cluster_table), every record back as it was and in its order, the input small at
fleet size; queued and indexed instances without their default fields."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError
from temporalio.contrib.pydantic import pydantic_data_converter

from scaling.fleet.cluster_table import ClusterTable, from_table, to_table
from scaling.fleet.config import ManualCluster, load_fleet_config_text
from scaling.fleet.index import InstanceIndexInput
from scaling.fleet.models import ClusterPhase, ClusterRecord, InstanceVersions, ManagedInstance, TypeUnits
from scaling.fleet.region import (
    FleetAutoscalerInput,
    FleetAutoscalerSettings,
    FleetAutoscalerState,
    carried_over,
    registry_of,
)
from tests.scaling.fleet.strategies import TYPES

CONFIG = """
supported_providers:
  - name: aws
    regions:
      - name: us-east-1
        supported_instance_type: {standard: {}}
dynamic_scaling: {enable_dynamic_data_plane_scale_up: false}
supported_instance_types:
  - id: standard
    sizes: [{id: x1, capacity_consumed: 1}]
"""


@st.composite
def record(draw: st.DrawFn, idx: int) -> ClusterRecord:
    """Any record the region may hold: several types, units reported or not, every flag."""
    types = draw(st.lists(st.sampled_from(TYPES), min_size=1, max_size=2, unique=True))
    units = {
        t: TypeUnits(max_units=draw(st.none() | st.integers(0, 500)), consumed_units=draw(st.integers(0, 500)))
        for t in types
    }
    return ClusterRecord(
        id=f"us-east-1-{types[0]}-{idx}-{draw(st.text('0123456789abcdef', min_size=6, max_size=6))}",
        instance_type=draw(st.sampled_from([*types, "premium"])),  # a type it no longer runs, too
        types=units,
        phase=draw(st.sampled_from(list(ClusterPhase))),
        instances=draw(st.integers(0, 1000)),
        cluster_type=draw(st.sampled_from(["managed", "enterprise"])),
        manual=draw(st.booleans()),
        schedulable=draw(st.booleans()),
        instance_limit=draw(st.integers(-1, 100)),
        deletion_blocked=draw(st.booleans()),
        deletion_approved=draw(st.booleans()),
        delete_sent=draw(st.booleans()),
    )


@given(st.integers(0, 12).flatmap(lambda n: st.tuples(*(record(i) for i in range(n)))))
def test_every_record_comes_back_in_its_order(records: tuple[ClusterRecord, ...]) -> None:
    table = ClusterTable.model_validate_json(to_table(records).model_dump_json())  # as it crosses history
    back = from_table(table)
    assert list(back) == [r.id for r in records]
    assert list(back.values()) == list(records)


def test_columns_that_do_not_line_up_are_refused_naming_the_column() -> None:
    with pytest.raises(ValidationError, match="instances: 1 entries for 2 clusters"):
        ClusterTable(
            phases=["ready"],
            types=["standard"],
            id=["a", "b"],
            phase=[0, 0],
            created_for=[0, 0],
            flags=[0, 0],
            instances=[0],
            limit=[-1, -1],
            units=[[], []],
        )


def test_the_carried_input_holds_columns_and_no_cluster_list_at_a_thousand_clusters() -> None:
    """issue 21's size: 1,000 ready clusters, as make bench-fleet registers them. The records took
    about 285 bytes a cluster and the listed clusters 279 bytes more (581 KB in all)."""
    listed = [
        ManualCluster(
            cluster_id=f"bench-{i:05d}",
            cloud_provider="aws",
            region="us-east-1",
            schedulable=True,
            kafka_instance_limit=-1,
            supported_instance_type="standard",
        )
        for i in range(1000)
    ]
    config = load_fleet_config_text(CONFIG).model_copy(update={"clusters": listed})
    clusters = {
        c.cluster_id: ClusterRecord(
            id=c.cluster_id,
            instance_type="standard",
            types={"standard": TypeUnits(max_units=25, consumed_units=20)},
            phase=ClusterPhase.READY,
            instances=20,
            manual=True,
        )
        for c in listed
    }
    inp = FleetAutoscalerInput(
        settings=FleetAutoscalerSettings(provider="aws", region="us-east-1", max_clusters=1000),
        config=config,
        state=FleetAutoscalerState(clusters=clusters),
    )
    before = len(inp.model_dump_json())
    carried = carried_over(inp)
    size = len(carried.model_dump_json())
    assert before > 500_000
    assert size < 60_000, size  # about 40 bytes a cluster
    back = FleetAutoscalerInput.model_validate_json(carried.model_dump_json())
    assert back.config.clusters == [] and back.state is not None and back.state.clusters == {}
    assert registry_of(back.state) == clusters
    assert inp.state is not None and len(inp.state.clusters) == 1000  # the running state is left as it was


def test_an_input_from_before_keeps_its_records() -> None:
    rec = ClusterRecord(id="c1", instance_type="standard", types={"standard": TypeUnits(max_units=4)})
    assert registry_of(FleetAutoscalerState(clusters={"c1": rec})) == {"c1": rec}


def test_queued_and_indexed_instances_cross_without_their_defaults() -> None:
    """The region's queue (up to max_waiting) and a shard's records ride in continue-as-new inputs:
    fields at their defaults are left out, and every instance reads back as it was."""
    plain = ManagedInstance(id="burst-1", instance_type="standard", size="x1", units=1)
    moved = ManagedInstance(
        id="r1",
        instance_type="standard",
        size="x2",
        units=2,
        quota=2,
        namespace="r1",
        labels={"team": "a"},
        phase="ready",
        versions=InstanceVersions(kafka="3.6.0", strimzi="0.38.0"),
        message="cluster full",
        rejected_by=["c1", "c2"],
    )
    [payload] = pydantic_data_converter.payload_converter.to_payloads([FleetAutoscalerState(queue=[plain, moved])])
    [state] = pydantic_data_converter.payload_converter.from_payloads([payload], [FleetAutoscalerState])
    assert state.queue == [plain, moved]
    assert b'{"id":"burst-1","instance_type":"standard","size":"x1","units":1}' in payload.data
    shard = InstanceIndexInput(region_workflow_id="fleet/aws/r", shard=0, records={"burst-1": plain, "r1": moved})
    [payload] = pydantic_data_converter.payload_converter.to_payloads([shard])
    [back] = pydantic_data_converter.payload_converter.from_payloads([payload], [InstanceIndexInput])
    assert back.records == {"burst-1": plain, "r1": moved}
    assert b'"burst-1":{"id":"burst-1","instance_type":"standard","size":"x1","units":1}' in payload.data
