"""Approval gates: spec.approval validation and the pure gate rules (scaling.nodes.scale_up.approvals)."""

from datetime import UTC, datetime
from typing import Any

import pytest

from scaling.approvals import ApprovalState, decision_refused
from scaling.kube.models import Resources
from scaling.nodes.catalogue import catalogue_index
from scaling.nodes.loop import apply_attempt_backoff
from scaling.nodes.models import Attempt, AttemptResult, NodeGroup, PlannedNode, RequestPhase
from scaling.nodes.nodegroups import InvalidSpec, flatten_pools, parse_node_group, priority_tiers
from scaling.nodes.providers.kwok import kwok_catalogue
from scaling.nodes.scale_up.approvals import approval_gates, scale_up_event, waits_for
from scaling.nodes.scale_up.requests import NodeRequestStatus
from scaling.nodes.state import in_flight_for_planner

CAT = catalogue_index(kwok_catalogue())
CX22 = CAT[("kwok", "cx22")].price_hourly  # 0.0060
CX52 = CAT[("kwok", "cx52")].price_hourly  # 0.0540


def group(name: str = "g", types: tuple[str, ...] = ("cx22", "cx52"), **spec: Any) -> NodeGroup:
    entries = [{"provider": "kwok", "serverType": [t], "priority": 100 - i} for i, t in enumerate(types)]
    return parse_node_group({"metadata": {"name": name}, "spec": {"pools": entries, **spec}}, {"kwok"})


def planned(g: NodeGroup, n: int) -> list[PlannedNode]:
    candidates = [p for tier in priority_tiers(flatten_pools(g)) for p in tier]
    return [
        PlannedNode(
            group=g.name, pool=candidates[0].name, candidates=candidates, requirements=Resources(), pod_uids=[f"u{i}"]
        )
        for i in range(n)
    ]


def test_spec_approval_parses_with_defaults() -> None:
    policy = group(approval={"nodesAbove": 3}).approval
    assert policy is not None
    assert (policy.nodes_above, policy.price_per_hour_above, policy.timeout_s, policy.default) == (
        3,
        None,
        1800,
        "deny",
    )
    policy = group(approval={"pricePerHourAbove": "0.01", "timeout": "1h30m", "default": "approve"}).approval
    assert policy is not None and (policy.price_per_hour_above, policy.timeout_s, policy.default) == (
        0.01,
        5400,
        "approve",
    )
    assert group().approval is None


@pytest.mark.parametrize(
    ("approval", "field", "words"),
    [
        ({}, "spec.approval", "nodesAbove or pricePerHourAbove"),
        ({"nodesAbove": -1}, "spec.approval.nodesAbove", "negative"),
        ({"nodesAbove": "3"}, "spec.approval.nodesAbove", "integer"),
        ({"pricePerHourAbove": "cheap"}, "spec.approval.pricePerHourAbove", "number"),
        ({"nodesAbove": 1, "timeout": "soon"}, "spec.approval.timeout", "duration"),
        ({"nodesAbove": 1, "timeout": 0}, "spec.approval.timeout", "longer than 0"),
        ({"nodesAbove": 1, "default": "maybe"}, "spec.approval.default", "approve or deny"),
        ({"nodesAbove": 1, "nodes": 2}, "spec.approval.nodes", "unknown field"),
        ("yes", "spec.approval", "mapping"),
    ],
)
def test_bad_spec_approval_is_refused_naming_the_field(approval: Any, field: str, words: str) -> None:
    with pytest.raises(InvalidSpec) as err:
        group(approval=approval)
    assert err.value.field == field and words in err.value.message


def test_nodes_rule_gates_every_request_of_a_loop_above_the_count() -> None:
    g = group(approval={"nodesAbove": 2})
    assert approval_gates(planned(g, 2), {"g": g}, CAT) == [None, None]
    gates = approval_gates(planned(g, 3), {"g": g}, CAT)
    assert all(gate is not None and gate.nodes.startswith("3 nodes for group g in one loop") for gate in gates)


