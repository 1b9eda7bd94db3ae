"""Scale-down selection: the nodes removable on their own, checked together (limit, minNodes, shared
room and PDB budget, destinations, the last copies of a volume)."""

from __future__ import annotations

from scaling.kube.drain import MIN_NODES, NO_PLACE_TO_MOVE, NOT_ENOUGH_PDB, LabelSelector, PdbInfo
from scaling.nodes.models import NodeGroup, PoolSpec
from scaling.nodes.scale_down.models import NodeState
from scaling.nodes.scale_down.select import DESTINATION, LIMIT_REACHED
from scaling.nodes.scale_down.storage import LAST_HEALTHY_REPLICA, LonghornReplica, LonghornState, LonghornVolume
from tests.scaling.nodes.scale_down.test_candidates import BUSY, GI, node, plan, pod, removed, state


def test_at_most_n_removals_per_loop_empty_first_then_least_utilized() -> None:
    nodes = [node(f"e{i:02}") for i in range(12)] + [node("u1"), node("big", group=None, cpu=64000, mem=64 * GI)]
    pods = [pod("w", "u1", cpu=200)]
    p = plan(nodes, pods, since={"u1": 0.0})
    assert removed(p) == [f"e{i:02}" for i in range(10)]
    assert state(p, "e10") == (NodeState.EMPTY, LIMIT_REACHED) and not p.decisions["e10"].selected
    assert state(p, "u1") == (NodeState.UNDERUSED, LIMIT_REACHED)
    assert p.unneeded_since["e11"] == 10_000.0  # deferred, not reset
    assert removed(plan(nodes, pods, since={"u1": 0.0}, max_removals_per_loop=3)) == ["e00", "e01", "e02"]


def test_pool_never_goes_below_min_nodes() -> None:
    nodes = [node("a"), node("b"), node("c"), node("o1", pool="kwok-other")]
    g = NodeGroup(
        name="g",
        pools=[
            PoolSpec(provider="kwok", serverType=["small"], priority=10, minNodes=2),
            PoolSpec(provider="kwok", serverType=["other"], priority=5),
        ],
    )
    p = plan(nodes, [], groups=[g])
    assert removed(p) == ["a", "o1"]
    assert state(p, "b") == (NodeState.BLOCKED, MIN_NODES) and state(p, "c") == (NodeState.BLOCKED, MIN_NODES)
    # A node already being removed no longer counts towards the minimum.
    p2 = plan(nodes, [], groups=[g], in_progress={"a"})
    assert removed(p2) == ["o1"]


def test_nodes_removed_together_share_room() -> None:
    # Each of n1/n2 (cordoned, so not targets) has a 1500m pod; t has room for one of them.
    nodes = [node("n1", unschedulable=True), node("n2", unschedulable=True), node("t", cpu=4000)]
    pods = [pod("a", "n1", cpu=1500), pod("b", "n2", cpu=1500), pod("c", "t", cpu=1900)]
    p = plan(nodes, pods, since={"n1": 0.0, "n2": 0.0, "t": 0.0})
    assert removed(p) == ["n1"]
    assert state(p, "n2") == (NodeState.BLOCKED, NO_PLACE_TO_MOVE)
    assert p.unneeded_since["n2"] == 0.0  # alone it is removable: the timer keeps running


def test_a_destination_of_a_removed_node_waits_for_the_next_loop() -> None:
    nodes = [node("n1"), node("n2")]
    p = plan(nodes, [pod("a", "n1", cpu=1000), pod("b", "n2", cpu=1000)], since={"n1": 0.0, "n2": 0.0})
    assert removed(p) == ["n1"] and p.to_remove[0].destinations == {"default/a": "n2"}
    assert state(p, "n2") == (NodeState.UNDERUSED, DESTINATION)


def test_nodes_removed_together_share_pdb_budget() -> None:
    pdb = PdbInfo(
        namespace="default", name="web", selector=LabelSelector(match_labels={"app": "web"}), disruptions_allowed=1
    )
    nodes = [node("n1"), node("n2"), node("big", group=None, cpu=64000, mem=64 * GI)]
    pods = [pod("w1", "n1", labels={"app": "web"}), pod("w2", "n2", labels={"app": "web"}), pod("x", "big", cpu=40000)]
    p = plan(nodes, pods, pdbs=[pdb], since={"n1": 0.0, "n2": 0.0})
    assert removed(p) == ["n1"] and state(p, "n2") == (NodeState.BLOCKED, NOT_ENOUGH_PDB)


def test_two_nodes_with_the_only_replicas_are_never_removed_together() -> None:
    storage = LonghornState(
        volumes=[LonghornVolume(name="vol-1")],
        replicas=[
            LonghornReplica(name="r1", volume="vol-1", node="n1", healthy=True),
            LonghornReplica(name="r2", volume="vol-1", node="n2", healthy=True),
        ],
    )
    p = plan([node("n1"), node("n2"), node("big", group=None)], [*BUSY], storage=storage)
    assert removed(p) == ["n1"]
    assert state(p, "n2") == (NodeState.BLOCKED, LAST_HEALTHY_REPLICA)
