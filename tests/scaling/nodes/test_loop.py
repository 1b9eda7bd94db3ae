"""The NodeAutoscaler loop's decisions (scaling/nodes/loop.py) and the provider outcome mapping,
apart from any workflow."""

from __future__ import annotations

from datetime import UTC, datetime

from scaling.kube.models import NodeInfo, Resources
from scaling.nodes.loop import (
    apply_attempt_backoff,
    fresh_problems,
    may_scale_down,
    never_satisfiable_of,
    newly_reported_attempt,
    prune_never_satisfiable,
    unavailable_pools,
)
from scaling.nodes.models import (
    LABEL_GROUP,
    Attempt,
    AttemptResult,
    InFlightRequest,
    PlannedNode,
    PodProblem,
    RequestPhase,
    ScaleUpPlan,
)
from scaling.nodes.scale_up.backoff import BACKOFF_INITIAL_S
from scaling.nodes.scale_up.capacity import hands_back_pods, offering_key, remember_insufficient_capacity
from scaling.nodes.scale_up.demand import tally_nodes
from scaling.nodes.scale_up.requests import NodeRequestStatus, attempt_result_of

T = datetime(2026, 1, 1, tzinfo=UTC)


def attempt(result: AttemptResult, pool: str = "p") -> Attempt:
    return Attempt(pool=pool, result=result, timestamp=T)


def problem(uid: str, reason: str = "NeverSatisfiable") -> PodProblem:
    return PodProblem(namespace="default", name=uid, uid=uid, reason=reason, message="m")


def test_quota_backs_a_pool_off_longer_each_time_and_ready_clears_it() -> None:
    failures: dict[str, int] = {}
    until: dict[str, float] = {}
    apply_attempt_backoff(failures, until, "g", attempt(AttemptResult.QUOTA_EXCEEDED), now=1000.0)
    assert until == {"g/p": 1000.0 + BACKOFF_INITIAL_S}
    apply_attempt_backoff(failures, until, "g", attempt(AttemptResult.QUOTA_EXCEEDED), now=2000.0)
    assert failures == {"g/p": 2} and until["g/p"] == 2000.0 + 2 * BACKOFF_INITIAL_S
    # No capacity moves on without a backoff; another pool's success leaves this one alone.
    apply_attempt_backoff(failures, until, "g", attempt(AttemptResult.INSUFFICIENT_CAPACITY), now=2100.0)
    apply_attempt_backoff(failures, until, "g", attempt(AttemptResult.READY, pool="q"), now=2100.0)
    assert failures == {"g/p": 2}
    apply_attempt_backoff(failures, until, "g", attempt(AttemptResult.READY), now=2200.0)
    assert failures == {} and until == {}


def test_never_satisfiable_pods_are_forgotten_when_no_longer_pending_or_groups_change() -> None:
    known = {"a": problem("a"), "b": problem("b")}
    assert set(prune_never_satisfiable(known, pending={"a", "c"}, groups_changed=False)) == {"a"}
    assert prune_never_satisfiable(known, pending={"a", "b"}, groups_changed=True) == {}
    found = never_satisfiable_of([problem("x"), problem("y", reason="MaxNodesReached")])
    assert set(found) == {"x"}


def test_unavailable_pools_are_banned_ones_and_those_still_backing_off() -> None:
    pools = unavailable_pools(["g/banned"], {"g/soon": 99.0, "g/later": 101.0}, now=100.0)
    assert pools == {("g", "banned"), ("g", "later")}


def test_scale_down_runs_only_in_a_settled_loop_with_something_to_remove() -> None:
    growth_node = tally_nodes([NodeInfo(name="n", labels={LABEL_GROUP: "g"})])
    other_node = tally_nodes([NodeInfo(name="m")])
    settled = ScaleUpPlan()
    assert may_scale_down(settled, True, growth_node, removals_running=False)
    assert not may_scale_down(settled, False, growth_node, removals_running=False)
    assert not may_scale_down(settled, True, other_node, removals_running=False)
    assert may_scale_down(settled, True, other_node, removals_running=True)
    scaled_up = ScaleUpPlan(
        new_nodes=[PlannedNode(group="g", pool="p", pod_uids=["a"], candidates=[], requirements=Resources())]
    )
    assert not may_scale_down(scaled_up, True, growth_node, removals_running=True)
    assert not may_scale_down(ScaleUpPlan(pods_fit_existing=1), True, growth_node, removals_running=False)
    assert not may_scale_down(ScaleUpPlan(pods_covered=1), True, growth_node, removals_running=False)


