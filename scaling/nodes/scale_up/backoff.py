"""Per-pool backoff after failed scale-ups, in the manner of Cluster Autoscaler.

A pool that reported no capacity (or quota, or a provider error) is skipped by the planner for a
while: 5 minutes after the first failure, doubling per consecutive failure, capped at 30
minutes. A success clears it; a long quiet spell (reset_after_s) restarts the count so a pool
that failed once yesterday is not punished at the cap today. Pure: callers pass `now`
(workflow.now().timestamp() in a workflow), so replays decide the same.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from scaling.nodes.models import Pool, pool_key

BACKOFF_INITIAL_S = 300.0
BACKOFF_MAX_S = 1800.0
BACKOFF_RESET_AFTER_S = 3 * 3600.0


def pool_backoff_seconds(
    consecutive_failures: int,
    initial_s: float = BACKOFF_INITIAL_S,
    max_s: float = BACKOFF_MAX_S,
) -> float:
    """Seconds a pool stays backed off after its n-th consecutive failure (0 for n <= 0)."""
    if consecutive_failures <= 0:
        return 0.0
    # Exponent clamped so huge counts cannot overflow float arithmetic.
    exponent = min(consecutive_failures - 1, 32)
    return min(initial_s * (2.0**exponent), max_s)


class BackoffEntry(BaseModel):
    group: str
    pool: str
    consecutive_failures: int
    last_failure: float
    until: float


PoolRef = Pool | tuple[str, str]


def _ref(pool: PoolRef) -> tuple[str, str]:
    if isinstance(pool, Pool):
        return pool.group, pool.name
    return pool[0], pool[1]


class PoolBackoff(BaseModel):
    """Backoff state for every (group, pool); lives in workflow state and crosses boundaries."""

    entries: dict[str, BackoffEntry] = Field(default_factory=dict)
    initial_s: float = BACKOFF_INITIAL_S
    max_s: float = BACKOFF_MAX_S
    reset_after_s: float = BACKOFF_RESET_AFTER_S

    def record_failure(self, pool: PoolRef, now: float) -> float:
        """Count one more failure; returns the time until which the pool is backed off."""
        group, name = _ref(pool)
        key = pool_key(group, name)
        prev = self.entries.get(key)
        failures = 1
        if prev is not None and now - prev.last_failure < self.reset_after_s:
            failures = prev.consecutive_failures + 1
        until = now + pool_backoff_seconds(failures, self.initial_s, self.max_s)
        self.entries[key] = BackoffEntry(
            group=group, pool=name, consecutive_failures=failures, last_failure=now, until=until
        )
        return until

    def record_success(self, pool: PoolRef) -> None:
        group, name = _ref(pool)
        self.entries.pop(pool_key(group, name), None)

    def active(self, now: float) -> set[tuple[str, str]]:
        """(group, pool) pairs the planner must skip at `now`."""
        return {(e.group, e.pool) for e in self.entries.values() if e.until > now}

    def is_active(self, pool: PoolRef, now: float) -> bool:
        group, name = _ref(pool)
        entry = self.entries.get(pool_key(group, name))
        return entry is not None and entry.until > now

    def prune(self, now: float) -> None:
        """Forget entries quiet for longer than reset_after_s (keeps workflow state small)."""
        self.entries = {k: e for k, e in self.entries.items() if now - e.last_failure < self.reset_after_s}
