"""One Hetzner project's request budget, and which kind of work may spend it now.

Hetzner counts requests per project, not per token: a bucket of `RateLimit-Limit` requests
(3,600 by default) that refills evenly, one a second at 3,600/hour, and is full again at
`RateLimit-Reset` (a Unix time). Every answer carries `RateLimit-Remaining`, so every worker and
every other tool of the project reads the same truth: pacing on the headers keeps all of
growth's loops and worker replicas in step with each other and with other tools, and survives
restarts (the bucket lives at Hetzner).

When the bucket runs low, work is ordered by keeping a reserve per kind: a scale-up create may
spend down to `reserve_for_other_tools`, a readiness lookup stops a little earlier, a delete
earlier still, and garbage-collection listing earliest, so a short budget goes to new capacity
first (Cluster Autoscaler users see scale-ups stall behind listing: autoscaler#4133).
"""

from __future__ import annotations

from enum import IntEnum

from pydantic import BaseModel, ConfigDict, Field


class RequestKind(IntEnum):
    """What a request is for; lower goes first when the budget is short."""

    CREATE = 0  # scale-up: catalogue, image and placement look-ups, the create itself
    POLL = 1  # readiness and recovery look-ups
    DELETE = 2  # scale-down and leaked-machine deletes
    LIST = 3  # garbage collection's listing of every machine


class BudgetSettings(BaseModel):
    """How much of the project's bucket each kind of work leaves for the kinds before it."""

    model_config = ConfigDict(extra="forbid")

    rate_limit_per_hour: int = Field(3600, gt=0)  # assumed until an answer's RateLimit-Limit says otherwise
    reserve_for_other_tools: int = Field(0, ge=0)  # requests growth never spends (other tools' burst)
    # Fraction of the limit each kind leaves unspent, on top of reserve_for_other_tools.
    reserve_poll: float = Field(0.01, ge=0, le=1)
    reserve_delete: float = Field(0.03, ge=0, le=1)
    reserve_list: float = Field(0.10, ge=0, le=1)
    max_wait_step_s: float = Field(5.0, gt=0)  # re-check at least this often while waiting
    # Requests always left spare: other tools' requests land between an answer and the next
    # send (before their rate is measured, too), and a spare keeps both sides clear of 429s.
    spare: float = Field(2.0, ge=0)
    # An answer older than this says little about what other tools spent since: probe again,
    # and measure their rate afresh from the probe's answer. While requests flow, answers come
    # every second or so; this only ends a wait (10 s: a 429 storm mid-burst cost 27-58 s at 30).
    stale_after_s: float = Field(10.0, gt=0)


class BudgetView(BaseModel):
    """The project's bucket as the last answer showed it."""

    limit: int
    remaining: float
    reset_at: float  # Unix time the bucket is full again
    seen_at: float  # when that answer arrived
    others_per_s: float = 0.0  # what other tools (and workers) of the project spend, as measured


def refill_per_s(view: BudgetView) -> float:
    """Requests a second the bucket gains: from the headers when it is not full (what is missing
    refills by reset), else the documented limit/3600."""
    missing = view.limit - view.remaining
    span = view.reset_at - view.seen_at
    if missing >= 1 and span > 0:
        return missing / span
    return view.limit / 3600.0


def estimate_remaining(view: BudgetView, now: float, spent_since: int = 0) -> float:
    """Remaining now: what the last answer said, plus the refill since less what other tools
    spend meanwhile, less what this process has sent since (its requests still in flight)."""
    refilled = max(0.0, now - view.seen_at) * (refill_per_s(view) - view.others_per_s)
    return min(float(view.limit), view.remaining + refilled) - spent_since


def others_per_s(start: tuple[float, float], own_answered: int, view: BudgetView, safety: float = 1.5) -> float:
    """Requests a second the rest of the project spent between two answers: the first answer's
    Remaining (`start`: time, remaining) plus the refill since, less this process's answered
    requests, is what Remaining would be if nobody else had spent; the shortfall is theirs.
    Rounding of Remaining telescopes away over the span. `safety` errs on the side of waiting."""
    t0, r0 = start
    span = view.seen_at - t0
    if span <= 0:
        return 0.0
    expected = r0 + span * refill_per_s(view) - own_answered
    return max(0.0, (expected - view.remaining) / span) * safety


def reserve_for(kind: RequestKind, limit: int, settings: BudgetSettings) -> float:
    """Requests a kind leaves in the bucket for the kinds ahead of it (and for other tools)."""
    fraction = {
        RequestKind.CREATE: 0.0,
        RequestKind.POLL: settings.reserve_poll,
        RequestKind.DELETE: settings.reserve_delete,
        RequestKind.LIST: settings.reserve_list,
    }[kind]
    return settings.reserve_for_other_tools + fraction * limit


def wait_before(
    kind: RequestKind, view: BudgetView | None, now: float, spent_since: int, settings: BudgetSettings
) -> float:
    """Seconds to wait before sending one request of `kind` (0 = send now).

    Before any answer, or when the last one is stale, one request goes alone: its answer's headers
    show the bucket (which other tools may have nearly emptied) before more are sent."""
    if view is None or now - view.seen_at > settings.stale_after_s:
        return 0.0 if spent_since == 0 else settings.max_wait_step_s
    need = reserve_for(kind, view.limit, settings) + settings.spare + 1.0
    have = estimate_remaining(view, now, spent_since)
    if have >= need:
        return 0.0
    net = max(refill_per_s(view) - view.others_per_s, refill_per_s(view) / 10)
    return min(settings.max_wait_step_s, (need - have) / net)


def view_from_headers(headers: dict[str, str], now: float, fallback_limit: int) -> BudgetView | None:
    """The bucket from an answer's RateLimit-* headers; None when they are missing or malformed."""
    try:
        limit = int(headers.get("RateLimit-Limit") or fallback_limit)
        remaining = int(headers["RateLimit-Remaining"])
        reset_at = float(headers["RateLimit-Reset"])
    except (KeyError, TypeError, ValueError):
        return None
    return BudgetView(limit=limit, remaining=remaining, reset_at=reset_at, seen_at=now)
