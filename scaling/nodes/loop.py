"""Decisions the NodeAutoscaler loop makes between its activities, as pure functions so the
workflow reads as the state machine it is and each rule is unit-tested on its own.

Callers pass `now` (workflow.now().timestamp() in a workflow), so replays decide the same.
"""

from __future__ import annotations

from collections.abc import Iterable

from scaling.nodes.models import Attempt, AttemptResult, PlannedNode, PodProblem, ScaleUpPlan, pool_key
from scaling.nodes.scale_up.backoff import pool_backoff_seconds
from scaling.nodes.scale_up.demand import NodeTally
from scaling.nodes.scale_up.in_flight_table import epoch_ms
from scaling.nodes.scale_up.requests import NodeRequestStatus

NEVER_SATISFIABLE = "NeverSatisfiable"


def apply_attempt_backoff(
    failures: dict[str, int], until: dict[str, float], group: str, attempt: Attempt, now: float
) -> None:
    """A pool out of quota, or whose scale-up an approval gate denied, is skipped for a growing
    while; a Ready node from it clears that.

    Other results (no capacity, errors) move the request on to its next pool without a
    backoff: capacity comes back by itself, quota needs an operator."""
    key = pool_key(group, attempt.pool)
    if attempt.result in (AttemptResult.QUOTA_EXCEEDED, AttemptResult.DENIED):
        failures[key] = failures.get(key, 0) + 1
        until[key] = now + pool_backoff_seconds(failures[key])
    elif attempt.result == AttemptResult.READY and failures.pop(key, None) is not None:
        until.pop(key, None)


def newly_reported_attempt(previous: NodeRequestStatus | None, update: NodeRequestStatus) -> Attempt | None:
    """The update's latest attempt, unless the request already reported it as it is now.

    A request reports after every attempt and again when it ends; an attempt must count once
    (a quota backoff doubles per counted failure)."""
    if not update.attempts:
        return None
    latest = update.attempts[-1]
    if previous is not None and previous.attempts and _same_attempt(previous.attempts[-1], latest):
        return None
    return latest


def _same_attempt(a: Attempt, b: Attempt) -> bool:
    # By pool, result and time (to the millisecond): a record carried across continue-as-new
    # keeps no more (scaling.nodes.scale_up.in_flight_table).
    return (a.pool, a.result, epoch_ms(a.timestamp)) == (b.pool, b.result, epoch_ms(b.timestamp))


def prune_never_satisfiable(
    known: dict[str, PodProblem], pending: set[str], groups_changed: bool
) -> dict[str, PodProblem]:
    """Never-satisfiable pod shapes still worth remembering: none when the groups changed (a
    new pool may hold them), otherwise those still pending (`pending`: shape keys)."""
    if groups_changed:
        return {}
    return {key: p for key, p in known.items() if key in pending}


def never_satisfiable_of(problems: Iterable[PodProblem]) -> dict[str, PodProblem]:
    """By shape (one entry however many pods): the planner reports whole shapes."""
    out: dict[str, PodProblem] = {}
    for p in problems:
        if p.reason == NEVER_SATISFIABLE:
            key = p.key or p.uid
            if key in out:
                out[key] = out[key].model_copy(update={"count": out[key].count + p.count})
            else:
                out[key] = p
    return out


def unavailable_pools(
    banned: Iterable[str], backoff_until: dict[str, float], now: float, capacity_until: dict[str, float] | None = None
) -> set[tuple[str, str]]:
    """Pairs the planner must skip: (group, pool) banned by an operator or backing off, and
    (provider, server type) out of capacity (capacity memory)."""
    timed = {**backoff_until, **(capacity_until or {})}
    keys = set(banned) | {k for k, until in timed.items() if until > now}
    return {(group, pool) for group, _, pool in (k.partition("/") for k in keys)}


def may_scale_down(plan: ScaleUpPlan, enabled: bool, nodes: NodeTally, removals_running: bool) -> bool:
    """Whether this loop runs its scale-down step.

    Not in a loop that scaled up (Cluster Autoscaler's rule; the new nodes are empty), nor while
    pods are about to land on an existing or coming node (a just-Ready node looks empty until
    the scheduler binds them; marking it would strand them and cause another scale-up). And
    only when growth could remove something: a growth node exists or a removal is running."""
    if not enabled or plan.new_nodes or plan.pods_fit_existing or plan.pods_covered:
        return False
    return removals_running or any(c.count for c in nodes.groups)


def fresh_problems(problems: list[PodProblem], reported: list[str], keep: int) -> tuple[list[PodProblem], list[str]]:
    """Problems not yet reported (one NotTriggerScaleUp event per pod and reason, not one per
    loop) and the updated reported list, bounded to the `keep` most recent keys."""
    seen = set(reported)
    fresh: list[PodProblem] = []
    for p in problems:
        key = f"{p.uid}/{p.reason}"
        if key not in seen:
            seen.add(key)
            fresh.append(p)
    updated = reported + [f"{p.uid}/{p.reason}" for p in fresh]
    return fresh, updated[-keep:] if keep > 0 else []


def within_in_flight_limit(planned: list[PlannedNode], in_flight: int, limit: int) -> list[PlannedNode]:
    """The planned nodes to request now: no more than `limit` requests in flight. The rest
    of the pods stay pending and the next loop plans them again (in plan order: largest
    pods first, minNodes requests last)."""
    return planned[: max(limit - in_flight, 0)]
