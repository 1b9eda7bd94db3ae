"""An operator's pins and scale-in blocks over a component's plan (scaling/components/overrides.py)."""

from __future__ import annotations

from scaling.components.overrides import PINNED, apply_overrides
from scaling.components.plan import HOMOGENEOUS, Change, ComponentPlan, Group
from scaling.components.state import GroupRecord, Overrides
from tests.scaling.components.test_planning import inp, tikv_spec

GROUP = Group(name="auto-1", group="pd-auto-scaling-tikv-big", resource_type="big", replicas=2)
RECORDS = {"auto-1": GroupRecord(name="auto-1", group="pd-auto-scaling-tikv-big", replicas=2)}


def plan(*changes: Change) -> ComponentPlan:
    return ComponentPlan(component="tikv", changes=list(changes), notes=["planned"])


def out_base(to: int) -> Change:
    return Change(cluster="db", group=HOMOGENEOUS, direction="out", from_replicas=3, to_replicas=to, reason="cpu")


def in_group(to: int) -> Change:
    return Change(cluster="auto-1", group=GROUP.group, direction="in", from_replicas=2, to_replicas=to, reason="cpu")


def moves(p: ComponentPlan) -> list[tuple[str, str, int, int, str]]:
    return [(c.cluster, c.direction, c.from_replicas, c.to_replicas, c.reason) for c in p.changes]


def test_no_overrides_leave_the_plan_as_it_is() -> None:
    p = plan(out_base(6), in_group(1))
    assert apply_overrides(p, inp(tikv_spec(), [], groups=[GROUP]), Overrides(), RECORDS) == p


def test_a_pin_replaces_the_planners_change_to_that_cluster() -> None:
    overrides = Overrides(pins={"tikv/db": 4})
    got = apply_overrides(plan(out_base(6), in_group(1)), inp(tikv_spec(), [], groups=[GROUP]), overrides, RECORDS)
    assert moves(got) == [("auto-1", "in", 2, 1, "cpu"), ("db", "out", 3, 4, PINNED)]


def test_a_pin_already_held_drops_the_planners_change_and_adds_none() -> None:
    overrides = Overrides(pins={"tikv/db": 3, "tikv/auto-1": 1})
    got = apply_overrides(plan(out_base(6), in_group(1)), inp(tikv_spec(), [], groups=[GROUP]), overrides, RECORDS)
    # db is at its pin (3): nothing; auto-1 pinned at 1 from 2: the pin's own scale-in, its group label kept.
    assert moves(got) == [("auto-1", "in", 2, 1, PINNED)] and got.changes[0].group == GROUP.group


def test_pins_of_another_component_or_an_unknown_cluster_are_ignored() -> None:
    overrides = Overrides(pins={"tidb/db": 9, "tikv/auto-gone": 5})
    p = plan(out_base(6))
    assert apply_overrides(p, inp(tikv_spec(), [], groups=[GROUP]), overrides, RECORDS).changes == p.changes


def test_a_scale_in_block_holds_the_planners_scale_ins_but_not_pins_or_scale_outs() -> None:
    for blocked in (["tikv"], ["*"]):
        overrides = Overrides(block_scale_in=blocked, pins={"tikv/db": 2})
        got = apply_overrides(plan(in_group(1)), inp(tikv_spec(), [], groups=[GROUP]), overrides, RECORDS)
        assert moves(got) == [("db", "in", 3, 2, PINNED)]
        assert got.notes == ["planned", "scale-in blocked by an operator: 1 change(s) held"]
    other = Overrides(block_scale_in=["tidb"])
    p = plan(out_base(6), in_group(1))
    assert apply_overrides(p, inp(tikv_spec(), [], groups=[GROUP]), other, RECORDS).changes == p.changes
