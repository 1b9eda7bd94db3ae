"""Budgets: cases ported from kubernetes-sigs/karpenter pkg/apis/v1/nodepool_budgets_test.go
(GetAllowedDisruptionsByReason, AllowedDisruptions, IsActive) and the subtraction of nodes in flight
from pkg/controllers/disruption/helpers.go (BuildDisruptionBudgetMapping)."""

from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scaling.nodes.disruption.budgets import (
    UNLIMITED,
    allowed,
    allowed_by_reason,
    allowed_now,
    is_active,
    next_edge,
    scaled_nodes,
    schedule_problem,
)
from scaling.nodes.disruption.models import Budget, Disruption, DisruptionReason

EMPTY, UNDER, DRIFTED, EXPIRED = (
    DisruptionReason.EMPTY,
    DisruptionReason.UNDERUTILIZED,
    DisruptionReason.DRIFTED,
    DisruptionReason.EXPIRED,
)
KARPENTER_REASONS = (EMPTY, UNDER, DRIFTED)
HOUR = 3600.0
# "the middle of the year of 2000": Thursday 15 June, 12:30:30 UTC
NOW = datetime(2000, 6, 15, 12, 30, 30, tzinfo=UTC).timestamp()


def budgets() -> list[Budget]:
    """nodepool_budgets_test.go's BeforeEach."""
    every = {"schedule": "* * * * *", "duration_s": HOUR}
    return [
        Budget(nodes="10", **every),
        Budget(nodes="100", **every),
        Budget(nodes="100%", **every),
        Budget(nodes="15", reasons=(DRIFTED, UNDER), **every),
        Budget(nodes="5", reasons=(DRIFTED,), **every),
        Budget(nodes="0", reasons=(UNDER, DRIFTED, EMPTY), schedule="@weekly", duration_s=HOUR),
    ]


def with_(bs: list[Budget], i: int, **change: object) -> list[Budget]:
    out = list(bs)
    out[i] = bs[i].model_copy(update=change)
    return out


# -- GetAllowedDisruptionsByReason -------------------------------------------------------------


def test_zero_for_every_reason_when_a_budget_for_all_of_them_is_active() -> None:
    d = Disruption(budgets=with_(budgets(), 5, schedule="* * * * *"))
    assert all(allowed_by_reason(d, 100, r, NOW) == 0 for r in KARPENTER_REASONS)


def test_unlimited_for_every_reason_when_no_budget_is_active() -> None:
    d = Disruption(budgets=[b.model_copy(update={"schedule": "@yearly", "duration_s": HOUR}) for b in budgets()])
    assert all(allowed_by_reason(d, 100, r, NOW) == UNLIMITED for r in KARPENTER_REASONS)


def test_inactive_reason_budgets_are_ignored() -> None:
    bs = with_(with_(budgets(), 3, schedule="@yearly"), 4, schedule="@yearly")
    assert all(allowed_by_reason(Disruption(budgets=bs), 100, r, NOW) == 10 for r in KARPENTER_REASONS)


def test_a_budget_without_reasons_limits_every_reason() -> None:
    d = Disruption(budgets=budgets()[:1])
    assert all(allowed_by_reason(d, 100, r, NOW) == 10 for r in (*KARPENTER_REASONS, EXPIRED))


def test_the_most_restrictive_budget_per_reason_wins() -> None:
    d = Disruption(budgets=[*budgets(), Budget(nodes="4", schedule="* * * * *", duration_s=HOUR, reasons=(EMPTY,))])
    assert allowed_by_reason(d, 100, EMPTY, NOW) == 4
    assert allowed_by_reason(d, 100, DRIFTED, NOW) == 5
    assert allowed_by_reason(d, 100, UNDER, NOW) == 10  # the budget without reasons beats "15"


def test_no_budget_is_no_limit() -> None:
    assert allowed_by_reason(Disruption(), 100, EMPTY, NOW) == UNLIMITED


# -- AllowedDisruptions ------------------------------------------------------------------------


def test_an_inactive_budget_allows_any_number() -> None:
    assert allowed(budgets()[0].model_copy(update={"schedule": "@yearly"}), 100, NOW) == UNLIMITED


def test_an_active_count_and_percentage() -> None:
    assert allowed(budgets()[0], 100, NOW) == 10
    assert allowed(budgets()[2], 100, NOW) == 100


