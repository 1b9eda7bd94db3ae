"""Single-node consolidation (Karpenter's singlenodeconsolidation.go: replace one node by one cheaper node
that holds its pods): only for groups that write consolidationPolicy: WhenEmptyOrUnderutilized, only for
an underused node whose pods fit nowhere else, and only when the successor saves enough."""

from __future__ import annotations

from scaling.kube.drain import NO_PLACE_TO_MOVE
from scaling.nodes.contracts import ReplacementPlan
from scaling.nodes.disruption.models import ConsolidationPolicy
from scaling.nodes.disruption.replacement import saving_refused
from scaling.nodes.models import NodeGroup, PoolSpec, ScaleDownSettings
from scaling.nodes.scale_down.models import NodeState
from tests.scaling.nodes.scale_down.test_candidates import GI, node, plan, pod, state


def group(policy: ConsolidationPolicy | None) -> NodeGroup:
    return NodeGroup(
        name="g",
        pools=[PoolSpec(provider="kwok", serverType=["small"], priority=10)],
        scaleDown=ScaleDownSettings(policy=policy, unneeded_time_s=60),
    )


def cluster() -> tuple[list, list]:
    """n1 is underused (25 %), and its pod fits on no other node."""
    nodes = [node("n1"), node("full", group=None, cpu=4000, mem=8 * GI)]
    return nodes, [pod("web", "n1", cpu=1000), pod("x", "full", cpu=3900)]


def test_an_underused_node_whose_pods_fit_nowhere_is_consolidated_after_its_unneeded_time() -> None:
    nodes, pods = cluster()
    g = group(ConsolidationPolicy.WHEN_EMPTY_OR_UNDERUTILIZED)
    waiting = plan(nodes, pods, groups=[g], since={"n1": 10_000.0 - 30}, last_up=0.0)
    assert state(waiting, "n1")[0] == NodeState.UNNEEDED_WAITING  # its unneeded time first
    p = plan(nodes, pods, groups=[g], since={"n1": 0.0}, last_up=0.0)
    assert [(r.name, r.kind) for r in p.to_remove] == [("n1", NodeState.CONSOLIDATED)]


def test_cluster_autoscalers_rules_stay_the_default() -> None:
    nodes, pods = cluster()
    for policy in (None, ConsolidationPolicy.WHEN_EMPTY):
        p = plan(nodes, pods, groups=[group(policy)], since={"n1": 0.0}, last_up=0.0)
        assert p.to_remove == []
    assert state(plan(nodes, pods, groups=[group(None)], since={"n1": 0.0}, last_up=0.0), "n1") == (
        NodeState.BLOCKED,
        NO_PLACE_TO_MOVE,
    )


def test_pods_that_fit_elsewhere_make_it_a_plain_removal() -> None:
    nodes = [node("n1"), node("roomy", group=None, cpu=64000, mem=64 * GI)]
    g = group(ConsolidationPolicy.WHEN_EMPTY_OR_UNDERUTILIZED)
    p = plan(nodes, [pod("web", "n1", cpu=1000)], groups=[g], since={"n1": 0.0}, last_up=0.0)
    assert [(r.name, r.kind) for r in p.to_remove] == [("n1", NodeState.UNDERUSED)]


