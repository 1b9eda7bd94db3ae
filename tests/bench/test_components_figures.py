"""bench/components_scale.py's interval count from the histories: a ScaledOut/ScaledIn change's
time is when its replicas or group write landed (the guard counts from there, issue 20), read
from the write activity's completion, or, without a write since the change before, from the
Event's own write (an activity's completion, or a local activity's marker)."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent

from bench.components_scale import recorded_changes
from scaling.components.contracts import EMIT_AUTOSCALER_EVENT, PATCH_REPLICAS
from starters.scenarios.components import interval_violations
from tests.bench.test_e2e_figures import JSON_ENCODING, T0, scheduled


def completed(event_id: int, scheduled_id: int, at: float) -> HistoryEvent:
    e = HistoryEvent(event_id=event_id, event_type=EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED)
    e.event_time.FromSeconds(int(T0 + at))
    e.activity_task_completed_event_attributes.scheduled_event_id = scheduled_id
    return e


def event(reason: str, message: str) -> dict:
    return {"namespace": "tidb-0", "name": "a", "reason": reason, "message": message, "type": "Normal"}


def test_changes_are_read_when_their_write_landed() -> None:
    events = [
        scheduled(5, PATCH_REPLICAS, {"namespace": "tidb-0", "cluster": "db", "component": "tikv", "replicas": 4}),
        completed(7, 5, 1),
        scheduled(9, EMIT_AUTOSCALER_EVENT, event("ScaledOut", "tikv db: replicas 3 -> 4 (cpu)")),
        scheduled(10, EMIT_AUTOSCALER_EVENT, event("GroupCreated", "tikv group auto-1 (g) created, 1")),
        completed(12, 10, 2),
        completed(13, 9, 16),  # the Event's write waited 15 s for a worker slot: the change was made at 1
        scheduled(18, PATCH_REPLICAS, {"namespace": "tidb-0", "cluster": "db", "component": "tikv", "replicas": 3}),
        completed(19, 18, 32),
        scheduled(20, EMIT_AUTOSCALER_EVENT, event("ScaledIn", "tikv db: replicas 4 -> 3 (cpu)")),
        completed(21, 20, 33),
    ]
    at = [datetime.fromtimestamp(T0 + s, UTC) for s in (1, 32)]
    assert recorded_changes(events) == [(at[0], "tikv", "ScaledOut"), (at[1], "tikv", "ScaledIn")]
    # 31 s apart: the 30 s scale-in interval held; with 25 s it would not.
    assert interval_violations(recorded_changes(events), 20, 30) == 0
    late = [*events[:7], completed(19, 18, 26), *events[8:]]
    assert interval_violations(recorded_changes(late), 20, 30) == 1


def marker(event_id: int, activity_type: str, result: dict | None, at: float) -> HistoryEvent:
    """A local activity's marker as sdk-core writes it: `data` names the activity, `result` holds
    its answer (the input is not recorded)."""
    e = HistoryEvent(event_id=event_id, event_type=EventType.EVENT_TYPE_MARKER_RECORDED)
    e.event_time.FromSeconds(int(T0 + at))
    attrs = e.marker_recorded_event_attributes
    attrs.marker_name = "core_local_activity"
    data = {"seq": event_id, "attempt": 1, "activity_id": str(event_id), "activity_type": activity_type}
    attrs.details["data"].payloads.add(metadata=JSON_ENCODING, data=json.dumps(data).encode())
    attrs.details["result"].payloads.add(metadata=JSON_ENCODING, data=json.dumps(result).encode())
    return e


def test_changes_reported_by_local_activities_are_read_from_their_writes_or_markers() -> None:
    events = [
        scheduled(4, PATCH_REPLICAS, {"namespace": "tidb-0", "cluster": "db", "component": "tikv", "replicas": 4}),
        completed(5, 4, 1),
        marker(6, EMIT_AUTOSCALER_EVENT, {"reason": "ScaledOut", "message": "tikv db: replicas 3 -> 4 (cpu)"}, 2),
        marker(7, EMIT_AUTOSCALER_EVENT, {"reason": "GroupCreated", "message": "tikv group auto-1 (g) created"}, 2),
        marker(8, EMIT_AUTOSCALER_EVENT, None, 3),  # a run from before Event writes answered
        # No write since the change before (a history cut short): the Event's own marker.
        marker(9, EMIT_AUTOSCALER_EVENT, {"reason": "ScaledIn", "message": "tidb db: replicas 2 -> 1 (cpu)"}, 30),
    ]
    at = [datetime.fromtimestamp(T0 + s, UTC) for s in (1, 30)]
    assert recorded_changes(events) == [(at[0], "tikv", "ScaledOut"), (at[1], "tidb", "ScaledIn")]