def test_problem_events_once_per_pod_and_reason_and_bounded() -> None:
    fresh, reported = fresh_problems([problem("a"), problem("a")], [], keep=10)
    assert [p.uid for p in fresh] == ["a"] and reported == ["a/NeverSatisfiable"]
    fresh, reported = fresh_problems([problem("a"), problem("a", reason="MaxNodesReached")], reported, keep=10)
    assert [p.reason for p in fresh] == ["MaxNodesReached"]
    _, reported = fresh_problems([problem(str(i)) for i in range(20)], reported, keep=5)
    assert reported == [f"{i}/NeverSatisfiable" for i in range(15, 20)]


def test_provider_outcomes_map_to_attempt_results() -> None:
    assert attempt_result_of("created") == AttemptResult.PROVISIONING
    assert attempt_result_of("no_capacity") == AttemptResult.INSUFFICIENT_CAPACITY
    assert attempt_result_of("quota_exceeded") == AttemptResult.QUOTA_EXCEEDED
    assert attempt_result_of(None) == AttemptResult.PROVIDER_ERROR
    assert attempt_result_of("something_new") == AttemptResult.PROVIDER_ERROR


# -- capacity memory -----------------------------------------------------------------------


def _status(*attempts: Attempt, phase: RequestPhase = RequestPhase.PENDING) -> NodeRequestStatus:
    return NodeRequestStatus(id="r1", group="general", phase=phase, attempts=list(attempts))


def test_an_attempt_reported_again_with_the_final_status_counts_once() -> None:
    ice = Attempt(pool="kwok-cx22", result=AttemptResult.INSUFFICIENT_CAPACITY, timestamp=datetime(2026, 1, 1))
    pending = Attempt(pool="kwok-cx22", result=AttemptResult.PENDING, timestamp=datetime(2026, 1, 1))
    assert newly_reported_attempt(None, _status(ice)) == ice
    assert newly_reported_attempt(_status(pending), _status(ice)) == ice  # updated in place: new
    assert newly_reported_attempt(_status(ice), _status(ice, phase=RequestPhase.REPLANNED)) is None
    assert newly_reported_attempt(_status(ice), _status()) is None


def test_insufficient_capacity_is_remembered_per_offering_for_its_ttl() -> None:
    memory = remember_insufficient_capacity({}, "kwok", "CX22", now=1000.0, ttl_s=180.0)
    assert memory == {offering_key("kwok", "cx22"): 1180.0}
    # Every pool offering that type is skipped while remembered, and planned onto again after.
    assert unavailable_pools([], {}, 1100.0, memory) == {("kwok", "cx22")}
    assert unavailable_pools([], {}, 1181.0, memory) == set()
    # A later miss extends it; expired entries are dropped, so the memory stays bounded.
    memory = remember_insufficient_capacity(memory, "kwok", "cx22", now=1100.0, ttl_s=180.0)
    assert memory[offering_key("kwok", "cx22")] == 1280.0
    memory = remember_insufficient_capacity(memory, "hetzner", "cax11", now=5000.0, ttl_s=180.0)
    assert memory == {offering_key("hetzner", "cax11"): 5180.0}
    assert remember_insufficient_capacity({}, "kwok", "cx22", now=0.0, ttl_s=0.0) == {}  # memory off


def test_only_no_capacity_or_quota_hands_pods_back_and_only_for_autoscaler_requests() -> None:
    assert hands_back_pods(AttemptResult.INSUFFICIENT_CAPACITY, replanning=True)
    assert hands_back_pods(AttemptResult.QUOTA_EXCEEDED, replanning=True)
    assert not hands_back_pods(AttemptResult.READINESS_TIMEOUT, replanning=True)
    assert not hands_back_pods(AttemptResult.PROVIDER_ERROR, replanning=True)
    assert not hands_back_pods(AttemptResult.INSUFFICIENT_CAPACITY, replanning=False)