def stranding() -> tuple[list, list]:
    """x (38 % of its memory) holds an api (1 CPU, 2 GiB) and a cache (500m, 3 GiB); d has 2.1 GiB free
    and m 3.1 GiB. First fit puts the api on d and the cache on m. An api that arrives first goes to
    m (more free room: LeastAllocated), and the cache then fits no node."""
    nodes = [node("x", cpu=8000, mem=13 * GI), node("d", group=None, mem=6 * GI), node("m", group=None, mem=6 * GI)]
    pods = [
        pod("api", "x", cpu=1000, mem=2 * GI),
        pod("cache", "x", cpu=500, mem=3 * GI),
        pod("d-batch", "d", cpu=1000, mem=4 * GI - GI // 10),
        pod("m-cache", "m", cpu=500, mem=3 * GI - GI // 10),
    ]
    return nodes, pods


def test_a_removal_the_scheduler_follows_in_some_orders_only_is_its_consolidations() -> None:
    # First fit says x's pods fit elsewhere, so Cluster Autoscaler's rules remove it with a plain drain
    # (their simulator's rule, kept for its groups). The consolidation bench cycled so: the cache went
    # pending, a scale-up bought a node for it, and the next evaluation removed that one again. A
    # Karpenter-style group hands x to its consolidation, which drains it in an order that places
    # both (test_multi_node: the cache first) or refuses.
    nodes, pods = stranding()
    ca = plan(nodes, pods, groups=[group(None)], since={"x": 0.0}, last_up=0.0)
    assert [(r.name, r.kind) for r in ca.to_remove] == [("x", NodeState.UNDERUSED)]
    g = group(ConsolidationPolicy.WHEN_EMPTY_OR_UNDERUTILIZED)
    p = plan(nodes, pods, groups=[g], since={"x": 0.0}, last_up=0.0)
    assert [(r.name, r.kind) for r in p.to_remove] == [("x", NodeState.CONSOLIDATED)]
    # Beside an empty node the api goes there whatever comes first: a plain removal, as before.
    roomy = [*nodes, node("e", group=None, mem=6 * GI)]
    p = plan(roomy, pods, groups=[g], since={"x": 0.0}, last_up=0.0)
    assert [(r.name, r.kind) for r in p.to_remove] == [("x", NodeState.UNDERUSED)]


def test_a_standing_refusal_holds_a_removal_the_scheduler_may_not_follow() -> None:
    from scaling.nodes.disruption.refusals import RefusedConsolidation, cluster_digest

    nodes, pods = stranding()
    g = group(ConsolidationPolicy.WHEN_EMPTY_OR_UNDERUTILIZED)
    refusal = RefusedConsolidation(
        node="x", digest=cluster_digest(nodes, pods), at=9_990.0, message="no order of evictions places every pod"
    )
    p = plan(nodes, pods, groups=[g], since={"x": 0.0}, last_up=0.0, refused=[refusal])
    assert p.to_remove == []
    assert state(p, "x")[0] == NodeState.BLOCKED and "no order of evictions" in p.decisions["x"].reasons[0].message


def test_the_saving_threshold() -> None:
    assert saving_refused(ReplacementPlan(price_before=1.0, price_after=0.9), 0.10) is None
    assert "less than 10% saved" in (saving_refused(ReplacementPlan(price_before=1.0, price_after=0.95), 0.10) or "")
    assert saving_refused(ReplacementPlan(price_before=None, price_after=0.1), 0.10) is not None
    assert saving_refused(ReplacementPlan(price_before=1.0, price_after=0.0), 0.10) is None  # pods fit elsewhere


def test_what_if_consolidate_lists_removals_and_cheaper_replacements_with_their_saving() -> None:
    from scaling.nodes.contracts import ScaleDownObservation
    from scaling.nodes.disruption.what_if import consolidation_now
    from scaling.nodes.providers.kwok import kwok_catalogue

    g = NodeGroup(
        name="g",
        pools=[
            PoolSpec(provider="kwok", serverType=["cx22"], priority=30),
            PoolSpec(provider="kwok", serverType=["cx42"], priority=20),
            PoolSpec(provider="kwok", serverType=["cx52"], priority=10),
        ],
    )
    # dear runs 28 % of a cx52; its pod fits neither the empty cx22 nor busy, but a cx42.
    dear = node("dear", cpu=16000, mem=32 * GI, pool="kwok-cx52")
    empty = node("empty", pool="kwok-cx22")
    busy = node("busy", cpu=2000, mem=4 * GI, pool="kwok-cx22")
    obs = ScaleDownObservation(
        nodes=[dear, empty, busy],
        pods=[pod("small", "dear", cpu=4500), pod("b", "busy", cpu=1900)],
        groups=[g],
    )
    report = consolidation_now(obs, kwok_catalogue(), 10_000.0)
    kinds = {s.node: (s.kind, s.successors) for s in report.steps}
    # dear and busy are one command's candidates (busy is utilized, as Karpenter considers every node):
    # together they would need two nodes (the group's priorities put busy's pod on a cx22), so
    # single-node consolidation takes the first that goes alone, in Karpenter's order (price per unit
    # of disruption, highest first): dear, the cx52, replaced by a cx42 (busy's pod would fit dear's
    # room too, but moving it saves a cx22's price only).
    assert kinds == {"empty": ("Empty", []), "dear": ("Consolidated", ["kwok/cx42"])}
    assert report.price_per_hour_after < report.price_per_hour_before
    # Without dear, busy's pod has nowhere else to go and no cheaper type holds it.
    obs = obs.model_copy(update={"nodes": [busy, empty], "pods": obs.pods[1:]})
    kinds = {s.node: (s.kind, s.successors) for s in consolidation_now(obs, kwok_catalogue(), 10_000.0).steps}
    assert kinds == {"empty": ("Empty", [])}
    # The group itself keeps Cluster Autoscaler's rules: only the report assumes the policy.
    assert g.scale_down.policy is None


def test_a_pdb_that_allows_one_eviction_holds_no_consolidation_of_a_node_with_two_of_its_pods() -> None:
    """Karpenter reads PDBs per pod (kubernetes-sigs/karpenter pkg/utils/pdb/pdb.go CanEvictPods: blocked
    only when a PDB allows no disruption; the drain evicts the rest as the PDB lets it); Cluster
    Autoscaler wants every pod at once. The consolidation bench kept a cx52 for two batch pods of a PDB
    allowing one, dearer than Karpenter would end."""
    from scaling.kube.drain import NOT_ENOUGH_PDB, LabelSelector, PdbInfo
    from scaling.nodes.scale_down.recheck import still_removable

    nodes, _ = cluster()
    pods = [pod(f"batch-{i}", "n1", cpu=500, labels={"app": "batch"}) for i in range(2)] + [pod("x", "full", cpu=3900)]
    pdb = PdbInfo(
        namespace="default", name="batch", selector=LabelSelector(match_labels={"app": "batch"}), disruptions_allowed=1
    )
    karpenter = group(ConsolidationPolicy.WHEN_EMPTY_OR_UNDERUTILIZED)
    p = plan(nodes, pods, pdbs=[pdb], groups=[karpenter], since={"n1": 0.0}, last_up=0.0)
    assert [(r.name, r.kind) for r in p.to_remove] == [("n1", NodeState.CONSOLIDATED)]
    with_successor = [*nodes, node("successor")]  # its drain's re-check: the successor is Ready
    assert still_removable(nodes[0], pods, [pdb], None, with_successor, groups=[karpenter]).ok
    none_left = pdb.model_copy(update={"disruptions_allowed": 0})
    p = plan(nodes, pods, pdbs=[none_left], groups=[karpenter], since={"n1": 0.0}, last_up=0.0)
    assert state(p, "n1") == (NodeState.BLOCKED, NOT_ENOUGH_PDB)
    # Cluster Autoscaler's groups keep its rule.
    ca = group(None)
    assert state(plan(nodes, pods, pdbs=[pdb], groups=[ca], since={"n1": 0.0}, last_up=0.0), "n1") == (
        NodeState.BLOCKED,
        NOT_ENOUGH_PDB,
    )
    assert [b.code for b in still_removable(nodes[0], pods, [pdb], None, with_successor, groups=[ca]).blockers] == [
        NOT_ENOUGH_PDB
    ]
