"""Drift and expiry: a node records the hash of its pool's spec at create (as Karpenter's NodeClaims carry
karpenter.sh/nodepool-hash, kubernetes-sigs/karpenter pkg/apis/v1/nodepool.go Hash); a changed spec makes
it Drifted, expireAfter passed makes it Expired, and the plan replaces either within the budgets."""

from __future__ import annotations

from datetime import UTC, datetime

from scaling.kube.labels import label_value
from scaling.kube.models import Taint
from scaling.nodes.disruption.budgets import BUDGET_EXHAUSTED
from scaling.nodes.disruption.do_not_disrupt import ANNOTATION_DO_NOT_DISRUPT, DO_NOT_DISRUPT
from scaling.nodes.disruption.drift import (
    LABEL_POOL_HASH,
    LABEL_REPLACEMENT,
    LABEL_REPLACES,
    drift_message,
    expiry_message,
    pool_hash,
)
from scaling.nodes.disruption.models import Budget, Disruption, DisruptionReason
from scaling.nodes.models import NodeGroup, PoolSpec, ScaleDownSettings
from scaling.nodes.nodegroups import flatten_pools
from scaling.nodes.scale_down.landing import REPLACING
from scaling.nodes.scale_down.methods.drifted import DRIFTED
from scaling.nodes.scale_down.models import NodeState
from scaling.nodes.scale_down.recheck import blocking
from tests.scaling.nodes.scale_down.test_candidates import GI, node, plan, pod, removed, state

NOW = datetime(2030, 1, 1, tzinfo=UTC).timestamp()


def group(image: str = "ubuntu-24.04", **disruption: object) -> NodeGroup:
    return NodeGroup(
        name="g",
        labels={"team": "web"},
        pools=[PoolSpec(provider="kwok", serverType=["small"], priority=10, minNodes=2, config={"image": image})],
        disruption=Disruption(**disruption),
    )


def made_from(g: NodeGroup, name: str, created_h_ago: float = 1.0, **kw: object):  # noqa: ANN201
    pool = flatten_pools(g)[0]
    labels = {LABEL_POOL_HASH: pool_hash(g.labels, g.taints, pool), **kw.pop("labels", {})}  # type: ignore[dict-item]
    return node(name, labels=labels, created_at=datetime.fromtimestamp(NOW - created_h_ago * 3600, UTC), **kw)


def busy_cluster(g: NodeGroup) -> tuple[list, list]:
    """Two busy nodes of g made from its spec, whose pods fit nowhere else."""
    nodes = [made_from(g, "n1"), made_from(g, "n2")]
    pods = [pod("a", "n1", cpu=3000), pod("b", "n2", cpu=3000)]
    return nodes, pods


def test_the_hash_covers_what_a_node_is_made_from_and_nothing_else() -> None:
    g = group()
    pool = flatten_pools(g)[0]
    h = pool_hash(g.labels, g.taints, pool)
    assert pool_hash({"team": "web"}, [], pool) == h
    assert pool_hash({"team": "api"}, [], pool) != h
    assert pool_hash(g.labels, [Taint(key="k", value="v", effect="NoSchedule")], pool) != h
    assert pool_hash(g.labels, g.taints, flatten_pools(group(image="ubuntu-26.04"))[0]) != h
    # Budgets, priorities, minNodes and scale-down settings drift nothing.
    other = group(budgets=[Budget(nodes="1")]).model_copy(update={"scale_down": ScaleDownSettings(unneeded_time_s=1)})
    other.pools[0].priority, other.pools[0].min_nodes = 99, 0
    assert pool_hash(other.labels, other.taints, flatten_pools(other)[0]) == h


def test_drift_is_a_changed_spec_or_a_pool_no_longer_listed_and_never_a_node_without_the_label() -> None:
    old = group()
    n = made_from(old, "n1")
    assert drift_message(n, old) is None
    assert "earlier spec of pool kwok-small" in (drift_message(n, group(image="ubuntu-26.04")) or "")
    moved = old.model_copy(update={"pools": [PoolSpec(provider="kwok", serverType=["large"], priority=10)]})
    assert "no longer in group g's spec" in (drift_message(n, moved) or "")
    assert drift_message(node("legacy"), group(image="ubuntu-26.04")) is None


def test_a_node_made_with_the_groups_startup_taints_is_not_drifted_until_they_change() -> None:
    """The hash a node records is of what it registers with (its group's startup taints and their marks
    included, as request_machine computes it); the drift check reads the same."""
    g = group().model_copy(
        update={"startup_taints": [Taint(key="node.cilium.io/agent-not-ready", effect="NoSchedule")]}
    )
    pool = flatten_pools(g)[0]
    n = node("n1", labels={LABEL_POOL_HASH: pool_hash(g.registered_labels, g.registered_taints, pool)})
    assert drift_message(n, g) is None
    assert drift_message(n, group()) is not None  # the startup taint dropped from the spec


def test_expiry_is_age_past_expire_after() -> None:
    g = group(expire_after_s=24 * 3600.0)
    assert expiry_message(made_from(g, "young", created_h_ago=23), g, NOW) is None
    assert "expires nodes after 24h" in (expiry_message(made_from(g, "old", created_h_ago=25), g, NOW) or "")
    assert expiry_message(made_from(group(), "old", created_h_ago=10_000), group(), NOW) is None  # Never


