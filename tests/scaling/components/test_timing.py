"""Intervals: every change, creation and deletion included, waits for its direction's interval
since the component's last change."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from scaling.components.planning import Change, ComponentPlan
from scaling.components.spec import ComponentSpec, parse_spec
from scaling.components.timing import ComponentTiming, gate, is_allowed, record

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def spec() -> ComponentSpec:
    raw = {
        "cluster": {"name": "db"},
        "tidb": {
            "resources": {"a": {"cpu": "1", "memory": "1Gi"}},
            "rules": {"cpu": {"max_threshold": 0.8, "min_threshold": 0.2}},
        },
    }
    return parse_spec(raw, "ns", {})[0].components["tidb"]


def change(cluster: str, direction: str, create: bool = False) -> Change:
    frm, to = (0, 1) if direction == "out" else (1, 0)
    return Change(cluster=cluster, group="g", direction=direction, from_replicas=frm, to_replicas=to, create=create)


def test_first_change_goes_at_once() -> None:
    g = gate(
        ComponentPlan(component="tidb", changes=[change("auto-x", "out", create=True)]), ComponentTiming(), spec(), T0
    )
    assert len(g.allowed) == 1 and g.deferred == []


def test_group_creation_after_a_change_waits_for_the_scale_out_interval() -> None:
    timing = record(ComponentTiming(), [change("db", "out")], T0)
    plan = ComponentPlan(component="tidb", changes=[change("auto-new", "out", create=True)])
    g = gate(plan, timing, spec(), T0 + timedelta(seconds=299))
    assert g.allowed == [] and g.retry_at == T0 + timedelta(seconds=300)
    assert len(gate(plan, timing, spec(), T0 + timedelta(seconds=300)).allowed) == 1


def test_group_deletion_waits_for_the_scale_in_interval_even_after_its_group_went() -> None:
    timing = record(ComponentTiming(), [change("auto-old", "in")], T0)
    timing = timing.model_copy(update={"groups": {}})  # the group's own record is gone
    plan = ComponentPlan(component="tidb", changes=[change("auto-other", "in")])
    assert gate(plan, timing, spec(), T0 + timedelta(seconds=499)).allowed == []
    assert gate(plan, timing, spec(), T0 + timedelta(seconds=500)).retry_at is None


@given(st.lists(st.tuples(st.sampled_from(["out", "in"]), st.integers(0, 2000)), max_size=30))
@settings(max_examples=200, deadline=None)
def test_property_applied_changes_are_spaced_by_their_interval(steps: list[tuple[str, int]]) -> None:
    s, timing, now, applied = spec(), ComponentTiming(), T0, []
    for direction, wait in steps:
        now += timedelta(seconds=wait)
        g = gate(ComponentPlan(component="tidb", changes=[change("c", direction)]), timing, s, now)
        if g.allowed:
            applied.append((now, direction))
            timing = record(timing, g.allowed, now)
        else:
            assert not is_allowed(timing, s, direction, now)
    for (t1, _), (t2, d2) in zip(applied, applied[1:], strict=False):
        assert (t2 - t1).total_seconds() >= (300 if d2 == "out" else 500)
