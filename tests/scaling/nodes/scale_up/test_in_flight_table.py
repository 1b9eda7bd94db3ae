"""The in-flight requests as they cross continue-as-new (scaling.nodes.scale_up.in_flight_table):
what the planner, the observer, explain and the attempt count need comes back; the older form
(id -> record) still reads."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from temporalio.contrib.pydantic import pydantic_data_converter

from scaling.approvals import ApprovalState
from scaling.kube.models import Resources
from scaling.nodes.loop import newly_reported_attempt
from scaling.nodes.models import Attempt, AttemptResult, RequestPhase
from scaling.nodes.scale_up.in_flight_table import DETAILS_KEPT
from scaling.nodes.scale_up.requests import NodeRequestStatus
from scaling.nodes.state import NodeAutoscalerState, in_flight_for_planner, record_request_update

T0 = datetime(2026, 11, 26, 2, 0, 0, 123456, tzinfo=UTC)


def carried(state: NodeAutoscalerState) -> NodeAutoscalerState:
    converter = pydantic_data_converter.payload_converter
    return converter.from_payloads(converter.to_payloads([state]), [NodeAutoscalerState])[0]


def provisioning(i: int, pool: str = "kwok-cx32", **update: object) -> NodeRequestStatus:
    rid = f"nodes/c/request/{i:06d}-ab{i % 100:02d}"
    node = f"c-{pool}-{i:08x}"
    at = T0 + timedelta(seconds=i)
    return NodeRequestStatus(
        id=rid,
        group="general",
        phase=RequestPhase.PROVISIONING,
        current_pool=pool,
        server_type=pool.removeprefix("kwok-"),
        provider="kwok",
        node_name=node,
        provider_id=f"kwok://{node}",
        attempts=[
            Attempt(pool="kwok-cx22", result=AttemptResult.INSUFFICIENT_CAPACITY, timestamp=at, message="none"),
            Attempt(pool=pool, result=AttemptResult.PROVISIONING, timestamp=at + timedelta(seconds=1), node_name=node),
        ],
        requirements=Resources(cpu_m=3900 + i, memory=7 * 2**30 + i, pods=3),
        pods={f"shape{i % 3}": 2, "zone-shape|fsn1": 1},
        started_at=at,
    ).model_copy(update=update)


def test_what_the_planner_and_the_observer_read_comes_back() -> None:
    state = NodeAutoscalerState()
    for i in range(20):
        r = provisioning(i, pool="kwok-cx42" if i % 2 else "kwok-cx32")
        state.in_flight[r.id] = r
    pending = NodeRequestStatus(id="nodes/c/request/000099-zz99", group="other", pods={"k": 4})
    state.in_flight[pending.id] = pending

    back = carried(state)
    assert list(back.in_flight) == list(state.in_flight)  # in order: the planner's order
    assert in_flight_for_planner(back.in_flight) == in_flight_for_planner(state.in_flight)
    assert {r.id: r.node_name for r in back.in_flight.values()} == {r.id: r.node_name for r in state.in_flight.values()}
    r = back.in_flight[provisioning(3).id]
    assert r.started_at == T0.replace(microsecond=123000) + timedelta(seconds=3)  # to the millisecond
    assert r.provider_id == "" and r.attempts == []  # left out: the request still has them
    assert back.in_flight[pending.id] == pending


def test_a_failed_attempt_carried_across_continue_as_new_still_counts_once() -> None:
    state = NodeAutoscalerState()
    quota = Attempt(pool="kwok-cx32", result=AttemptResult.QUOTA_EXCEEDED, timestamp=T0 + timedelta(seconds=7.0004))
    before = provisioning(7, phase=RequestPhase.PENDING, node_name="", attempts=[quota])
    state.in_flight[before.id] = before
    back = carried(state)
    assert back.in_flight[before.id].attempts[0].result == AttemptResult.QUOTA_EXCEEDED
    # The request reports its last attempt again (with its final phase): not new, no second backoff.
    again = before.model_copy(update={"pods": {}, "phase": RequestPhase.UNMET, "message": "no pool"})
    assert newly_reported_attempt(back.in_flight[before.id], again) is None
    later = Attempt(pool="kwok-cx42", result=AttemptResult.QUOTA_EXCEEDED, timestamp=T0 + timedelta(minutes=5))
    assert (
        newly_reported_attempt(back.in_flight[before.id], again.model_copy(update={"attempts": [quota, later]}))
        == later
    )
    # One still under way is left out: reported again it counts for nothing (no backoff, no memory).
    assert carried(NodeAutoscalerState(in_flight={"r": provisioning(8, id="r")})).in_flight["r"].attempts == []


def test_the_pods_a_request_holds_survive_its_reports_after_continue_as_new() -> None:
    state = NodeAutoscalerState()
    r = provisioning(1)
    state.in_flight[r.id] = r
    state = carried(state)
    record_request_update(state, r.model_copy(update={"pods": {}, "pod_uids": []}))
    assert state.in_flight[r.id].pods == r.pods


def test_messages_and_approval_waits_are_kept_within_a_budget() -> None:
    state = NodeAutoscalerState()
    approval = ApprovalState(reason="costs over 1 EUR/h", step="kwok-cx52", deadline=T0, default="deny")
    gated = NodeRequestStatus(
        id="nodes/c/request/000001-aaaa", group="g", phase=RequestPhase.AWAITING_APPROVAL, approval=approval
    )
    state.in_flight[gated.id] = gated
    for i in range(2, 200):
        r = provisioning(i, message="x" * 400)
        state.in_flight[r.id] = r
    back = carried(state)
    assert back.in_flight[gated.id].approval == approval
    kept = [r for r in back.in_flight.values() if r.message]
    assert kept and sum(len(r.message) for r in kept) <= DETAILS_KEPT < sum(
        len(r.message) for r in state.in_flight.values()
    )


def test_records_carried_before_the_table_still_read() -> None:
    r = provisioning(5)
    old = {"in_flight": {r.id: r.model_dump(mode="json")}}
    assert NodeAutoscalerState.model_validate(old).in_flight == {r.id: r}
    assert NodeAutoscalerState.model_validate_json(NodeAutoscalerState().model_dump_json()).in_flight == {}


def test_pods_already_evented_come_back_in_order() -> None:
    keys = [f"uid-{i}/{'NotTriggerScaleUp' if i % 3 else 'NeverSatisfiable'}" for i in range(50)]
    assert carried(NodeAutoscalerState(reported_pods=keys)).reported_pods == keys
    assert NodeAutoscalerState.model_validate({"reported_pods": keys}).reported_pods == keys  # the older form


def test_a_report_repeated_after_the_request_ended_is_ignored() -> None:
    """The readiness wait reports Provisioning in every attempt: the same report again changes
    nothing, and one that lands after the final report keeps the request out of flight."""
    state = NodeAutoscalerState()
    r = provisioning(1)
    state.in_flight[r.id] = r
    report = r.model_copy(update={"pods": {}, "pod_uids": []})
    record_request_update(state, report)
    record_request_update(state, report)
    assert list(state.in_flight) == [r.id] and state.in_flight[r.id].pods == r.pods
    record_request_update(state, report.model_copy(update={"phase": RequestPhase.READY}))
    record_request_update(state, report)
    assert r.id not in state.in_flight and [x.id for x in state.recent] == [r.id]
    assert state.nodes_created == 1
