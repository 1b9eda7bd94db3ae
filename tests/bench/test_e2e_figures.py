"""bench/e2e.py's figures for batches: a member's create start comes from its batch's history
(the ActivityTaskStarted of the create that names it), and a member's loop and server figures
are its batch's."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from unittest.mock import MagicMock

from temporalio.api.common.v1 import Payload
from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent

from bench.e2e import create_starts, of_request
from scaling.nodes.contracts import CREATE_NODE, WAIT_NODE_READY
from starters.scenarios.progress import PodWatch, percentile

T0 = datetime(2026, 11, 26, 10, 0, tzinfo=UTC).timestamp()


JSON_ENCODING = {"encoding": b"json/plain"}  # as the SDK's JSON payloads carry it


def scheduled(event_id: int, activity: str, inp: dict) -> HistoryEvent:
    e = HistoryEvent(event_id=event_id, event_type=EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED)
    e.event_time.FromSeconds(int(T0))
    attrs = e.activity_task_scheduled_event_attributes
    attrs.activity_type.name = activity
    attrs.input.payloads.append(Payload(metadata=JSON_ENCODING, data=json.dumps(inp).encode()))
    return e


def started(event_id: int, scheduled_id: int, at: float) -> HistoryEvent:
    e = HistoryEvent(event_id=event_id)
    e.event_time.FromSeconds(int(T0 + at))
    e.activity_task_started_event_attributes.scheduled_event_id = scheduled_id
    return e


def test_each_member_gets_the_start_of_its_first_create() -> None:
    batch = "nodes/c/request/000001-ab12"
    events = [
        scheduled(5, CREATE_NODE, {"cluster": "c", "request_id": f"{batch}#0", "attempt": 1}),
        scheduled(6, CREATE_NODE, {"cluster": "c", "request_id": f"{batch}#1", "attempt": 1}),
        scheduled(7, WAIT_NODE_READY, {"request_id": f"{batch}#2"}),  # not a create: not counted
        started(8, 6, 3),
        started(9, 5, 7),
        # member 1 tries its next pool later: its first create's start stands
        scheduled(10, CREATE_NODE, {"cluster": "c", "request_id": f"{batch}#1", "attempt": 2}),
        started(11, 10, 20),
        # one create for several members (however a batch groups them): each gets its start
        scheduled(
            12, CREATE_NODE, {"cluster": "c", "members": [{"request_id": f"{batch}#3"}, {"request_id": f"{batch}#4"}]}
        ),
        started(13, 12, 30),
    ]
    assert create_starts(events) == {
        f"{batch}#0": T0 + 7,
        f"{batch}#1": T0 + 3,
        f"{batch}#3": T0 + 30,
        f"{batch}#4": T0 + 30,
    }


def test_a_member_takes_its_batch_figure_and_an_old_request_its_own() -> None:
    by_workflow = {"nodes/c/request/000001-ab12": 1.0, "nodes/c/request/000002-cd34": 2.0}
    assert of_request(by_workflow, "nodes/c/request/000001-ab12#7") == 1.0
    assert of_request(by_workflow, "nodes/c/request/000002-cd34") == 2.0
    assert of_request(by_workflow, "nodes/c/request/000003-ef56#0") is None


def test_every_running_pod_counts_from_its_creation_to_its_start() -> None:
    """PodWatch's all-pods figure: a pod that fit room already there (no request matched to it)
    counts too, a pod not yet running does not, and the times are the API server's stamps."""

    def pod(uid: str, created: str, phase: str, started: str | None = None) -> dict:
        status = {"phase": phase, **({"startTime": started} if started else {})}
        return {"metadata": {"uid": uid, "creationTimestamp": created}, "status": status}

    pods = [
        pod("a", "2026-11-26T10:00:00Z", "Running", "2026-11-26T10:00:04Z"),
        pod("b", "2026-11-26T10:00:01Z", "Running", "2026-11-26T10:00:31Z"),
        pod("c", "2026-11-26T10:00:02Z", "Pending"),
    ]
    watch = PodWatch(MagicMock(), "app=x")
    watch.core = MagicMock()
    watch.core.list_pod_for_all_namespaces.return_value.data = json.dumps({"items": pods}).encode()
    asyncio.run(watch.poll())
    assert sorted(watch.running_latencies()) == [4.0, 30.0]
    assert percentile(watch.running_latencies(), 0.99) == 30.0