def test_a_ready_node_does_not_clear_capacity_memory_but_clears_a_quota_backoff() -> None:
    failures: dict[str, int] = {}
    until: dict[str, float] = {}
    t = datetime(2026, 1, 1)
    apply_attempt_backoff(failures, until, "g", Attempt(pool="p", result=AttemptResult.QUOTA_EXCEEDED, timestamp=t), 0)
    assert "g/p" in until
    apply_attempt_backoff(failures, until, "g", Attempt(pool="p", result=AttemptResult.READY, timestamp=t), 10)
    assert until == {} and failures == {}


def in_flight_cx22(rid: str, key: str) -> InFlightRequest:
    """A request in flight on kwok-cx22 for one pod of 1.5 cores (shape `key`)."""
    return InFlightRequest(
        id=rid,
        group="g",
        pool="kwok-cx22",
        server_type="cx22",
        provider="kwok",
        requirements=Resources(cpu_m=1500, memory=2**30, pods=1),
        pods={key: 1},
    )


def test_a_request_ready_while_the_cluster_was_observed_still_covers_its_pods() -> None:
    from scaling.kube.models import PodInfo
    from scaling.nodes.catalogue import catalogue_index
    from scaling.nodes.nodegroups import parse_node_group
    from scaling.nodes.providers.kwok import kwok_catalogue
    from scaling.nodes.scale_up.demand import observe_demand
    from scaling.nodes.scale_up.planning import plan_demand
    from scaling.nodes.state import with_landing_requests

    group = parse_node_group(
        {"metadata": {"name": "g"}, "spec": {"pools": [{"provider": "kwok", "serverType": ["cx22"], "priority": 1}]}},
        {"kwok"},
    )
    pods = [
        PodInfo(namespace="ns", name=f"p{i}", uid=f"p{i}", requests=Resources(cpu_m=1500, memory=2**30, pods=1))
        for i in range(2)
    ]
    demand = observe_demand(pods, [])
    key = demand.shapes[0].key
    landed, replanned, flying = (in_flight_cx22(rid, key) for rid in "abc")
    # a reported Ready and b Replanned during the observation, which saw neither a's node Ready.
    in_flight = with_landing_requests([flying], [landed, replanned, flying], ready={"a"})
    assert [r.id for r in in_flight] == ["c", "a"]
    cat = catalogue_index(kwok_catalogue())
    assert plan_demand(demand, [group], cat, in_flight).new_nodes == []
    # Forgetting a would plan its pod a second node.
    assert len(plan_demand(demand, [group], cat, [flying]).new_nodes) == 1


def test_a_request_reported_ready_covers_its_pods_until_its_node_shows_ready_or_the_hold_ends() -> None:
    """A request that reported Ready before an observation whose cache does not show its node
    Ready yet (a lagging watch, another worker replica): its pods still pending are covered."""
    from datetime import timedelta

    from scaling.nodes.state import (
        LANDING_HOLD_S,
        NodeAutoscalerState,
        in_flight_for_planner,
        record_request_update,
        still_landing,
        with_held_landing,
    )

    state = NodeAutoscalerState()
    ready_at = T + timedelta(seconds=5)
    for rid in ("a", "b", "c"):
        state.in_flight[rid] = NodeRequestStatus(id=rid, group="g", current_pool="kwok-cx22", pods={"shape": 1})
    # Final reports come without their pods: the recorded ones are kept for the hold.
    for rid in ("a", "b"):
        ready = Attempt(pool="kwok-cx22", result=AttemptResult.READY, timestamp=ready_at, node_name=f"n-{rid}")
        record_request_update(
            state,
            NodeRequestStatus(id=rid, group="g", phase=RequestPhase.READY, node_name=f"n-{rid}", attempts=[ready]),
        )
    assert sorted(state.landing) == ["a", "b"] and state.landing["a"].pods == {"shape": 1}
    # It crosses continue-as-new in the in-flight table's form, with what the hold reads.
    carried = NodeAutoscalerState.model_validate_json(state.model_dump_json())
    assert {rid: (r.pods, r.node_name, r.attempts[-1].timestamp) for rid, r in carried.landing.items()} == {
        rid: ({"shape": 1}, f"n-{rid}", ready_at) for rid in ("a", "b")
    }

    now = ready_at.timestamp() + 1
    # The observation shows b's node Ready (its room counts there), not a's.
    landing = still_landing(carried.landing, ["b"], now)
    assert sorted(landing) == ["a"]
    in_flight = with_held_landing(in_flight_for_planner(carried.in_flight), landing)
    assert [(r.id, r.pods) for r in in_flight] == [("c", {"shape": 1}), ("a", {"shape": 1})]
    # Counted once: a request both in flight and landing (Ready during the observation).
    assert [r.id for r in with_held_landing(in_flight, landing)] == ["c", "a"]
    # A node no observation shows Ready holds its pods only so long.
    assert still_landing(landing, [], ready_at.timestamp() + LANDING_HOLD_S) == {}


