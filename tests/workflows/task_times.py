"""Workflow-task times read from a history: the workflow's own time in a task, as a replay reads it."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime

from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent


def task_started_after(events: Iterable[HistoryEvent], event_id: int = 0) -> datetime:
    """When the first workflow task after event `event_id` started (0: the run's first task)."""
    return next(
        e.event_time.ToDatetime(tzinfo=UTC)
        for e in events
        if e.event_id > event_id and e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED
    )
