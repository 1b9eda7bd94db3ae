"""Seed 000's scale-up evaluation (a new cluster when none can hold the biggest size or free units
fall under the slack, below the region's limit): slack boundary, limit nil vs 0, biggest size,
clusters that give no capacity, expected capacity, limit coverage; and its properties."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from scaling.fleet.capacity import TypeRules, tally_capacity
from scaling.fleet.models import ClusterPhase, ClusterRecord
from scaling.fleet.scale_up import ScaleUpReason, scale_up_needed
from tests.scaling.fleet.strategies import clusters, rules

STD = TypeRules(instance_type="standard", limit=None, slack=0, biggest_units=2, expected_units=10)


def ready(cid: str, max_units: int | None, consumed: int = 0, itype: str = "standard") -> ClusterRecord:
    return ClusterRecord(
        id=cid, instance_type=itype, phase=ClusterPhase.READY, max_units=max_units,
        consumed_units=consumed, instances=1 if consumed else 0,
    )  # fmt: skip


def in_phase(cid: str, phase: ClusterPhase, max_units: int | None = 10) -> ClusterRecord:
    return ClusterRecord(id=cid, instance_type="standard", phase=phase, max_units=max_units)


def test_no_cluster_at_all_scales_up() -> None:
    d = scale_up_needed([], STD)
    assert d.needed and d.reason == ScaleUpReason.NO_ROOM_FOR_BIGGEST


def test_limit_none_means_no_limit() -> None:
    d = scale_up_needed([ready("a", 100, consumed=99)], STD.model_copy(update={"limit": None}))
    assert d.needed and d.reason == ScaleUpReason.NO_ROOM_FOR_BIGGEST


def test_limit_zero_is_always_reached() -> None:
    d = scale_up_needed([], STD.model_copy(update={"limit": 0}))
    assert not d.needed and d.reason == ScaleUpReason.LIMIT_REACHED


def test_limit_reached_when_consumed_equals_limit() -> None:
    limited = STD.model_copy(update={"limit": 10})
    assert scale_up_needed([ready("a", 10, consumed=10)], limited).reason == ScaleUpReason.LIMIT_REACHED
    assert scale_up_needed([ready("a", 10, consumed=9)], limited).needed  # 1 free < biggest 2


def test_slack_boundary_is_strict() -> None:
    slack5 = STD.model_copy(update={"slack": 5})
    at_boundary = scale_up_needed([ready("a", 10, consumed=5)], slack5)  # free == slack
    assert not at_boundary.needed and at_boundary.reason == ScaleUpReason.ENOUGH_CAPACITY
    below = scale_up_needed([ready("a", 10, consumed=6)], slack5)  # free 4 < 5
    assert below.needed and below.reason == ScaleUpReason.FREE_BELOW_SLACK


def test_slack_zero_never_triggers() -> None:
    d = scale_up_needed([ready("a", 10, consumed=8)], STD)  # free 2 == biggest, slack 0
    assert not d.needed and d.reason == ScaleUpReason.ENOUGH_CAPACITY


def test_biggest_size_needs_one_cluster_with_room_for_it() -> None:
    # Three units free in total, but no single cluster can take a 2-unit instance.
    clusters = [ready("a", 10, consumed=9), ready("b", 10, consumed=9), ready("c", 10, consumed=9)]
    d = scale_up_needed(clusters, STD.model_copy(update={"slack": 3}))
    assert d.needed and d.reason == ScaleUpReason.NO_ROOM_FOR_BIGGEST and d.free_units == 3


def test_failed_deprovisioning_cleanup_give_no_capacity() -> None:
    for phase in (ClusterPhase.FAILED, ClusterPhase.DEPROVISIONING, ClusterPhase.CLEANUP, ClusterPhase.DELETED):
        d = scale_up_needed([in_phase("x", phase, max_units=100)], STD)
        assert d.needed and d.total_units == 0, phase


def test_failed_clusters_count_for_no_limit() -> None:
    failed = ClusterRecord(id="f", instance_type="standard", phase=ClusterPhase.FAILED, max_units=10, consumed_units=10)
    assert scale_up_needed([failed], STD.model_copy(update={"limit": 10})).needed


def test_ongoing_scale_up_blocks_another() -> None:
    for phase in (ClusterPhase.ACCEPTED, ClusterPhase.PROVISIONING, ClusterPhase.PROVISIONED, ClusterPhase.WAITING):
        d = scale_up_needed([ready("a", 10, consumed=10), in_phase("n", phase, max_units=None)], STD)
        assert not d.needed and d.reason == ScaleUpReason.SCALE_UP_ONGOING, phase


def test_not_yet_reported_clusters_count_with_expected_capacity() -> None:
    t = tally_capacity([in_phase("n", ClusterPhase.PROVISIONING, max_units=None), ready("a", None, consumed=3)], STD)
    assert t.total_units == 2 * STD.expected_units and t.consumed_units == 3
    # A ready cluster that has not reported yet holds the expected capacity.
    assert not scale_up_needed([ready("a", None, consumed=3)], STD).needed


def test_slack_trigger_does_not_fire_when_capacity_covers_the_limit() -> None:
    rules = STD.model_copy(update={"limit": 10, "slack": 5})
    d = scale_up_needed([ready("a", 10, consumed=7)], rules)  # free 3 < 5, but total 10 >= limit
    assert not d.needed and d.reason == ScaleUpReason.LIMIT_COVERED
    d = scale_up_needed([ready("a", 10, consumed=7)], rules.model_copy(update={"limit": 11}))
    assert d.needed and d.reason == ScaleUpReason.FREE_BELOW_SLACK


def test_other_types_are_ignored() -> None:
    d = scale_up_needed([ready("dev", 100, itype="developer")], STD)
    assert d.needed and d.total_units == 0


@given(clusters(), rules())
def test_limit_zero_never_scales_up(cs: list[ClusterRecord], r: TypeRules) -> None:
    assert not scale_up_needed(cs, r.model_copy(update={"limit": 0})).needed


@given(clusters(), rules())
def test_no_scale_up_while_one_is_ongoing(cs: list[ClusterRecord], r: TypeRules) -> None:
    cs = [*cs, ClusterRecord(id="new", instance_type=r.instance_type, phase=ClusterPhase.ACCEPTED)]
    assert not scale_up_needed(cs, r).needed


@given(clusters(), rules(), st.integers(0, 20))
def test_adding_an_empty_ready_cluster_never_causes_a_scale_up(
    cs: list[ClusterRecord], r: TypeRules, units: int
) -> None:
    before = scale_up_needed(cs, r)
    after = scale_up_needed([*cs, ready("extra", units)], r)
    assert before.needed or not after.needed


@given(clusters(), rules())
def test_scale_up_fires_only_for_a_reason(cs: list[ClusterRecord], r: TypeRules) -> None:
    d = scale_up_needed(cs, r)
    if d.needed:
        assert r.limit is None or d.consumed_units < r.limit
        assert d.reason in (ScaleUpReason.NO_ROOM_FOR_BIGGEST, ScaleUpReason.FREE_BELOW_SLACK)
        if d.reason == ScaleUpReason.FREE_BELOW_SLACK:
            assert r.slack > 0 and d.free_units < r.slack
            assert r.limit is None or d.total_units < r.limit
