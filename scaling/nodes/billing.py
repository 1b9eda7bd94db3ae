"""Billing-aware scale-down: a server paid per started period is worth keeping until just
before that period ends.

Hetzner Cloud bills a server per started hour from its creation. Removing an unneeded server
at minute 20 saves nothing (the hour is paid) and a burst at minute 40 then buys a new one,
another started hour. So a pool with `billing` keeps an unneeded node, untainted, until
`margin_s` before its current paid period ends; pods arriving meanwhile land on it instead
of a new server. Only then is it selected for removal, at once (no tainted wait), and a node
that misses its window waits for the next one.

The period is counted from the Node's creationTimestamp, which comes after the server's
creation by its boot time (about a minute): the margin (default 5 minutes) covers that lag
plus the drain and delete. Data-safety blockers and protection are checked before this rule
and still win; this rule only ever delays a removal.
"""

from __future__ import annotations

import math

from scaling.nodes.models import Billing

HOUR_S = 3600.0
DEFAULT_MARGIN_S = 300.0
# Providers that bill per started period when a pool says nothing (Hetzner: per started hour).
DEFAULT_BILLING: dict[str, Billing] = {"hetzner": Billing(period_s=HOUR_S, margin_s=DEFAULT_MARGIN_S)}
BILLING_PERIOD = "BillingPeriodNotEnding"


def paid_until(created_at: float, now: float, period_s: float) -> float:
    """When the period `now` falls in ends (a period starts at creation and every period after)."""
    started = max(math.floor((now - created_at) / period_s), 0) + 1
    return created_at + started * period_s


def removable_from(created_at: float | None, now: float, billing: Billing | None) -> float | None:
    """When removing a node of this billing saves money: None if now (no billing, unknown age,
    or inside the last `margin_s` of its paid period), else when that window opens."""
    if billing is None or created_at is None:
        return None
    end = paid_until(created_at, now, billing.period_s)
    opens = end - billing.margin_s
    return None if now >= opens else opens
