"""A component's recorded plan decides what its planner, the operator's overrides and the scale
intervals decide, and carries what it read; the groups' decision is `reconcile`'s."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from scaling.components.contracts import AutoClusterView, ComponentView
from scaling.components.decisions import GroupFigures, PlanFigures, decide_groups, decide_plan, release
from scaling.components.groups import reconcile
from scaling.components.overrides import PINNED, apply_overrides
from scaling.components.planners import plan_growth
from scaling.components.state import GroupRecord, Overrides
from scaling.components.timing import ComponentTiming, gate
from tests.scaling.components.test_planning import hom, inp, tikv_spec

NOW = datetime(2026, 11, 28, 10, 0, tzinfo=UTC)


def hot() -> PlanFigures:
    spec = tikv_spec(storage=False)
    plan = inp(spec, [hom(3, 0.95)])
    return PlanFigures(source="growth", plan=plan, now=NOW)


def test_the_plan_is_the_planners_after_the_overrides_and_the_intervals() -> None:
    figures = hot()
    decided = decide_plan(figures)
    expected = apply_overrides(plan_growth(figures.plan), figures.plan, Overrides(), {})
    assert decided.plan == expected and expected.changes
    assert decided.allowed == gate(expected, ComponentTiming(), figures.plan.spec, NOW).allowed
    assert decided.figures == figures  # what it read, recorded beside what it decided


def test_a_change_within_its_interval_waits_and_a_pin_goes_at_once() -> None:
    spec = tikv_spec(storage=False)
    just = ComponentTiming(last_change_at=NOW - timedelta(seconds=10), last_direction="out")
    figures = hot().model_copy(update={"timing": just, "overrides": Overrides(pins={"tikv/db": 5})})
    decided = decide_plan(figures)
    assert [ch.reason for ch in decided.allowed] == [PINNED]
    later = NOW + timedelta(seconds=spec.scale_out_interval_s)
    assert release(decided, later).deferred == [] and release(decided, later).allowed == decided.plan.changes


def test_the_groups_decision_is_reconcile() -> None:
    records = {"auto-a": GroupRecord(name="auto-a", group="g", replicas=0, phase="draining")}
    found = [
        AutoClusterView(name="auto-a", uid="u1", group="g", component=ComponentView(replicas=0, pods=0)),
        AutoClusterView(name="auto-b", uid="u2", group="h", component=ComponentView(replicas=2, pods=2)),
    ]
    decided = decide_groups(GroupFigures(records=records, found=found))
    assert decided.reconciled == reconcile(records, found)
    assert [g.name for g in decided.reconciled.drained] == ["auto-a"] and decided.reconciled.adopted == ["auto-b"]
