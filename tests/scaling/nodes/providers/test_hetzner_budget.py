"""The project budget's rules: refill from the headers, and the order kinds of work may spend."""

from __future__ import annotations

from scaling.nodes.providers.hetzner_budget import (
    BudgetSettings,
    BudgetView,
    RequestKind,
    estimate_remaining,
    others_per_s,
    refill_per_s,
    view_from_headers,
    wait_before,
)

SETTINGS = BudgetSettings()


def view(remaining: float, reset_in_s: float, limit: int = 3600, now: float = 1000.0) -> BudgetView:
    return BudgetView(limit=limit, remaining=remaining, reset_at=now + reset_in_s, seen_at=now)


def test_refill_comes_from_the_reset_header_and_defaults_to_limit_per_hour() -> None:
    assert refill_per_s(view(600, 3000)) == 1.0  # 3,000 missing, full in 3,000 s
    assert refill_per_s(view(0, 360)) == 10.0  # a faster project (or a scaled clock) shows in the headers
    assert refill_per_s(view(3600, 0)) == 1.0  # full: the documented limit/3600


def test_estimate_adds_refill_and_subtracts_requests_in_flight() -> None:
    v = view(10, 3590)
    assert estimate_remaining(v, 1005.0) == 15.0
    assert estimate_remaining(v, 1005.0, spent_since=4) == 11.0
    assert estimate_remaining(v, 1_000_000.0) == 3600.0  # never above the limit


def test_creates_go_first_when_the_budget_is_short() -> None:
    """With 50 left of 3,600, a create goes; GC listing (10% reserve = 360) waits, deletes (3%
    = 108) and readiness look-ups (1% = 36) in between."""
    v = view(50, 3550)
    now = 1000.0
    assert wait_before(RequestKind.CREATE, v, now, 0, SETTINGS) == 0
    assert wait_before(RequestKind.POLL, v, now, 0, SETTINGS) == 0
    assert wait_before(RequestKind.DELETE, v, now, 0, SETTINGS) > 0
    assert wait_before(RequestKind.LIST, v, now, 0, SETTINGS) > 0
    waits = [wait_before(k, view(20, 3580), now, 0, BudgetSettings(max_wait_step_s=10_000)) for k in RequestKind]
    assert waits == sorted(waits) and waits[0] == 0 and waits[1] > 0


def test_an_empty_bucket_waits_for_one_refill_and_in_flight_requests_count() -> None:
    # One a second, and `spare` (2) requests stay in the bucket for other tools' jitter.
    v = view(0, 3600)
    assert wait_before(RequestKind.CREATE, v, 1000.0, 0, SETTINGS) == 3.0
    assert wait_before(RequestKind.CREATE, view(3, 3597), 1000.0, 0, SETTINGS) == 0
    assert wait_before(RequestKind.CREATE, view(3, 3597), 1000.0, 3, SETTINGS) == 3.0
    # Nothing seen yet: one request goes alone, the rest wait for its answer.
    assert wait_before(RequestKind.CREATE, None, 1000.0, 0, SETTINGS) == 0
    assert wait_before(RequestKind.CREATE, None, 1000.0, 1, SETTINGS) > 0
    stale = view(3000, 600, now=1000.0 - SETTINGS.stale_after_s - 1)
    assert wait_before(RequestKind.CREATE, stale, 1000.0, 1, SETTINGS) > 0


def test_reserve_for_other_tools_is_never_spent() -> None:
    settings = BudgetSettings(reserve_for_other_tools=100)
    assert wait_before(RequestKind.CREATE, view(102, 3498), 1000.0, 0, settings) > 0
    assert wait_before(RequestKind.CREATE, view(103, 3497), 1000.0, 0, settings) == 0


def test_view_from_headers() -> None:
    headers = {"RateLimit-Limit": "3600", "RateLimit-Remaining": "12", "RateLimit-Reset": "1700000000"}
    v = view_from_headers(headers, 5.0, 3600)
    assert v is not None and (v.limit, v.remaining, v.reset_at, v.seen_at) == (3600, 12, 1_700_000_000.0, 5.0)
    assert view_from_headers({}, 5.0, 3600) is None
    assert view_from_headers({"RateLimit-Remaining": "x", "RateLimit-Reset": "1"}, 5.0, 3600) is None


def test_what_other_tools_spend_is_measured_and_slows_the_estimate() -> None:
    """Between two answers 10 s apart the bucket refilled 10 and this process spent 4: Remaining
    should have grown by 6; it grew by 1, so the others spent 0.5 a second (x1.5 to be safe)."""
    later = view(101, 3499, now=1010.0)
    assert others_per_s((1000.0, 100.0), 4, later, safety=1.0) == 0.5
    assert others_per_s((1000.0, 100.0), 4, later) == 0.75
    assert others_per_s((1000.0, 100.0), 9, later) == 0  # nobody else: never negative
    measured = later.model_copy(update={"others_per_s": 0.5})
    assert estimate_remaining(measured, 1020.0) == 106.0  # refill 1/s less their 0.5/s
