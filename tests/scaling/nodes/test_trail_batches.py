"""`growth nodes trail` and `what-if` over a loop that started a NodeRequestBatch: the node's
request is its member id (`<batch id>#<index>`), planned from the batch's start, reported in
`requests_changed`, and its attempts are its member's creates in the batch's history."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from scaling.history import RecordedEvent, RecordedHistory
from scaling.kube.models import Resources
from scaling.nodes import contracts
from scaling.nodes.models import Attempt, AttemptResult, Pool, RequestPhase
from scaling.nodes.scale_up.requests import (
    BatchMember,
    NodeRequestBatchInput,
    NodeRequestStatus,
    StartRequestsInput,
    member_id,
)
from scaling.nodes.trail import node_trail, request_of_node
from scaling.nodes.what_if import reported, started_requests

T0 = datetime(2026, 11, 26, 10, 0)  # naive, as the history loader gives event times
BATCH = "nodes/demo/request/000001-ab12"
POOL = Pool(group="general", name="kwok-cx22", provider="kwok", server_type="cx22", priority=10)


def at(s: float) -> datetime:
    return T0 + timedelta(seconds=s)


def event(event_id: int, kind: str, name: str, inp: list, **more: object) -> RecordedEvent:
    return RecordedEvent(run_id="r", event_id=event_id, at=at(event_id), kind=kind, name=name, input=inp, **more)  # type: ignore[arg-type]


def batch_input() -> NodeRequestBatchInput:
    members = [BatchMember(requirements=Resources(cpu_m=500), pods={f"shape-{i}": 3}) for i in range(2)]
    return NodeRequestBatchInput(id=BATCH, cluster="demo", group="general", candidates=[POOL], members=members)


def report(index: int, node: str) -> dict:
    status = NodeRequestStatus(
        id=member_id(BATCH, index),
        group="general",
        phase=RequestPhase.READY,
        node_name=node,
        attempts=[
            Attempt(pool=POOL.name, result=AttemptResult.READY, timestamp=at(5).replace(tzinfo=UTC), node_name=node)
        ],
    )
    return status.model_dump(mode="json")


def histories() -> tuple[RecordedHistory, RecordedHistory]:
    start = StartRequestsInput(cluster="demo", batches=[batch_input()]).model_dump(mode="json")
    loop = RecordedHistory(
        workflow_id="nodes/demo",
        events=[
            event(1, "activity", contracts.START_NODE_REQUESTS, [start]),
            event(6, "signal", contracts.REQUESTS_CHANGED, [[report(0, "n-0"), report(1, "n-1")]]),
        ],
    )
    created = {"outcome": "created"}
    batch = RecordedHistory(
        workflow_id=BATCH,
        events=[
            event(
                2,
                "activity",
                contracts.CREATE_NODE,
                [{"request_id": member_id(BATCH, 0), "attempt": 0, "pool": {"name": POOL.name}}],
                result={**created, "node_name": "n-0"},
            ),  # fmt: skip
            event(
                3,
                "activity",
                contracts.CREATE_NODE,
                [{"request_id": member_id(BATCH, 1), "attempt": 0, "pool": {"name": POOL.name}}],
                result={**created, "node_name": "n-1"},
            ),  # fmt: skip
            event(4, "activity", contracts.WAIT_NODE_READY, [{"node_name": "n-0"}], result=True),
            event(5, "activity", contracts.WAIT_NODE_READY, [{"node_name": "n-1"}], result=True),
        ],
    )
    return loop, batch


def test_a_batch_start_is_its_members_and_a_batch_report_each_member() -> None:
    loop, _ = histories()
    assert [r.id for r in started_requests(loop.events[0])] == [f"{BATCH}#0", f"{BATCH}#1"]
    assert [r.pods for r in started_requests(loop.events[0])] == [{"shape-0": 3}, {"shape-1": 3}]
    assert [s.id for s in reported(loop.events[1])] == [f"{BATCH}#0", f"{BATCH}#1"]


def test_the_trail_of_a_batch_node_is_its_members() -> None:
    loop, batch = histories()
    assert request_of_node(loop, "n-1") == f"{BATCH}#1"
    trail = node_trail("n-1", loop, batch)
    by_kind = {e.what: e.detail for e in trail.entries}
    assert by_kind["Planned"].startswith(f"loop planned {BATCH}#1 for 3 pod(s)")
    assert by_kind["Attempt"] == "attempt 1 on pool kwok-cx22: created, node n-1"  # not member 0's
    assert [e.what for e in trail.entries].count("Attempt") == 1
    assert by_kind["Ready"] == "node n-1 became Ready" and [e.what for e in trail.entries].count("Ready") == 1
    # Without the batch's history: the member's attempts as the loop heard them.
    heard = node_trail("n-0", loop)
    assert [(e.what, e.detail) for e in heard.entries if e.what == "Ready"] == [
        ("Ready", "pool kwok-cx22: Ready, node n-0")
    ]
