"""`explain pod` / `explain node`: the answers computed from the NodeAutoscaler's state."""

from __future__ import annotations

from datetime import UTC, datetime

from scaling.nodes.explain import (
    LAST_LOOP_SHAPES_KEPT,
    ExplainNodeInput,
    ExplainPodInput,
    explain_node,
    explain_pod,
    last_demand_of,
    problems_by_shape,
    when,
)
from scaling.nodes.models import PodProblem, RequestPhase
from scaling.nodes.scale_down.removals import CandidateState, ScaleDownPhase, ScaleDownStatus
from scaling.nodes.scale_up.requests import NodeRequestStatus, member_id
from scaling.nodes.settings import AutoscalerSettings
from scaling.nodes.state import RECENT_SHAPES_KEPT, LoopSummary, NodeAutoscalerState, record_request_update

SETTINGS = AutoscalerSettings(cluster="c", max_requests_in_flight=3)
LOOP_AT = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)


def request(rid: str, pods: dict[str, int], uids: list[str] = (), phase=RequestPhase.PROVISIONING, **kw):  # noqa: ANN001, ANN201
    return NodeRequestStatus(
        id=f"nodes/c/request/{rid}",
        group="general",
        current_pool="kwok-cx22",
        server_type="cx22",
        phase=phase,
        pods=pods,
        pod_uids=list(uids),
        **kw,
    )


def state(**kw) -> NodeAutoscalerState:  # noqa: ANN003
    s = NodeAutoscalerState(last_loop=LoopSummary(at=LOOP_AT, unschedulable=4, fits_existing=0), **kw)
    return s


def ask(s: NodeAutoscalerState, uid: str = "uid-1", key: str = "shapeA", settings=SETTINGS):  # noqa: ANN001, ANN201
    return explain_pod(settings, s, ExplainPodInput(namespace="default", name="web-1", uid=uid, key=key))


def problem(reason: str, message: str, key: str = "shapeA", count: int = 1) -> PodProblem:
    return PodProblem(
        namespace="default", name="web-9", uid="uid-9", reason=reason, message=message, key=key, count=count
    )


# -- pods ---------------------------------------------------------------------------------------


def test_pod_named_by_an_in_flight_request_gets_that_request() -> None:
    mine = request("000002-bbbb", {"shapeA": 2}, ["uid-1", "uid-2"])
    other = request("000001-aaaa", {"shapeA": 3}, ["uid-7"])
    e = ask(state(in_flight={mine.id: mine, other.id: other}))
    assert e.outcome == "InFlight"
    assert e.requests[0].id == mine.id and e.requests[0].names_pod
    assert "made for it" in e.summary and mine.id in e.summary and "pool kwok-cx22" in e.summary


def test_a_pod_waiting_for_a_batch_member_is_told_the_members_id() -> None:
    batch = "nodes/c/request/000003-cccc"
    members = [request(f"000003-cccc#{i}", {"shapeA": 1}, [f"uid-{i}"]) for i in range(3)]
    assert members[1].id == member_id(batch, 1)
    e = ask(state(in_flight={m.id: m for m in members}))
    assert e.outcome == "InFlight" and e.requests[0].id == f"{batch}#1"
    assert f"NodeRequest {batch}#1 " in e.summary


def test_a_zone_spread_pod_finds_the_requests_made_for_its_zones_shares() -> None:
    # Zone spread plans one share per zone, keyed "<shape>@<zone>" (scaling.nodes.scale_up.topology).
    a = request("000001-aaaa", {"shapeA@za": 2}, ["uid-7"])
    b = request("000002-bbbb", {"shapeA@zb": 2, "shapeAB": 1}, ["uid-8"])
    e = ask(state(in_flight={r.id: r for r in (a, b)}))
    assert e.outcome == "InFlight"
    assert [r.pods_of_shape for r in e.requests] == [2, 2]  # not shapeAB, a different shape


