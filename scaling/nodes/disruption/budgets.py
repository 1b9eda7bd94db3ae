"""Disruption budgets: how many of a group's nodes may be disrupted now, per reason.

Karpenter's rules (kubernetes-sigs/karpenter pkg/apis/v1/nodepool.go, GetAllowedDisruptionsByReason
and Budget.IsActive; pkg/controllers/disruption/helpers.go, BuildDisruptionBudgetMapping):
- A budget without schedule and duration is always active; one with them is active while a cron hit
  (UTC, robfig/cron's standard syntax with @yearly and friends) lies in (now - duration, now].
- An active budget allows ``nodes`` of the group: a count, or a percentage of its nodes rounded
  up (as Kubernetes rounds a PDB's maxUnavailable: 5 % of 10 nodes allows 1); an inactive one
  allows any number.
- The most restrictive active budget that names the reason (or names none) wins.
- What is allowed now is that, less the group's nodes already being disrupted, never below 0.

``now`` is always the workflow's time, so a window that opened or closed while no worker ran is
honoured when one is back, and ``next_edge`` tells the loop when to look again at the latest.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime, timedelta

from croniter import croniter

from scaling.nodes.disruption.models import Budget, Disruption, DisruptionReason

UNLIMITED = 2**31 - 1  # Karpenter's math.MaxInt32: no active budget limits the reason
MACROS = ("@annually", "@yearly", "@monthly", "@weekly", "@daily", "@midnight", "@hourly")
BUDGET_EXHAUSTED = "DisruptionBudgetExhausted"


def schedule_problem(schedule: str) -> str | None:
    """Why a cron schedule is refused (None: valid). Five fields or one of MACROS, as Karpenter's
    CRD pattern and robfig/cron's standard parser take them; a range whose start is past its end
    ("tue-mon") is refused as robfig refuses it."""
    text = schedule.strip()
    if text.startswith("@"):
        return None if text in MACROS else f"unknown macro {text!r} (known: {', '.join(MACROS)})"
    fields = text.split()
    if len(fields) != 5:
        return f"must have 5 fields (minute hour day-of-month month day-of-week), got {len(fields)}"
    for field in fields:
        for part in field.split(","):
            lo, sep, hi = part.split("/")[0].partition("-")
            start, end = _ordinal(lo), _ordinal(hi)
            if sep and start is not None and end is not None and start > end:
                return f"beginning of range ({start}) beyond end of range ({end})"
    if not croniter.is_valid(text):
        return f"is not a valid cron expression: {schedule!r}"
    return None


_NAMES = {n: i for i, n in enumerate(["sun", "mon", "tue", "wed", "thu", "fri", "sat"])} | {
    n: i + 1 for i, n in enumerate(["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"])
}


def _ordinal(token: str) -> int | None:
    if token.isdigit():
        return int(token)
    return _NAMES.get(token.lower())


def _cron(budget: Budget, start: datetime) -> croniter:
    return croniter(budget.schedule or "* * * * *", start)


def _utc(now: float) -> datetime:
    return datetime.fromtimestamp(now, UTC)


def is_active(budget: Budget, now: float) -> bool:
    """Whether the budget limits disruptions at ``now`` (epoch seconds)."""
    if budget.schedule is None and budget.duration_s is None:
        return True
    # robfig's Next(t) is the first hit strictly after t, at whole seconds.
    checkpoint = _utc(now) - timedelta(seconds=budget.duration_s or 0.0)
    nxt = _cron(budget, checkpoint).get_next(datetime)
    return nxt <= _utc(now)


def scaled_nodes(nodes: str, total: int) -> int:
    """A budget's ``nodes`` for a group of ``total`` nodes: "3" is 3, "10%" is 10 % rounded up."""
    if nodes.endswith("%"):
        percent = int(nodes[:-1])
        return -(-percent * total // 100)  # ceil without floats
    return int(nodes)


def allowed(budget: Budget, total: int, now: float) -> int:
    return scaled_nodes(budget.nodes, total) if is_active(budget, now) else UNLIMITED


def allowed_by_reason(disruption: Disruption, total: int, reason: DisruptionReason, now: float) -> int:
    """The most restrictive active budget's allowance for ``reason`` (UNLIMITED: none limits it)."""
    return min(
        (allowed(b, total, now) for b in disruption.budgets if not b.reasons or reason in b.reasons),
        default=UNLIMITED,
    )


def allowed_now(disruption: Disruption, total: int, disrupting: int, reason: DisruptionReason, now: float) -> int:
    """How many more of a group's ``total`` nodes may start a ``reason`` disruption now, with
    ``disrupting`` of them being disrupted already (for any reason, on any worker)."""
    limit = allowed_by_reason(disruption, total, reason, now)
    return limit if limit == UNLIMITED else max(limit - disrupting, 0)


def next_edge(disruptions: Iterable[Disruption], now: float) -> float | None:
    """The first time after ``now`` at which a scheduled budget may open or close (epoch seconds);
    None when no budget has a schedule. A loop that reuses an evaluation reuses it no longer."""
    edges: list[float] = []
    current = _utc(now)
    for d in disruptions:
        for b in d.budgets:
            if b.schedule is None:
                continue
            opens = _cron(b, current).get_next(datetime)
            edges.append(opens.timestamp())
            # The last hit at or before now: get_prev is strictly before its start.
            last = _cron(b, current.replace(microsecond=0) + timedelta(seconds=1)).get_prev(datetime)
            closes = last.timestamp() + (b.duration_s or 0.0)
            if closes > now:
                edges.append(closes)
    return min(edges) if edges else None
