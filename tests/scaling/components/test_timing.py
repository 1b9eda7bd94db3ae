"""Intervals: every change, creation and deletion included, waits for its direction's interval
since the component's last change."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from scaling.components.plan import Change, ComponentPlan
from scaling.components.spec import ComponentSpec, parse_spec
from scaling.components.timing import ComponentTiming, gate, is_allowed, next_tick, record, tick_offset_s

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


def test_rounds_of_one_loop_fall_on_its_ticks_one_interval_apart() -> None:
    key = "components/tidb-3/db31"
    first = next_tick(T0, T0 + timedelta(seconds=2), 10, key)
    assert T0 < first <= T0 + timedelta(seconds=10)
    # The next round, begun on its tick and done 2 s later, sleeps until one interval after it.
    assert next_tick(first, first + timedelta(seconds=2), 10, key) == first + timedelta(seconds=10)
    # A round begun late (its workflow task waited) still keeps the loop's phase.
    late = first + timedelta(seconds=3.5)
    assert next_tick(late, late + timedelta(seconds=1), 10, key) == first + timedelta(seconds=10)


def test_a_round_that_outlasted_its_tick_goes_on_the_next_one_ahead() -> None:
    key = "components/ns/a"
    tick = next_tick(T0, T0, 10, key)
    done = tick + timedelta(seconds=27)  # began on `tick`, took 27 s: ticks +10 and +20 passed
    assert next_tick(tick, done, 10, key) == tick + timedelta(seconds=30)


def test_loops_started_together_spread_over_the_interval() -> None:
    ticks = [next_tick(T0, T0, 10, f"components/tidb-{i // 10}/db{i}") for i in range(200)]
    offsets = sorted((t - T0).total_seconds() for t in ticks)
    assert all(0 < o <= 10 for o in offsets)
    # Spread, not bunched: every second of the interval holds some, none holds a third.
    per_second = [sum(1 for o in offsets if s < o <= s + 1) for s in range(10)]
    assert min(per_second) > 0 and max(per_second) < 200 / 3, per_second
    assert tick_offset_s("components/ns/a", 10) == tick_offset_s("components/ns/a", 10)


@given(st.floats(min_value=0.5, max_value=600), st.floats(min_value=0, max_value=5000), st.floats(0, 3000))
@settings(max_examples=200, deadline=None)
def test_the_next_tick_is_ahead_and_within_an_interval_of_now_or_the_start(
    every_s: float, start_s: float, took_s: float
) -> None:
    started = T0 + timedelta(seconds=start_s)
    now = started + timedelta(seconds=took_s)
    tick = next_tick(started, now, every_s, "components/ns/x")
    assert tick > now
    assert tick - max(now, started) <= timedelta(seconds=every_s + 0.001)