def test_pod_of_a_shape_held_in_flight_counts_the_shapes_pods() -> None:
    a = request("000001-aaaa", {"shapeA": 3, "shapeB": 1}, ["uid-7"])
    b = request("000002-bbbb", {"shapeA": 2}, ["uid-8"])
    c = request("000003-cccc", {"shapeB": 4}, ["uid-9"])
    e = ask(state(in_flight={r.id: r for r in (a, b, c)}))
    assert e.outcome == "InFlight"
    assert [r.id for r in e.requests] == [a.id, b.id]  # only requests made for its shape
    assert [r.pods_of_shape for r in e.requests] == [3, 2] and not any(r.names_pod for r in e.requests)
    assert "2 in-flight request(s) were made for 5 pod(s) of its shape" in e.summary


def test_never_satisfiable_shape_says_why() -> None:
    p = problem("NeverSatisfiable", "requests cpu=64 memory=1Ti pods=1: larger than any type", count=7)
    e = ask(state(never_satisfiable={"shapeA": p}))
    assert e.outcome == "NeverSatisfiable" and e.problem == p
    assert "larger than any type" in e.summary and "7 pod(s)" in e.summary


def test_last_loop_problem_of_the_shape_is_the_answer() -> None:
    s = state(
        last_demand={"shapeA": 4},
        last_problems={"shapeA": problem("MaxNodesReached", "cluster-wide limit of 10 nodes reached", count=4)},
    )
    e = ask(s)
    assert e.outcome == "Problem" and e.problem.reason == "MaxNodesReached"
    assert "MaxNodesReached: cluster-wide limit" in e.summary and when(LOOP_AT) in e.summary
    assert e.shape_pending == 4
    # Another shape's problem is not this pod's.
    assert ask(s, key="shapeB").outcome == "NotSeen"


def test_pending_without_request_names_the_in_flight_limit_when_reached() -> None:
    full = {r.id: r for r in (request(f"00000{i}-xxxx", {"other": 1}) for i in range(3))}
    e = ask(state(in_flight=full, last_demand={"shapeA": 2}))
    assert e.outcome == "PendingNoRequest"
    assert "in-flight limit is reached (3 of 3" in e.summary
    one = next(iter(full.values()))
    spare = ask(state(in_flight={one.id: one}, last_demand={"shapeA": 2}))
    assert "spare room" in spare.summary and one.id in spare.summary
    # No request of the loop's own, but a replacement's successor being made: its room covers the pod.
    made = (
        request("x", {"shapeB": 1}).for_planner(successor=True).model_copy(update={"id": "nodes/c/replace/a@01/node-0"})
    )
    replacing = state(
        scale_downs={
            "a": ScaleDownStatus(
                node="a", workflow_id="nodes/c/replace/a", successors=[made], successors_until=LOOP_AT.timestamp() + 60
            )
        },
        last_demand={"shapeA": 2},
    )
    e = ask(replacing)
    assert e.outcome == "PendingNoRequest" and "a replacement's successor being made" in e.summary
    assert made.id in e.summary
    assert "the next loop plans it" in ask(state(last_demand={"shapeA": 2})).summary


def test_recently_finished_request_for_the_shape() -> None:
    s = state()
    r = request("000004-dddd", {"shapeA": 2, **{f"s{i}": 1 for i in range(20)}}, ["uid-5"])
    record_request_update(s, r)
    record_request_update(
        s,
        r.model_copy(update={"phase": RequestPhase.UNMET, "message": "all pools tried", "pods": {}, "pod_uids": []}),
    )
    # Finished requests keep a few shape keys (the largest), not all of them.
    assert len(s.recent[-1].pods) == RECENT_SHAPES_KEPT and s.recent[-1].pods["shapeA"] == 2
    e = ask(s)
    assert e.outcome == "RecentlyFinished" and e.recent.id == r.id
    assert "ended Unmet" in e.summary and "all pools tried" in e.summary


def test_not_seen_pod_says_when_the_last_loop_ran_and_paused_is_noted() -> None:
    e = ask(state(paused=True))
    assert e.outcome == "NotSeen" and when(LOOP_AT) in e.summary
    assert "fits the free room" not in e.summary  # no pod fitted existing nodes in that loop
    assert any("paused" in n for n in e.notes)


