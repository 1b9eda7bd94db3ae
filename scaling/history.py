"""A workflow history as the replay and trail builders read it: one entry per step, payloads
already decoded to JSON values (the pydantic data converter's form).

An activity is one entry (its scheduling, with the result once it completed), as are a local
activity (its marker: the result, never the input), a child workflow start, a signal and an
accepted update. Builders validate the values into their own
models, so this module knows no loop. Bounded by the loader (`starters/history.py`), which
says when it stopped early.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

# "task": a workflow task completed (the workflow acted on everything delivered before it).
# "signal_out": a signal this workflow sent to another (workflow_id names the receiver).
# "timer_ended": a timer fired or was canceled (name says which): a wait ended there.
Kind = Literal[
    "started",
    "activity",
    "local_activity",
    "child",
    "signal",
    "signal_out",
    "update",
    "timer",
    "timer_ended",
    "task",
    "continued",
    "closed",
]


class RecordedEvent(BaseModel):
    run_id: str
    event_id: int
    at: datetime
    kind: Kind
    name: str = ""  # activity type, child workflow type, signal or update name
    input: list[Any] = Field(default_factory=list)
    result: Any = None  # an activity's or local activity's result (None until it completed)
    completed_event_id: int = 0  # where the result entered the history (0: never)
    completed_at: datetime | None = None
    failed: str = ""  # an activity's failure message, when it failed or timed out
    workflow_id: str = ""  # a child's workflow id, or a sent signal's receiver


class RecordedHistory(BaseModel):
    workflow_id: str
    events: list[RecordedEvent] = Field(default_factory=list)
    runs: list[str] = Field(default_factory=list)  # oldest first
    truncated: str = ""  # why the loader stopped early ("" when it read everything)


def first_input(event: RecordedEvent) -> Any:
    return event.input[0] if event.input else None


class TrailEntry(BaseModel):
    """One step in an object's decision trail (`growth <loop> trail`)."""

    at: datetime
    what: str  # a short CamelCase kind: Planned, Attempt, Ready, Kept, Removed...
    detail: str
    workflow_id: str = ""  # whose history says so
    repeated: int = 1  # identical consecutive entries folded into one (first time shown)
    until: datetime | None = None  # the last of the folded entries


class Trail(BaseModel):
    subject: str  # node, cluster id, namespace/name
    entries: list[TrailEntry] = Field(default_factory=list)
    sources: list[str] = Field(default_factory=list)  # workflow ids read (and their runs)
    truncated: str = ""
    notes: list[str] = Field(default_factory=list)


def fold_repeats(entries: list[TrailEntry]) -> list[TrailEntry]:
    """Consecutive entries with the same kind and detail become one, counted (a node kept
    for the same reason in 300 evaluations is one line, not 300)."""
    out: list[TrailEntry] = []
    for e in sorted(entries, key=lambda e: e.at):
        last = out[-1] if out else None
        if last is not None and (last.what, last.detail) == (e.what, e.detail):
            last.repeated += 1
            last.until = e.at
        else:
            out.append(e.model_copy())
    return out


def bounded(trail: Trail, max_entries: int) -> Trail:
    """At most `max_entries`: the first half and the last half, with a note of what was cut."""
    if len(trail.entries) <= max_entries:
        return trail
    head, tail = max_entries // 2, max_entries - max_entries // 2
    cut = len(trail.entries) - max_entries
    trail.entries = trail.entries[:head] + trail.entries[len(trail.entries) - tail :]
    trail.truncated = (trail.truncated + "; " if trail.truncated else "") + f"{cut} entries in the middle left out"
    return trail
