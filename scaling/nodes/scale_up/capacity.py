"""Capacity memory, Karpenter's unavailable-offerings cache applied to pools.

A provider that answered "no capacity" for a server type is not asked again for that type for
a while (default 3 minutes): the planner plans the pods straight onto the next pool, packed for
that pool, instead of every request finding out for itself. Keyed by provider and server type,
so every group and pool offering that type skips it. Pure: callers pass `now`.
"""

from __future__ import annotations

from scaling.nodes.models import AttemptResult

CAPACITY_MEMORY_S = 180.0
# A request whose pool had no room (or no quota) hands its pods back to the autoscaler rather
# than falling back with a pod set sized for the first pool: re-planned, they pack the next
# pool's bigger nodes instead of leaving half of each empty.
HAND_BACK_RESULTS = frozenset({AttemptResult.INSUFFICIENT_CAPACITY, AttemptResult.QUOTA_EXCEEDED})


def offering_key(provider: str, server_type: str) -> str:
    """ "provider/server type": the form `unavailable_pools` reads as a (provider, type) pair."""
    return f"{provider}/{server_type.lower()}"


def remember_insufficient_capacity(
    until: dict[str, float], provider: str, server_type: str, now: float, ttl_s: float = CAPACITY_MEMORY_S
) -> dict[str, float]:
    """The memory after `provider` had no room for `server_type` at `now`; expired entries dropped
    (the memory is bounded by the offerings out of capacity in the last `ttl_s`)."""
    kept = {k: t for k, t in until.items() if t > now}
    if ttl_s > 0:
        key = offering_key(provider, server_type)
        kept[key] = max(kept.get(key, 0.0), now + ttl_s)
    return kept


def hands_back_pods(result: AttemptResult, replanning: bool) -> bool:
    """Whether a NodeRequest ends after this attempt and leaves its pods to the planner."""
    return replanning and result in HAND_BACK_RESULTS
