"""A workflow history as the replay and trail builders read it: one entry per step, payloads
already decoded to JSON values (the pydantic data converter's form).

An activity is one entry (its scheduling, with the result once it completed), as are a child
workflow start, a signal and an accepted update. Builders validate the values into their own
models, so this module knows no loop. Bounded by the loader (`starters/history.py`), which
says when it stopped early.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

# "task": a workflow task completed (the workflow acted on everything delivered before it).
Kind = Literal["started", "activity", "child", "signal", "update", "timer", "task", "continued", "closed"]


class RecordedEvent(BaseModel):
    run_id: str
    event_id: int
    at: datetime
    kind: Kind
    name: str = ""  # activity type, child workflow type, signal or update name
    input: list[Any] = Field(default_factory=list)
    result: Any = None  # an activity's result (None until it completed)
    completed_event_id: int = 0  # where the result entered the history (0: never)
    failed: str = ""  # an activity's failure message, when it failed or timed out
    workflow_id: str = ""  # a child's workflow id


class RecordedHistory(BaseModel):
    workflow_id: str
    events: list[RecordedEvent] = Field(default_factory=list)
    runs: list[str] = Field(default_factory=list)  # oldest first
    truncated: str = ""  # why the loader stopped early ("" when it read everything)


def first_input(event: RecordedEvent) -> Any:
    return event.input[0] if event.input else None
