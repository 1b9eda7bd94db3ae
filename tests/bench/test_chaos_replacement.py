"""bench/chaos_replacement.py's invariant checker on synthetic API server states: a replacement
made in the right order holds; cordoning before the successor is Ready, a second successor, a
create not keyed by the replacement, a node bought beside it and a pod left on the deleted node
each break it. The Hetzner variant's drift and server checks too."""

from __future__ import annotations

from typing import Any

from bench.chaos_hetzner import server_violations
from bench.chaos_replacement import (
    DRIFT_LABELS,
    GROUP_SPEC,
    NodeSeen,
    PodSeen,
    drift_group,
    node_seen,
    replacement_violations,
    successor_keys,
)
from scaling.kube.labels import request_key
from scaling.nodes.disruption.drift import LABEL_REPLACES
from scaling.nodes.disruption.orchestration import command_id, replacement_id, successor_id
from scaling.nodes.models import LABEL_REQUEST
from starters.kube import node_group

RUN_A = "0f1e2d3c-run-of-a"
RUNS = {"a": {RUN_A}}  # a's replacement ran once
KEY_A = request_key(successor_id(command_id(replacement_id("c", "a"), RUN_A), 0))


def up(rv: int, name: str, **kw: Any) -> NodeSeen:
    return NodeSeen(rv=rv, name=name, ready=True, schedulable=True, **kw)


def listed() -> list[NodeSeen | PodSeen]:
    """Two full drifted nodes, listed at one resourceVersion (one store state)."""
    return [
        up(10, "a"),
        up(10, "b"),
        PodSeen(10, "default/p1", node="a", phase="Running"),
        PodSeen(10, "default/p2", node="b", phase="Running"),
    ]


def replacement_of_a(cordon_at: int = 15, ready_at: int = 12) -> list[NodeSeen | PodSeen]:
    """a's successor s made and Ready, then a marked, cordoned, drained and deleted."""
    return [
        NodeSeen(11, "s", schedulable=True, replaces="a", request=KEY_A),  # not Ready yet
        up(ready_at, "s", replaces="a", request=KEY_A),
        NodeSeen(cordon_at - 1, "a", ready=True, schedulable=False),  # the mark's NoSchedule taint
        NodeSeen(cordon_at, "a", ready=True, schedulable=False),  # cordoned
        PodSeen(16, "default/p1", node="a", phase="Running", gone=True),
        PodSeen(17, "default/p3", node="s", phase="Running"),
        NodeSeen(18, "a", gone=True),
    ]


def test_a_successor_ready_before_the_cordon_holds() -> None:
    assert replacement_violations([*listed(), *replacement_of_a()], {"a", "b"}, "c", RUNS) == []


def test_the_cordon_before_the_successor_is_ready_breaks() -> None:
    v = replacement_violations([*listed(), *replacement_of_a(cordon_at=13, ready_at=16)], {"a", "b"}, "c", RUNS)
    assert v == [
        "node a and its successors all out of service at resourceVersion 12: a (ready, cordoned), s (not ready, schedulable)"
    ]


def test_a_second_successor_an_unkeyed_one_and_a_node_beside_break() -> None:
    extra = [
        up(20, "s2", replaces="a", request="made-by-someone-else"),
        up(21, "x"),  # the loop bought a node: the pods had no room
    ]
    v = replacement_violations([*listed(), *replacement_of_a(), *extra], {"a", "b"}, "c", RUNS)
    assert v == [
        "successor s2 of a not keyed by its replacement: 'made-by-someone-else'",
        "node x made beside the replacements",
        "node a replaced by 2 successors: s, s2",
    ]