def test_drifted_busy_nodes_are_replaced_within_the_drift_budget_and_min_nodes() -> None:
    old = group()
    nodes, pods = busy_cluster(old)
    new = group(image="ubuntu-26.04", budgets=[Budget(nodes="1", reasons=(DisruptionReason.DRIFTED,))])
    p = plan(nodes, pods, groups=[new], now=NOW, last_up=0.0)
    # Their pods fit nowhere else and the pool is at minNodes: a replacement brings its own room.
    assert [(r.name, r.kind) for r in p.to_remove] == [("n1", NodeState.DRIFTED)]
    assert state(p, "n2") == (NodeState.BLOCKED, BUDGET_EXHAUSTED)
    assert removed(plan(nodes, pods, groups=[old], now=NOW, last_up=0.0)) == []  # spec unchanged


def test_expired_nodes_are_replaced_even_with_consolidation_off() -> None:
    g = group(expire_after_s=3600.0).model_copy(update={"scale_down": ScaleDownSettings(enabled=False)})
    nodes = [made_from(g, "n1", created_h_ago=2), made_from(g, "n2", created_h_ago=0.5)]
    p = plan(nodes, [pod("a", "n1", cpu=3000), pod("b", "n2", cpu=3000)], groups=[g], now=NOW, last_up=0.0)
    assert [(r.name, r.kind) for r in p.to_remove] == [("n1", NodeState.EXPIRED)]
    assert state(p, "n2")[0] == NodeState.BLOCKED  # scale-down disabled: no consolidation


def test_do_not_disrupt_holds_a_drifted_node() -> None:
    old = group()
    nodes, pods = busy_cluster(old)
    pods[0] = pod("a", "n1", cpu=3000, annotations={ANNOTATION_DO_NOT_DISRUPT: "true"})
    p = plan(nodes, pods, groups=[group(image="ubuntu-26.04")], now=NOW, last_up=0.0)
    assert state(p, "n1") == (NodeState.BLOCKED, DO_NOT_DISRUPT) and removed(p) == ["n2"]


def test_a_successor_is_held_while_its_predecessor_is_replaced() -> None:
    g = group()
    nodes = [made_from(g, "n1"), made_from(g, "n1-successor", labels={LABEL_REPLACES: "n1"})]
    nodes.append(node("big", group=None, cpu=64000, mem=64 * GI))
    p = plan(nodes, [], groups=[g], now=NOW, last_up=0.0, in_progress={"n1"})
    assert state(p, "n1-successor") == (NodeState.BLOCKED, REPLACING)
    # Its removal reported done while the node is still seen (a cache behind the API server, or the
    # report before the delete landed), marked as its NodeScaleDown left it: still held, else it is an
    # empty node and gets tainted.
    marked = [
        n.model_copy(update={"taints": [Taint(key="ToBeDeletedByClusterAutoscaler", value="1", effect="NoSchedule")]})
        if n.name == "n1"
        else n
        for n in nodes
    ]
    assert state(plan(marked, [], groups=[g], now=NOW, last_up=0.0), "n1-successor") == (NodeState.BLOCKED, REPLACING)
    g2 = g.model_copy(update={"pools": [g.pools[0].model_copy(update={"min_nodes": 0})]})
    # Seen serving, unmarked (its command refused): the successor kept for pods that landed on it is a
    # node like any other, not held while n1 lives.
    assert "n1-successor" in removed(plan(nodes, [], groups=[g2], now=NOW, last_up=0.0))
    gone = [n for n in nodes if n.name != "n1"]
    assert "n1-successor" in removed(plan(gone, [], groups=[g2], now=NOW, last_up=0.0))  # n1 gone: plain empty node


def test_a_multi_node_commands_successor_is_held_while_any_of_its_nodes_is_in_flight() -> None:
    """The command's nodes drain together: the one the successor names (its last) may be gone while
    another still drains, and the successor is the only place that node's pods have to go."""
    g = group()
    g0 = g.model_copy(update={"pools": [g.pools[0].model_copy(update={"min_nodes": 0})]})
    command = "nodes/c/replace/n1@0f1e2d3c"  # orchestration.command_id: a workflow id with '/'
    labels = {LABEL_REPLACES: "n3", LABEL_REPLACEMENT: label_value(command)}
    nodes = [made_from(g, "n1"), made_from(g, "s", labels=labels)]
    nodes.append(node("big", group=None, cpu=64000, mem=64 * GI))
    p = plan(nodes, [], groups=[g0], now=NOW, last_up=0.0, in_progress={"n1"}, replacing=[command])
    assert state(p, "s") == (NodeState.BLOCKED, REPLACING)
    assert "replaces nodes of a command" in p.decisions["s"].reasons[0].message
    # another command in flight, or none: a plain empty node once n3 is gone
    for replacing in (["nodes/c/replace/n1@99999999"], []):
        assert "s" in removed(
            plan(nodes, [], groups=[g0], now=NOW, last_up=0.0, in_progress={"n1"}, replacing=replacing)
        )


def test_a_replacement_recheck_ignores_what_only_holds_a_plain_removal() -> None:
    from scaling.kube.drain import MIN_NODES, Blocker

    held = [Blocker(code=c, message=c) for c in ("NodeUtilized", MIN_NODES, "ScaleDownDisabledForGroup")]
    stop = [Blocker(code=DO_NOT_DISRUPT, message="d"), Blocker(code="NotEnoughPdb", message="p")]
    assert DRIFTED.cancels(held) == [] and blocking("Drifted", held + stop) == stop
