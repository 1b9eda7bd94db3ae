"""Scale-in/scale-out intervals, applied to every change (group creation and deletion too).

tidb-operator keeps lastAutoScalingTimestamp per group and checks a change against it with
the change's direction interval; a new group has no timestamp and a deleted one loses it, so
creating or deleting groups bypassed the guard. growth keeps the last change per component
(across every group, surviving group deletion) and lets a change of direction D through only
when now >= last change + interval(D). Per-group timestamps are kept for status only.

A change counts from when it was done, its write and Event complete (the workflow stamps it
then, not at its round's start): a write retried after a killed worker must not shorten the
next change's wait.

Rounds fall on ticks (`next_tick`): every scan interval, at an offset hashed from the loop's
workflow id, so 200 loops started in one second spread over the interval instead of firing
together (measured: issue 21's bench, docs/components.md).
"""

from __future__ import annotations

import hashlib
import math
from datetime import UTC, datetime, timedelta

from pydantic import BaseModel, Field

from scaling.components.plan import Change, ComponentPlan, Direction
from scaling.components.spec import ComponentSpec


class ComponentTiming(BaseModel):
    last_change_at: datetime | None = None  # any direction, any group of the component
    last_direction: Direction | None = None
    groups: dict[str, datetime] = Field(default_factory=dict)  # cluster name -> its last change


def interval_s(spec: ComponentSpec, direction: Direction) -> int:
    return spec.scale_out_interval_s if direction == "out" else spec.scale_in_interval_s


def allowed_at(timing: ComponentTiming, spec: ComponentSpec, direction: Direction) -> datetime | None:
    """The earliest time a change of `direction` may happen; None: now (nothing happened yet)."""
    if timing.last_change_at is None:
        return None
    return timing.last_change_at + timedelta(seconds=interval_s(spec, direction))


def is_allowed(timing: ComponentTiming, spec: ComponentSpec, direction: Direction, now: datetime) -> bool:
    at = allowed_at(timing, spec, direction)
    return at is None or now >= at


class Gated(BaseModel):
    allowed: list[Change] = Field(default_factory=list)
    deferred: list[Change] = Field(default_factory=list)
    retry_at: datetime | None = None  # earliest time a deferred change may go


def gate(plan: ComponentPlan, timing: ComponentTiming, spec: ComponentSpec, now: datetime) -> Gated:
    """Split a plan into what may be applied now and what waits for its interval."""
    out = Gated()
    for change in plan.changes:
        if is_allowed(timing, spec, change.direction, now):
            out.allowed.append(change)
        else:
            out.deferred.append(change)
            at = allowed_at(timing, spec, change.direction)
            if at is not None and (out.retry_at is None or at < out.retry_at):
                out.retry_at = at
    return out


def record(timing: ComponentTiming, applied: list[Change], now: datetime) -> ComponentTiming:
    """Timing after `applied` went through at `now`."""
    if not applied:
        return timing
    groups = dict(timing.groups)
    for change in applied:
        groups[change.cluster] = now
    direction = "in" if all(c.direction == "in" for c in applied) else "out"
    return ComponentTiming(last_change_at=now, last_direction=direction, groups=groups)


def tick_offset_s(key: str, every_s: float) -> float:
    """A fixed offset in [0, every_s) for `key`: a hash, so the same loop keeps its phase across
    workers, replays and continue-as-new."""
    digest = int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big")
    return (digest % max(1, round(every_s * 1000))) / 1000


def next_tick(started: datetime, now: datetime, every_s: float, key: str) -> datetime:
    """When the next round begins: the first of `key`'s ticks after this round's start, or, when
    the round outlasted it, the first after `now` (a late round skips ticks, never crowds them)."""
    offset = tick_offset_s(key, every_s)
    after = started.timestamp()
    tick = offset + (math.floor((after - offset) / every_s) + 1) * every_s
    if tick <= now.timestamp():
        tick = offset + (math.floor((now.timestamp() - offset) / every_s) + 1) * every_s
    return datetime.fromtimestamp(tick, tz=started.tzinfo or UTC)
