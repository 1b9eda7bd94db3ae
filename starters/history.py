"""Load a workflow's history for `what-if` and `trail`: from Temporal by workflow id (every run
of a continue-as-new chain, newest back to oldest) or from a history JSON file (the Web UI's
download, `temporal workflow show -o json`, tests/workflows/histories/*.json).

Bounded: at most `max_runs` runs and `max_events` events are read; the result says when it
stopped early. Payloads are decoded with the pydantic data converter into JSON values
(scaling/history.py); the builders validate them into their models.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

import click
from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import Client, WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.service import RPCError, RPCStatusCode

from scaling.history import RecordedEvent, RecordedHistory, Trail
from starters.cli import CliError

MAX_RUNS = 50
MAX_EVENTS = 100_000
F = TypeVar("F", bound=Callable[..., Any])
LOCAL = "core_local_activity"  # the SDK's marker of a local activity's result (a recorded decision)
_convert = pydantic_data_converter.payload_converter


def _values(payloads: object) -> list:
    items = list(getattr(payloads, "payloads", []) or [])
    return list(_convert.from_payloads(items)) if items else []


def decode_events(run_id: str, events: Iterable[HistoryEvent]) -> list[RecordedEvent]:
    """The steps of one run, in history order (an activity at its scheduling)."""
    out: list[RecordedEvent] = []
    activities: dict[int, RecordedEvent] = {}
    for e in events:
        at = e.event_time.ToDatetime().replace(tzinfo=None)
        base = {"run_id": run_id, "event_id": e.event_id, "at": at}
        t = e.event_type
        if t == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
            a = e.workflow_execution_started_event_attributes
            out.append(RecordedEvent(kind="started", name=a.workflow_type.name, input=_values(a.input), **base))
        elif t == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            a = e.activity_task_scheduled_event_attributes
            ev = RecordedEvent(kind="activity", name=a.activity_type.name, input=_values(a.input), **base)
            activities[e.event_id] = ev
            out.append(ev)
        elif t == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
            a = e.activity_task_completed_event_attributes
            ev = activities.get(a.scheduled_event_id)
            if ev is not None:
                values = _values(a.result)
                ev.result = values[0] if values else None
                ev.completed_event_id = e.event_id
                ev.completed_at = at
        elif t == EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED:
            ev = activities.get(e.activity_task_failed_event_attributes.scheduled_event_id)
            if ev is not None:
                ev.failed = e.activity_task_failed_event_attributes.failure.message or "failed"
        elif t == EventType.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT:
            ev = activities.get(e.activity_task_timed_out_event_attributes.scheduled_event_id)
            if ev is not None:
                ev.failed = "timed out"
        elif t == EventType.EVENT_TYPE_MARKER_RECORDED and e.marker_recorded_event_attributes.marker_name == LOCAL:
            # A local activity (a recorded decision): its result; its input is not in history.
            details = e.marker_recorded_event_attributes.details
            data = _values(details["data"]) if "data" in details else []
            result = _values(details["result"]) if "result" in details else []
            name = data[0].get("activity_type", "") if data and isinstance(data[0], dict) else ""
            failed = e.marker_recorded_event_attributes.failure.message if not result else ""
            ev = RecordedEvent(
                kind="local_activity", name=name, result=result[0] if result else None, failed=failed, **base
            )
            ev.completed_event_id, ev.completed_at = e.event_id, at
            out.append(ev)
        elif t == EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED:
            a = e.start_child_workflow_execution_initiated_event_attributes
            out.append(
                RecordedEvent(
                    kind="child",
                    name=a.workflow_type.name,
                    input=_values(a.input),
                    workflow_id=a.workflow_id,
                    **base,
                )
            )
        elif t == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
            a = e.workflow_execution_signaled_event_attributes
            out.append(RecordedEvent(kind="signal", name=a.signal_name, input=_values(a.input), **base))
        elif t == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED:
            req = e.workflow_execution_update_accepted_event_attributes.accepted_request
            out.append(RecordedEvent(kind="update", name=req.input.name, input=_values(req.input.args), **base))
        elif t == EventType.EVENT_TYPE_SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED:
            a = e.signal_external_workflow_execution_initiated_event_attributes
            out.append(
                RecordedEvent(
                    kind="signal_out",
                    name=a.signal_name,
                    input=_values(a.input),
                    workflow_id=a.workflow_execution.workflow_id,
                    **base,
                )
            )
        elif t == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
            out.append(RecordedEvent(kind="task", **base))
        elif t == EventType.EVENT_TYPE_TIMER_STARTED:
            out.append(RecordedEvent(kind="timer", name=e.timer_started_event_attributes.timer_id, **base))
        elif t in (EventType.EVENT_TYPE_TIMER_FIRED, EventType.EVENT_TYPE_TIMER_CANCELED):
            ended = "fired" if t == EventType.EVENT_TYPE_TIMER_FIRED else "canceled"
            out.append(RecordedEvent(kind="timer_ended", name=ended, **base))
        elif t == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW:
            out.append(RecordedEvent(kind="continued", **base))
        elif t in (
            EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED,
            EventType.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED,
            EventType.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED,
            EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CANCELED,
            EventType.EVENT_TYPE_WORKFLOW_EXECUTION_TIMED_OUT,
        ):
            out.append(RecordedEvent(kind="closed", name=EventType.Name(t).removeprefix("EVENT_TYPE_"), **base))
    return out


def history_from_file(path: str, max_events: int = MAX_EVENTS) -> RecordedHistory:
    """One run from a history JSON file (its run id is unknown: "file")."""
    try:
        text = Path(path).read_text()
    except OSError as err:
        raise CliError(f"history: cannot read {path}: {err.strerror}") from None
    try:
        history = WorkflowHistory.from_json(Path(path).stem, text)
    except Exception as err:  # noqa: BLE001 - the SDK's JSON parser raises several kinds
        raise CliError(f"history: {path} is not a workflow history JSON: {err}", 2) from None
    events = list(history.events)
    truncated = f"read the first {max_events} of {len(events)} events" if len(events) > max_events else ""
    return RecordedHistory(
        workflow_id=history.workflow_id,
        events=decode_events("file", events[:max_events]),
        runs=["file"],
        truncated=truncated,
    )


async def executions_of(client: Client, workflow_id: str, limit: int = 10) -> list[str]:
    """Run ids of every execution under `workflow_id` that visibility lists (an id reused after
    an execution closed, as NodeScaleDown's is), newest first; at most `limit`."""
    query = f'WorkflowId = "{workflow_id}"'
    return [e.run_id async for e in client.list_workflows(query, limit=limit)]


async def history_from_temporal(
    client: Client,
    workflow_id: str,
    max_runs: int = MAX_RUNS,
    max_events: int = MAX_EVENTS,
    run_id: str | None = None,
) -> RecordedHistory:
    """Every run of `workflow_id` (from `run_id`, else the newest run), following continue-as-new
    back to the first."""
    runs: list[tuple[str, list[HistoryEvent]]] = []
    read = 0
    truncated = ""
    while True:
        handle = client.get_workflow_handle(workflow_id, run_id=run_id)
        events: list[HistoryEvent] = []
        async for event in handle.fetch_history_events():
            events.append(event)
            if read + len(events) >= max_events:
                truncated = f"stopped after {max_events} events"
                break
        read += len(events)
        if not events:
            break
        this_run = run_id or (await handle.describe()).run_id
        runs.append((this_run, events))
        previous = events[0].workflow_execution_started_event_attributes.continued_execution_run_id
        if truncated or not previous:
            break
        if len(runs) >= max_runs:
            truncated = f"read the newest {max_runs} runs only"
            break
        run_id = previous
    runs.reverse()  # oldest first, as the loop lived them
    if truncated and len(runs) > 1:
        truncated += " (the oldest run read is cut short)"
    return RecordedHistory(
        workflow_id=workflow_id,
        events=[e for rid, events in runs for e in decode_events(rid, events)],
        runs=[rid for rid, _ in runs],
        truncated=truncated,
    )


async def optional_history(
    client: Client, workflow_id: str, max_events: int, run_id: str | None = None
) -> RecordedHistory | None:
    try:
        return await history_from_temporal(client, workflow_id, max_runs=1, max_events=max_events, run_id=run_id)
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            return None  # never existed, or past the namespace's retention
        raise


def trail_options(max_entries: int, events: str = "events read per workflow") -> Callable[[F], F]:
    """A `trail` command's bounds: --max-runs, --max-events (`events`: their help) and --max-entries."""

    def decorate(f: F) -> F:
        for option in (
            click.option(
                "--max-entries",
                type=click.IntRange(min=2),
                default=max_entries,
                show_default=True,
                help="entries printed",
            ),
            click.option(
                "--max-events", type=click.IntRange(min=1), default=MAX_EVENTS, show_default=True, help=events
            ),
            click.option(
                "--max-runs", type=click.IntRange(min=1), default=MAX_RUNS, show_default=True, help="loop runs read"
            ),
        ):
            f = option(f)
        return f

    return decorate


def format_trail(t: Trail) -> str:
    lines = [f"trail of {t.subject} (from {', '.join(t.sources)})"]
    for e in t.entries:
        times = f" x{e.repeated} until {e.until:%H:%M:%S}" if e.repeated > 1 and e.until else ""
        lines.append(f"{e.at:%Y-%m-%d %H:%M:%S}  {e.what:<18} {e.detail}{times}")
    if t.truncated:
        lines.append(f"note: truncated: {t.truncated}")
    lines.extend(f"note: {n}" for n in t.notes)
    return "\n".join(lines)
