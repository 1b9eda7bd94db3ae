"""plan_replacement beside another replacement under way: the successor made for a node still
leaving is that node's pods' room, so a second replacement planned while it stands empty (before
its node is drained) buys its own successor instead of counting on it. Counting on it drained the
second node onto it, and the first node's pods then found no room (both nodes out of service for
them until a scale-up)."""

from __future__ import annotations

from scaling.kube.labels import label_value
from scaling.nodes.contracts import ScaleDownObservation
from scaling.nodes.disruption.drift import LABEL_REPLACES
from scaling.nodes.disruption.replacement import plan_replacement
from scaling.nodes.providers.kwok import kwok_catalogue
from tests.workflows.nodes.test_node_replacement import busy
from tests.workflows.nodes.test_node_scale_down import GROUP, node


def successor_of(name: str, of: str):  # noqa: ANN201
    n = node(name)
    return n.model_copy(update={"labels": {**n.labels, LABEL_REPLACES: label_value(of)}})


def test_a_successor_of_a_node_still_leaving_is_not_room_for_another() -> None:
    # a and b are full cx22s; a is being replaced (leaving), its successor sa is Ready and empty.
    obs = ScaleDownObservation(
        nodes=[node("a"), node("b"), successor_of("sa", "a")], pods=[*busy("a"), *busy("b")], groups=[GROUP]
    )
    plan = plan_replacement(obs, kwok_catalogue(), "b", {"a"}, 0.0)
    assert len(plan.new_nodes) == 1 and plan.new_nodes[0].pod_uids == ["b-web"] and not plan.problems
    # Once a is gone (its replacement over), sa is a node like any other: b's pods fit its room.
    after = ScaleDownObservation(nodes=[node("b"), successor_of("sa", "a")], pods=busy("b"), groups=[GROUP])
    assert plan_replacement(after, kwok_catalogue(), "b", set(), 0.0).new_nodes == []


def test_pods_the_scheduler_is_about_to_bind_take_their_room_first() -> None:
    """a's replacement just ended: a is gone, its pod recreated and not yet bound (it will land on sa).
    b's replacement, planned in that window, must not count sa as room (found by running the node
    replacement with the sim's scheduler slowed to 8 s: b was drained onto sa with no successor, and
    its pods went pending until a scale-up)."""
    recreated = [p.model_copy(update={"node_name": None, "phase": "Pending", "uid": f"{p.uid}-2"}) for p in busy("a")]
    obs = ScaleDownObservation(
        nodes=[node("b"), successor_of("sa", "a")], pods=[*busy("b"), *recreated], groups=[GROUP]
    )
    plan = plan_replacement(obs, kwok_catalogue(), "b", set(), 0.0)
    assert len(plan.new_nodes) == 1 and plan.new_nodes[0].pod_uids == ["b-web"] and not plan.problems
    # Judged Unschedulable, a pod is the scale-up planner's: the room stays b's to count on.
    judged = [p.model_copy(update={"unschedulable": True}) for p in recreated]
    judged_obs = obs.model_copy(update={"pods": [*busy("b"), *judged]})
    assert plan_replacement(judged_obs, kwok_catalogue(), "b", set(), 0.0).new_nodes == []