@pytest.mark.parametrize(
    ("nodes", "total", "expected"),
    [("5%", 10, 1), ("10%", 3, 1), ("10%", 0, 0), ("50%", 3, 2), ("100%", 7, 7), ("0%", 50, 0), ("3", 1, 3)],
)
def test_percentages_round_up_like_max_unavailable(nodes: str, total: int, expected: int) -> None:
    # nodepool.go: "Take the case with 5% disruptions, but 10 nodes. Karpenter will disrupt 1 node."
    assert scaled_nodes(nodes, total) == expected


@given(st.integers(0, 100), st.integers(0, 10_000))
def test_a_percentage_never_allows_less_than_its_share(percent: int, total: int) -> None:
    n, share = scaled_nodes(f"{percent}%", total), percent * total
    assert (n - 1) * 100 < share <= n * 100 if share else n == 0


# -- IsActive ----------------------------------------------------------------------------------


def test_schedules_are_read_in_utc() -> None:
    # Start of June 2000 (Go normalises day 0 to 31 May) in a zone an hour ahead of UTC.
    now = datetime(2000, 5, 31, 0, 0, 0, tzinfo=timezone(timedelta(hours=1))).timestamp()
    assert not is_active(Budget(schedule="@daily", duration_s=1800.0), now)


def test_a_budget_without_schedule_is_always_active() -> None:
    assert is_active(Budget(), NOW)


def test_active_and_inactive() -> None:
    assert is_active(budgets()[0], NOW)
    assert not is_active(budgets()[0].model_copy(update={"schedule": "@yearly"}), NOW)


def test_active_when_the_hit_is_inside_the_duration() -> None:
    now = datetime(1000, 1, 1, 12, 0, 0, tzinfo=UTC).timestamp()
    assert is_active(Budget(schedule="@yearly", duration_s=24 * HOUR), now)


def test_active_when_the_duration_is_longer_than_the_recurrence() -> None:
    now = datetime(2024, 1, 7, 0, 0, 0, tzinfo=UTC).timestamp()
    assert is_active(Budget(schedule="@daily", duration_s=48 * HOUR), now)


def test_inactive_when_the_hit_is_after_now() -> None:
    now = datetime(2024, 1, 7, 0, 0, 0, tzinfo=UTC).timestamp()
    assert not is_active(Budget(schedule="30 6 * * SUN", duration_s=6 * HOUR), now)


def test_a_window_is_open_at_its_hit_and_closed_at_its_end() -> None:
    # "0 9 * * mon-fri" for 8h: Monday 8 January 2024.
    b = Budget(nodes="0", schedule="0 9 * * mon-fri", duration_s=8 * HOUR)
    at = datetime(2024, 1, 8, 9, 0, 0, tzinfo=UTC).timestamp()
    assert not is_active(b, at - 1)
    assert is_active(b, at)
    assert is_active(b, at + 8 * HOUR - 1)
    assert not is_active(b, at + 8 * HOUR)
    assert not is_active(b, datetime(2024, 1, 13, 10, 0, 0, tzinfo=UTC).timestamp())  # Saturday


def test_reversed_ranges_are_refused_as_robfig_cron_refuses_them() -> None:
    assert "beginning of range (2) beyond end of range (1)" in (schedule_problem("0 0 * * tue-mon") or "")
    assert schedule_problem("@wrongly") is not None
    assert schedule_problem("* * * *") is not None
    assert schedule_problem("0 9 * * mon-fri") is None
    assert schedule_problem("@annually") is None


# -- what is left now, and the next edge -------------------------------------------------------


def test_nodes_in_flight_count_against_the_budget_never_below_zero() -> None:
    d = Disruption(budgets=[Budget(nodes="20%")])
    assert allowed_now(d, 10, 0, EMPTY, NOW) == 2
    assert allowed_now(d, 10, 1, EMPTY, NOW) == 1
    assert allowed_now(d, 10, 5, EMPTY, NOW) == 0
    assert allowed_now(Disruption(), 10, 5, EMPTY, NOW) == UNLIMITED


def test_next_edge_is_the_window_that_opens_or_closes_first() -> None:
    b = Budget(nodes="0", schedule="0 9 * * mon-fri", duration_s=8 * HOUR)
    monday_9 = datetime(2024, 1, 8, 9, 0, 0, tzinfo=UTC).timestamp()
    assert next_edge([Disruption(budgets=[b])], monday_9 - 600) == monday_9
    assert next_edge([Disruption(budgets=[b])], monday_9 + 600) == monday_9 + 8 * HOUR
    assert next_edge([Disruption(budgets=[Budget(nodes="1")])], monday_9) is None