def test_requests_with_ready_node_found_by_label_or_name_and_only_when_ready() -> None:
    from scaling.kube.labels import request_key
    from scaling.kube.models import NodeInfo
    from scaling.nodes.models import LABEL_REQUEST
    from scaling.nodes.state import requests_with_ready_node

    requests = {
        "nodes/c/request/000001-aa": "",  # its node name not reported yet: found by the label
        "nodes/c/request/000002-bb": "hcloud-b",  # found by name (labelled only once Ready)
        "nodes/c/request/000003-cc": "n-c",  # its node is not Ready yet
        "nodes/c/request/000004-dd": "",  # no node yet
    }
    nodes = [
        NodeInfo(name="kwok-a", labels={LABEL_REQUEST: request_key("nodes/c/request/000001-aa")}, ready=True),
        NodeInfo(name="hcloud-b", ready=True),
        NodeInfo(name="n-c", labels={LABEL_REQUEST: request_key("nodes/c/request/000003-cc")}, ready=False),
        NodeInfo(name="other", labels={LABEL_REQUEST: request_key("nodes/c/request/999999-zz")}, ready=True),
    ]
    assert requests_with_ready_node(requests, nodes) == ["nodes/c/request/000001-aa", "nodes/c/request/000002-bb"]
    assert requests_with_ready_node({}, nodes) == []


def test_a_node_ready_but_still_tainted_not_ready_leaves_its_request_in_flight() -> None:
    """The kubelet reports Ready a moment before the node lifecycle controller lifts the not-ready
    taint; the scheduler places nothing there until it does. Counted Ready then, the request would
    leave the in-flight count while its node holds no pod: the planner would buy again."""
    from scaling.kube.labels import request_key
    from scaling.kube.nodes import node_info
    from scaling.nodes.models import LABEL_REQUEST
    from scaling.nodes.state import requests_with_ready_node

    rid = "nodes/c/request/000001-aa"
    raw = {
        "metadata": {"name": "kwok-a", "labels": {LABEL_REQUEST: request_key(rid)}},
        "spec": {"taints": [{"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}]},
        "status": {"conditions": [{"type": "Ready", "status": "True"}], "allocatable": {"cpu": "2", "memory": "4Gi"}},
    }
    assert requests_with_ready_node({rid: ""}, [node_info(raw, [])]) == []
    raw["spec"]["taints"] = []  # lifted
    assert requests_with_ready_node({rid: ""}, [node_info(raw, [])]) == [rid]


def test_a_request_with_a_ready_node_is_counted_once_even_when_it_holds_a_zone_share() -> None:
    from scaling.nodes.scale_up.topology import share_key
    from scaling.nodes.state import counted_once

    plain, spread = in_flight_cx22("a", "shape"), in_flight_cx22("b", share_key("shape", "za"))
    flying = in_flight_cx22("c", "shape")
    # a's and b's nodes are Ready in the observation: their room is counted there instead (b's
    # as the room its zone holds, PodShape.domain_room, when the skew keeps its pod off).
    assert [r.id for r in counted_once([plain, spread, flying], ["a", "b"])] == ["c"]
    assert counted_once([plain, flying], []) == [plain, flying]
    # Runs recorded before that kept b counting (patch spread-room-counted-once).
    assert [r.id for r in counted_once([plain, spread, flying], ["a", "b"], keep_zone_shares=True)] == ["b", "c"]