def test_nodes_rule_counts_per_group() -> None:
    gated, free = group("a", approval={"nodesAbove": 1}), group("b")
    gates = approval_gates([*planned(gated, 2), *planned(free, 5)], {"a": gated, "b": free}, CAT)
    assert [g is not None for g in gates] == [True, True, False, False, False, False, False]


def test_price_rule_gates_only_the_dear_pools() -> None:
    g = group(approval={"pricePerHourAbove": (CX22 + CX52) / 2})
    [gate] = approval_gates(planned(g, 1), {"g": g}, CAT)
    assert gate is not None and gate.nodes == "" and set(gate.pools) == {"kwok-cx52"}
    assert waits_for(gate, "kwok-cx22", approved=False) == ""
    assert "costs 0.054/h" in waits_for(gate, "kwok-cx52", approved=False)
    assert waits_for(gate, "kwok-cx52", approved=True) == ""  # one approval covers the request
    cheap = group(approval={"pricePerHourAbove": CX52})  # not above: no gate
    assert approval_gates(planned(cheap, 1), {"g": cheap}, CAT) == [None]


def test_an_unknown_price_gates() -> None:
    g = group(approval={"pricePerHourAbove": 1})
    [gate] = approval_gates(planned(g, 1), {"g": g}, {})
    assert gate is not None and "unknown" in gate.pools["kwok-cx22"]


def test_the_gate_carries_timeout_and_default() -> None:
    g = group(approval={"nodesAbove": 0, "timeout": "5m", "default": "approve"})
    [gate] = approval_gates(planned(g, 1), {"g": g}, CAT)
    assert gate is not None and (gate.timeout_s, gate.default) == (300, "approve")


def test_decisions_are_taken_once() -> None:
    wait = ApprovalState(reason="r", step="p", deadline=datetime.now(UTC), default="deny")
    assert decision_refused(True, wait, "id1") == ""
    assert decision_refused(False, None, "id1") == "id: id1 is not awaiting approval"
    decided = wait.model_copy(update={"decision": "denied", "by": "timeout"})
    assert decision_refused(False, decided, "id1") == "id: id1 was already denied (by timeout)"


def test_a_note_is_text_or_nothing() -> None:
    """A note decoded from JSON may be anything: only text (or none) is taken, never its str()."""
    wait = ApprovalState(reason="r", step="p", deadline=datetime.now(UTC), default="deny")
    assert decision_refused(True, wait, "id1", None) == ""
    assert decision_refused(True, wait, "id1", [1, 2]) == "note: a string, got list"
    assert decision_refused(True, wait, "id1", {"note": 1}) == "note: a string, got dict"
    assert decision_refused(True, wait, "id1", "x" * 100_000).startswith("note: ")


def test_a_denial_backs_the_pool_off_and_a_ready_node_clears_it() -> None:
    failures: dict[str, int] = {}
    until: dict[str, float] = {}
    now = datetime.now(UTC)
    apply_attempt_backoff(
        failures, until, "g", Attempt(pool="kwok-cx52", result=AttemptResult.DENIED, timestamp=now), 0
    )
    assert until == {"g/kwok-cx52": 300.0}
    apply_attempt_backoff(failures, until, "g", Attempt(pool="kwok-cx52", result=AttemptResult.READY, timestamp=now), 1)
    assert until == {}


def test_a_request_awaiting_approval_holds_its_pods() -> None:
    waiting = NodeRequestStatus(id="r1", group="g", phase=RequestPhase.AWAITING_APPROVAL, pods={"shape": 7})
    assert [(r.id, r.pods) for r in in_flight_for_planner({"r1": waiting})] == [("r1", {"shape": 7})]


def test_the_pod_event_says_the_scale_up_waits() -> None:
    g = group(approval={"nodesAbove": 0})
    [node] = planned(g, 1)
    [gate] = approval_gates([node], {"g": g}, CAT)
    reason, message = scale_up_event("nodes/c/request/000001-ab12", node, gate)
    assert reason == "ScaleUpAwaitingApproval" and "growth nodes approve" in message and "000001-ab12" in message
    assert scale_up_event("id", node, None)[0] == "TriggeredScaleUp"