def test_problems_and_demand_per_shape_are_bounded() -> None:
    probs = [problem("MaxNodesReached", "x" * 1000, key=f"k{i % 300}") for i in range(600)]
    kept = problems_by_shape(probs)
    assert len(kept) == LAST_LOOP_SHAPES_KEPT
    assert all(p.count == 2 for p in kept.values())  # two problems per shape merged into one
    assert all(len(p.message) <= 300 for p in kept.values())
    demand = last_demand_of([(f"k{i}", i) for i in range(500)])
    assert len(demand) == LAST_LOOP_SHAPES_KEPT and "k499" in demand and "k0" not in demand


# -- nodes --------------------------------------------------------------------------------------


def node(s: NodeAutoscalerState, name: str = "n1", settings=SETTINGS, managed=True):  # noqa: ANN001, ANN201
    return explain_node(settings, s, ExplainNodeInput(name=name, managed=managed))


def cand(state_: str, **kw) -> CandidateState:  # noqa: ANN003
    return CandidateState(node="n1", state=state_, group="general", pool="kwok-cx22", **kw)


def test_node_waiting_on_its_timer_names_the_removal_time() -> None:
    s = state(
        candidates={
            "n1": cand("UnneededWaiting", reason="UnneededTimeNotElapsed", unneeded_since=1000.0, removable_at=1600.0)
        },
        unneeded_since={"n1": 1000.0},
        scale_down_evaluated_at=1200.0,
    )
    e = node(s)
    assert e.outcome == "UnneededWaiting" and e.removable_at == 1600.0
    assert f"since {when(1000.0)}" in e.summary and f"removal at {when(1600.0)}" in e.summary


def test_blocked_node_is_kept_because_of_its_blocker() -> None:
    s = state(
        candidates={"n1": cand("Blocked", reason="NotReplicated", message="pod default/solo has no controller")},
        scale_down_evaluated_at=1200.0,
    )
    e = node(s)
    assert e.outcome == "Kept" and "NotReplicated: pod default/solo has no controller" in e.summary
    assert node(state(candidates={"n1": cand("Utilized", utilization=0.8)})).summary.count("80%") == 1


def test_running_removal_and_protection_come_first() -> None:
    sd = ScaleDownStatus(
        node="n1", workflow_id="nodes/c/scale-down/n1", phase=ScaleDownPhase.DRAINING, scale_down_at=5.0
    )
    e = node(state(scale_downs={"n1": sd}, candidates={"n1": cand("Removing")}))
    assert e.outcome == "Removing" and "Draining" in e.summary and e.scale_down == sd
    p = node(state(protected_nodes=["n1"], candidates={"n1": cand("UnneededWaiting")}))
    assert p.outcome == "Protected" and "unprotect-node n1" in p.summary


def test_unknown_and_unmanaged_nodes_and_disabled_scale_down() -> None:
    assert "not managed by growth" in node(state(), managed=False).summary
    assert "no scale-down evaluation has run yet" in node(state()).summary
    off = AutoscalerSettings(cluster="c", scale_down_enabled=False)
    assert node(state(candidates={"n1": cand("Empty")}), settings=off).outcome == "ScaleDownDisabled"
    capped = node(state(candidates_by_state={"Utilized": 5}, scale_down_evaluated_at=1.0), name="n9")
    assert capped.outcome == "NotEvaluated" and "5 Utilized" in capped.summary


def test_node_made_by_a_request_and_an_earlier_removal_are_noted() -> None:
    r = request("000001-aaaa", {}, phase=RequestPhase.READY, node_name="n1")
    old = ScaleDownStatus(node="n1", phase=ScaleDownPhase.CANCELLED, reason="PodsLandedOnNode")
    e = node(state(recent=[r], recent_scale_downs=[old], candidates={"n1": cand("Utilized")}))
    assert e.made_by is not None and e.made_by.id == r.id
    assert any("ended Cancelled: PodsLandedOnNode" in n for n in e.notes)
