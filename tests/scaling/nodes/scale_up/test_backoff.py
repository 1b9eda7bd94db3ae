"""Pool backoff: Cluster Autoscaler's schedule (5 min, doubling, 30 min cap)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from scaling.nodes.models import Pool
from scaling.nodes.scale_up.backoff import PoolBackoff, pool_backoff_seconds


def test_schedule() -> None:
    assert [pool_backoff_seconds(n) for n in range(0, 7)] == [0, 300, 600, 1200, 1800, 1800, 1800]
    assert pool_backoff_seconds(-3) == 0
    assert pool_backoff_seconds(10_000) == 1800


@given(st.integers(min_value=1, max_value=10_000))
def test_schedule_monotone_and_bounded(n: int) -> None:
    assert 300 <= pool_backoff_seconds(n) <= 1800
    assert pool_backoff_seconds(n) <= pool_backoff_seconds(n + 1)


def test_failures_double_and_success_clears() -> None:
    b = PoolBackoff()
    pool = Pool(group="g", name="hetzner-cx32", provider="hetzner", server_type="cx32", priority=1)
    assert b.record_failure(pool, now=1000.0) == 1300.0
    assert b.active(1299.0) == {("g", "hetzner-cx32")}
    assert b.active(1300.0) == set()
    assert b.record_failure(pool, now=1400.0) == 2000.0  # second in a row: 10 min
    assert b.is_active(pool, 1999.0) and not b.is_active(("g", "other"), 1999.0)
    b.record_success(pool)
    assert b.active(1401.0) == set()
    assert b.record_failure(pool, now=3000.0) == 3300.0  # count restarted


def test_groups_are_separate_and_long_quiet_resets() -> None:
    b = PoolBackoff()
    for t in (0.0, 10.0, 20.0):
        b.record_failure(("a", "p"), now=t)
    b.record_failure(("b", "p"), now=20.0)
    assert b.entries["a/p"].consecutive_failures == 3
    assert b.active(25.0) == {("a", "p"), ("b", "p")}
    assert b.record_failure(("a", "p"), now=20.0 + 4 * 3600) == 20.0 + 4 * 3600 + 300
    b.prune(now=20.0 + 8 * 3600)
    assert b.entries == {}


def test_round_trips_as_json() -> None:
    b = PoolBackoff()
    b.record_failure(("g", "p"), now=5.0)
    again = PoolBackoff.model_validate_json(b.model_dump_json())
    assert again.active(6.0) == {("g", "p")}
