"""The region's recorded decisions decide on their bounded figures what the rules decide on the
whole registry: placement on the open clusters as columns, the evaluation on per-type tallies and
at most MAX_CANDIDATES removal candidates, a re-check on a cluster's removal facts."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from scaling.fleet.capacity import TypeRules
from scaling.fleet.decisions import place, placement_figures, recheck, recheck_figures
from scaling.fleet.evaluation import MAX_CANDIDATES, evaluate, region_figures
from scaling.fleet.models import ClusterPhase, ClusterRecord, ManagedInstance, TypeUnits
from scaling.fleet.placement import FirstFit
from scaling.fleet.scale_down import cluster_to_remove, removal_decision
from scaling.fleet.scale_up import scale_up_needed
from tests.scaling.fleet.strategies import clusters, rules
from tests.scaling.fleet.test_pools_and_placement import queue, with_both_types


@given(clusters(), queue(), rules("standard"), rules("developer"))
def test_a_placement_on_its_figures_places_as_first_fit_on_the_registry(
    found: list[ClusterRecord], waiting: list[ManagedInstance], standard: TypeRules, developer: TypeRules
) -> None:
    by_type = with_both_types(found, standard, developer)
    records = [c.model_copy(deep=True) for c in found]
    fit, expected = FirstFit(records), {}
    for inst in waiting:
        cid = fit.place(inst, by_type[inst.instance_type])
        if cid is not None:
            rec = next(r for r in records if r.id == cid)
            rec.types[inst.instance_type].consumed_units += inst.units
            rec.instances += 1
            expected[inst.id] = cid
    figures = placement_figures(found, waiting, by_type)
    assert place(figures).placed == expected
    assert set(figures.clusters.id) <= {c.id for c in found if c.phase == ClusterPhase.READY}


@settings(max_examples=300)
@given(clusters(max_size=12), rules())
def test_the_evaluation_on_its_figures_decides_as_the_rules_on_the_registry(
    cs: list[ClusterRecord], r: TypeRules
) -> None:
    ev = evaluate(region_figures(cs, {r.instance_type: r}))
    (t,) = ev.types
    assert t.scale_up == scale_up_needed(cs, r)
    if not t.scale_up.needed:
        assert t.remove == cluster_to_remove(cs, r)


@given(clusters(), rules())
def test_a_recheck_on_its_facts_decides_as_the_rule_on_the_registry(cs: list[ClusterRecord], r: TypeRules) -> None:
    marked = [c for c in cs if c.instance_type == r.instance_type and c.phase == ClusterPhase.DEPROVISIONING]
    decided = recheck(recheck_figures(marked, cs, {r.instance_type: r})).decisions
    assert decided == [removal_decision(c, cs, r, rechecking=True) for c in marked]


def test_what_an_evaluation_reads_does_not_grow_with_the_fleet() -> None:
    r = TypeRules(instance_type="standard", limit=None, slack=5, biggest_units=2, expected_units=10)
    ready = [
        ClusterRecord(
            id=f"cluster-{k:04d}", instance_type="standard", phase=ClusterPhase.READY,
            types={"standard": TypeUnits(max_units=10 + k % 40, consumed_units=0 if k % 3 else 4)},
            instances=0 if k % 3 else 2,
        )
        for k in range(1000)
    ]  # fmt: skip
    figures = region_figures(ready, {"standard": r})
    assert len(figures.types[0].candidates) == MAX_CANDIDATES
    assert len(figures.model_dump_json()) < 4000  # 1,000 clusters: one type's tallies and 16 candidates
    # The least max_units first, as the rule prefers: the same choice as over the whole registry.
    assert evaluate(figures).types[0].remove == cluster_to_remove(ready, r)


def test_a_placement_reads_only_the_clusters_that_could_take_a_queued_instance() -> None:
    r = TypeRules(instance_type="standard", limit=None, slack=0, biggest_units=2, expected_units=10)
    full = [
        ClusterRecord(id=f"full-{k}", instance_type="standard", phase=ClusterPhase.READY,
                      types={"standard": TypeUnits(max_units=10, consumed_units=10)}, instances=5)
        for k in range(990)
    ]  # fmt: skip
    room = [
        ClusterRecord(id=f"room-{k}", instance_type="standard", phase=ClusterPhase.READY,
                      types={"standard": TypeUnits(max_units=10, consumed_units=0)})
        for k in range(10)
    ]  # fmt: skip
    waiting = [ManagedInstance(id=f"i{k}", instance_type="standard", size="x1", units=1) for k in range(64)]
    figures = placement_figures([*full, *room], waiting, {"standard": r})
    assert figures.clusters.id == [c.id for c in room]
    assert len(json.dumps(figures.model_dump(mode="json"))) < 10_000
    assert len(place(figures).placed) == 64


@given(st.integers(0, 3))
def test_an_unknown_type_in_the_queue_is_never_placed(extra: int) -> None:
    waiting = [ManagedInstance(id=f"p{k}", instance_type="premium", size="x", units=1) for k in range(extra + 1)]
    assert place(placement_figures([], waiting, {})).placed == {}