def test_a_drift_whose_pods_fit_the_nodes_that_stay_needs_no_successor_but_buys_nothing() -> None:
    """ordered_replacement's: a is cordoned and drained with no successor (its pods fit d); a node
    made meanwhile was bought for a pod the drain stranded."""
    seen = [
        up(10, "a"),
        up(10, "d"),
        PodSeen(10, "default/p1", node="a", phase="Running"),
        NodeSeen(11, "a", ready=True, schedulable=False),
        PodSeen(12, "default/p1", node="a", phase="Running", gone=True),
        PodSeen(13, "default/p4", node="d", phase="Running"),
        NodeSeen(14, "a", gone=True),
    ]
    assert replacement_violations(seen, {"a"}, "c", RUNS, successors_needed=False) == []
    assert replacement_violations(seen, {"a"}, "c", RUNS) == [
        "node a and its successors all out of service at resourceVersion 11: a (ready, cordoned)"
    ]
    bought = [*seen, up(15, "x")]
    assert replacement_violations(bought, {"a"}, "c", RUNS, successors_needed=False) == [
        "node x made beside the replacements"
    ]


def test_a_pod_still_on_the_node_when_it_is_deleted_is_lost() -> None:
    seen = [s for s in replacement_of_a() if not (isinstance(s, PodSeen) and s.gone)]
    assert replacement_violations([*listed(), *seen], {"a", "b"}, "c", RUNS) == [
        "pods default/p1 still on node a when it was deleted"
    ]


def test_a_node_as_the_api_server_shows_it() -> None:
    obj = {
        "metadata": {"name": "s", "labels": {LABEL_REPLACES: "a", LABEL_REQUEST: KEY_A}},
        "spec": {"taints": [{"key": "ToBeDeletedByClusterAutoscaler", "effect": "NoSchedule"}]},
        "status": {"conditions": [{"type": "Ready", "status": "True"}]},
    }
    seen = node_seen(7, obj)
    assert (seen.ready, seen.schedulable, seen.replaces, seen.serving) == (True, False, "a", False)
    assert KEY_A in successor_keys("c", "a", [RUN_A])
    # keyed by another run of a's replacement (or by its id alone, as before the run's key): not a's
    assert KEY_A not in successor_keys("c", "a", ["another"])
    assert request_key(successor_id(replacement_id("c", "a"), 0)) not in successor_keys("c", "a", [RUN_A])
    assert node_seen(8, {**obj, "spec": {"unschedulable": False}}).serving
    # A command's karpenter.sh/disrupted taint keeps new pods off a node that keeps serving its own;
    # cordoned, or marked for deletion beside it, the node is out of service.
    disrupted = {"key": "karpenter.sh/disrupted", "effect": "NoSchedule"}
    assert node_seen(9, {**obj, "spec": {"taints": [disrupted]}}).serving
    assert not node_seen(10, {**obj, "spec": {"taints": [disrupted], "unschedulable": True}}).serving
    assert not node_seen(11, obj | {"spec": {"taints": [disrupted, *obj["spec"]["taints"]]}}).serving


def test_the_drift_changes_the_labels_and_carries_the_budget() -> None:
    group = node_group("general", [{"provider": "hetzner", "serverType": ["CAX11"]}], labels={"demo": "true"}, x=1)
    spec = drift_group(group, GROUP_SPEC)["spec"]
    assert spec["labels"] == {"demo": "true", **DRIFT_LABELS} and spec["x"] == 1
    assert spec["disruption"] == GROUP_SPEC["disruption"] and spec["pools"] == group["spec"]["pools"]
    assert group["spec"]["labels"] == {"demo": "true"}  # the burst's group left as it was


def test_a_second_server_and_one_without_a_node_break() -> None:
    def server(i: int, request: str) -> dict[str, Any]:
        return {"id": i, "name": f"s{i}", "labels": {LABEL_REQUEST: request}}

    backed = {"hcloud://1", "hcloud://2"}
    assert server_violations([server(1, KEY_A), server(2, "b")], backed) == []
    assert server_violations([server(1, KEY_A), server(2, KEY_A), server(3, "c")], backed) == [
        f"second server for request {KEY_A}",
        "leaked server s3 (no Node)",
    ]
