"""Machine pools per instance type (multi-AZ multiples of 3), instance placement, reserved
(prewarming) instances."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from scaling.fleet.capacity import TypeRules, cluster_free_units, type_rules
from scaling.fleet.config import NodeAutoscaling, WorkloadMachines, load_fleet_config_text
from scaling.fleet.models import ClusterPhase, ClusterRecord, ManagedInstance
from scaling.fleet.placement import (
    FirstFit,
    instance_units,
    place_instance,
    reserved_instance_name,
    reserved_instances,
    within_region_limit,
)
from scaling.fleet.pools import cluster_multi_az, machine_pool_bounds, machine_pool_input
from tests.scaling.fleet.strategies import TYPES, clusters, rules
from tests.scaling.fleet.test_config import EXAMPLE

CFG = load_fleet_config_text(EXAMPLE)


def machines(low: int, high: int, multi_az: bool | None = None) -> WorkloadMachines:
    return WorkloadMachines(
        compute_machine_type="r5.xlarge",
        compute_node_autoscaling=NodeAutoscaling(min_compute_nodes=low, max_compute_nodes=high),
        multi_az=multi_az,
    )


def test_seed_pool_defaults() -> None:
    assert machine_pool_bounds(0, 18, multi_az=True) == (3, 18)
    assert machine_pool_bounds(0, 1, multi_az=False) == (1, 1)
    assert machine_pool_bounds(4, 20, multi_az=True) == (6, 18)
    assert machine_pool_bounds(2, 2, multi_az=True) == (3, 3)


@given(st.integers(0, 50), st.integers(1, 60), st.booleans())
def test_pool_bounds_properties(low: int, high: int, multi_az: bool) -> None:
    lo, hi = machine_pool_bounds(min(low, high), high, multi_az)
    assert 1 <= lo <= hi
    assert lo >= min(low, high)
    if multi_az:
        assert lo % 3 == 0 and hi % 3 == 0 and lo >= 3
        assert hi <= max(high, lo)
    else:
        assert hi == max(lo, high)


def test_machine_pool_is_labelled_and_tainted_per_type() -> None:
    pool = machine_pool_input("ocm-1", "c1", "standard", machines(3, 18), multi_az=True)
    assert pool.pool_id == "kafka-standard" and (pool.min_nodes, pool.max_nodes) == (3, 18)
    assert pool.labels == {"bf2.org/kafkaInstanceProfileType": "standard"}
    (taint,) = pool.taints
    assert (taint.key, taint.value, taint.effect) == ("bf2.org/kafkaInstanceProfileType", "standard", "NoExecute")


def test_multi_az_follows_the_seed_unless_configured() -> None:
    assert cluster_multi_az("standard", machines(1, 3)) is True
    assert cluster_multi_az("developer", machines(1, 1)) is False
    assert cluster_multi_az("developer", machines(1, 3, multi_az=True)) is True
    assert cluster_multi_az("standard", None) is True


def test_type_rules_from_config() -> None:
    rules = type_rules(CFG, "aws", "us-east-1")
    assert rules["standard"] == TypeRules(
        instance_type="standard", limit=30, slack=5, biggest_units=2, expected_units=10
    )
    # No expected capacity configured: a not-yet-reported cluster counts as holding one biggest size.
    assert rules["developer"].limit is None and rules["developer"].expected_units == 1
    assert type_rules(CFG, "aws", "nowhere") == {}


def test_instance_units() -> None:
    assert instance_units(CFG, "standard", "x2") == 2
    assert instance_units(CFG, "standard", "x9") is None and instance_units(CFG, "premium", "x1") is None


def ready(cid: str, max_units: int, consumed: int = 0, phase: ClusterPhase = ClusterPhase.READY) -> ClusterRecord:
    return ClusterRecord(id=cid, instance_type="standard", phase=phase, max_units=max_units, consumed_units=consumed)


def inst(units: int, itype: str = "standard") -> ManagedInstance:
    return ManagedInstance(id="i", instance_type=itype, size="x1", units=units)


def test_placement_takes_the_first_ready_cluster_with_room() -> None:
    rules = type_rules(CFG, "aws", "us-east-1")["standard"]
    cs = [
        ready("waiting", 10, phase=ClusterPhase.WAITING),
        ready("full", 10, consumed=9),
        ready("room", 10, consumed=8),
        ready("more", 10),
    ]
    assert place_instance(inst(2), cs, rules) == "room"
    assert place_instance(inst(3), cs, rules) == "more"
    assert place_instance(inst(11), cs, rules) is None


@given(clusters(), rules(), st.integers(1, 6))
def test_placement_property(cs: list[ClusterRecord], r: TypeRules, units: int) -> None:
    chosen = place_instance(inst(units, r.instance_type), cs, r)
    fits = [
        c
        for c in cs
        if c.instance_type == r.instance_type and c.phase == ClusterPhase.READY and cluster_free_units(c, r) >= units
    ]
    if chosen is None:
        assert not fits
    else:
        assert chosen == fits[0].id


def test_region_limit_admission() -> None:
    assert within_region_limit(2, 100, None)
    assert not within_region_limit(1, 0, 0)
    assert within_region_limit(2, 8, 10) and not within_region_limit(3, 8, 10)


def test_reserved_instances_only_for_ready_clusters() -> None:
    got = reserved_instances("c1", ClusterPhase.READY, ["standard", "developer"], CFG)
    assert [r.id for r in got] == ["reserved-kafka-standard-1", "reserved-kafka-standard-2"]
    for r in got:
        assert r.namespace == r.id and r.labels == {"bf2.org/deployment": "reserved"}
        assert r.size == "x1" and r.units == 1 and r.cluster_id == "c1"
    for phase in ClusterPhase:
        if phase != ClusterPhase.READY:
            assert reserved_instances("c1", phase, ["standard"], CFG) == []


def test_reserved_instance_name() -> None:
    assert reserved_instance_name("developer", 3) == "reserved-kafka-developer-3"


@st.composite
def queue(draw: st.DrawFn) -> list[ManagedInstance]:
    """Instances of both types and several sizes, some refused by some clusters before."""
    return [
        ManagedInstance(
            id=f"i{n}",
            instance_type=draw(st.sampled_from(TYPES)),
            size="x",
            units=draw(st.integers(1, 4)),
            rejected_by=draw(st.lists(st.sampled_from([f"c{k}" for k in range(8)]), max_size=3)),
        )
        for n in range(draw(st.integers(0, 30)))
    ]


def _commit(placed: str | None, inst: ManagedInstance, records: dict[str, ClusterRecord]) -> None:
    """What the region counts on a cluster once it places an instance there."""
    if placed is not None:
        rec = records[placed]
        rec.types[inst.instance_type].consumed_units += inst.units
        rec.instances += 1


def with_both_types(found: list[ClusterRecord], standard: TypeRules, developer: TypeRules) -> dict[str, TypeRules]:
    """Some of `found` run both types, with their own units; the rules by type."""
    for c in found:
        if c.id in ("c1", "c4"):
            c.types.setdefault("developer", c.types[c.instance_type].model_copy())
    return {"standard": standard, "developer": developer}


@given(clusters(), queue(), rules("standard"), rules("developer"))
def test_first_fit_in_one_pass_places_as_first_fit_one_by_one(
    found: list[ClusterRecord], waiting: list[ManagedInstance], standard: TypeRules, developer: TypeRules
) -> None:
    by_type = with_both_types(found, standard, developer)
    one = {c.id: c.model_copy(deep=True) for c in found}
    fit_records = {c.id: c.model_copy(deep=True) for c in found}
    fit = FirstFit(list(fit_records.values()))
    for inst in waiting:
        expected = place_instance(inst, list(one.values()), by_type[inst.instance_type])
        _commit(expected, inst, one)
        got = fit.place(inst, by_type[inst.instance_type])
        _commit(got, inst, fit_records)
        assert got == expected, inst
