"""Which nodes one evaluation hands to a multi-node consolidation (scaling.nodes.disruption.multi_node
plans it with prices, in the NodeReplacement's plan_replacement activity).

As Karpenter's disruption controller orders its methods (multi-node consolidation before single-node;
kubernetes-sigs/karpenter pkg/controllers/disruption/controller.go), a group's Consolidated nodes
(underused, pods fit nowhere else) are not replaced one by one while it has two or more candidates:
they go, with the group's utilized nodes whose unneeded timer ran out, to one command. Candidates are
ordered by price per unit of disruption (highest first; multi_node.savings_ratio, with the catalogue's
prices the evaluation activity reads) and those that PDBs or Longhorn would hold are left out. The
group's budget (each node counts) bounds how many go together (``consolidation_allowed``: the
loop holds that many of the candidates for the command while it plans), as Karpenter filters by budget
before its search; single-node consolidation, tried when no multi-node command is found, may take any
one candidate. One command per evaluation; a group with a single candidate hands it to single-node
consolidation alone: a Consolidated node as before, and a utilized one too (Karpenter asks every
candidate, whatever its use: the consolidation bench's seed 3 ended with a cx32 whose pods fit a
do-not-disrupt cx52's room, kept because it was its group's only candidate).
"""

from __future__ import annotations

from collections.abc import Mapping

from scaling.kube.drain import Blocker, PdbBudget, PdbInfo, pods_to_evict
from scaling.kube.models import NodeInfo, PodInfo, Resources
from scaling.nodes.catalogue import price_key
from scaling.nodes.disruption.ledger import BudgetLedger
from scaling.nodes.disruption.models import ConsolidationPolicy, DisruptionReason
from scaling.nodes.disruption.multi_node import MAX_CANDIDATES, disruption_cost, savings_ratio
from scaling.nodes.models import NodeGroup, ScaleDownSettings
from scaling.nodes.scale_down.checks import individual_blockers, pool_for
from scaling.nodes.scale_down.models import NodeDecision, NodeRemoval, NodeState, ScaleDownPlan
from scaling.nodes.scale_down.storage import LonghornState, storage_blockers

ONE_COMMAND = "MultiNodeConsolidationPending"


def consolidating(gs: ScaleDownSettings) -> bool:
    """The group consolidates as Karpenter does: its nodes' PDBs are read as Karpenter reads them too
    (each need allow one eviction now; PdbBudget.check), else a node holding two pods of a PDB that
    allows one is never consolidated (a cx52 kept for two batch pods on the consolidation bench)."""
    return gs.enabled and gs.policy is ConsolidationPolicy.WHEN_EMPTY_OR_UNDERUTILIZED


def consolidation_blockers(
    node: NodeInfo,
    pods: list[PodInfo],
    gs: ScaleDownSettings,
    pdbs: list[PdbInfo],
    storage: LonghornState | None,
    targets: list[NodeInfo],
    used: dict[str, Resources],
    protected: set[str],
    kinds: frozenset[str],
) -> list[Blocker] | None:
    """What holds a utilized node out of a multi-node consolidation on its own (do-not-disrupt, PDBs,
    Longhorn, ...): none, it may join one; None, its group does not consolidate underutilized nodes."""
    if not consolidating(gs):
        return None
    held, _ = individual_blockers(
        node, pods, pdbs, storage, targets, used, protected, kinds, check_fit=False, one_at_a_time=True
    )
    return held


def select_consolidation(
    plan: ScaleDownPlan,
    candidates: list[NodeDecision],
    by_name: dict[str, NodeInfo],
    on_node: dict[str, list[PodInfo]],
    groups: dict[str, NodeGroup],
    storage: LonghornState | None,
    targets: list[NodeInfo],
    taken: set[str],
    budget: PdbBudget,
    ledger: BudgetLedger,
    now: float,
    prices: Mapping[str, float] | None = None,
    refused: list[NodeDecision] | None = None,
) -> list[NodeDecision]:
    """Set ``plan.consolidation`` to the first group's command of two or more nodes (none when no group
    has that many) and return the candidates left alone in their group, as Consolidated (the caller
    replaces each, or deletes it when its pods fit the others). ``taken``: nodes this evaluation already removes or sends pods to;
    ``prices``: the catalogue's hourly prices (catalogue.hourly_prices); ``refused``: nodes that would
    be candidates but for a standing refusal (disruption.refusals). They rejoin a command with a node
    that was not in the refused one (its timer ran out since): that is another question, which
    Karpenter asks too (a node turning consolidatable changes its cluster state), while alone they
    stay held until the cluster changes."""
    prices = prices or {}
    pools = list(groups.values())
    per_group: dict[str, list[NodeDecision]] = {}
    for dec in candidates:
        if dec.name not in taken:
            per_group.setdefault(dec.group or "", []).append(dec)
    reopened: dict[str, list[NodeDecision]] = {}
    for dec in refused or []:
        if dec.name not in taken:
            reopened.setdefault(dec.group or "", []).append(dec)
    singles: list[NodeDecision] = []
    for name in sorted(per_group):
        fresh = {d.name for d in per_group[name]}
        group = groups.get(name)
        expire = group.disruption.expire_after_s if group is not None else None

        def cost(d: NodeDecision, expire: float | None = expire) -> tuple[float, float, str]:
            node, pods = by_name[d.name], on_node.get(d.name, [])
            pool = pool_for(node, pools)
            price = prices.get(price_key(pool.provider, pool.server_type)) if pool is not None else None
            return -savings_ratio(price, d.name, pods), disruption_cost(node, pods, expire, now), d.name

        chosen: list[NodeDecision] = []
        for dec in sorted(per_group[name] + reopened.get(name, []), key=cost):
            if len(chosen) == MAX_CANDIDATES:
                break
            evict = pods_to_evict(dec.name, on_node.get(dec.name, []))
            held = ledger.blocker(name, DisruptionReason.UNDERUTILIZED) or budget.check(evict, one_at_a_time=True)
            if held is None:
                # the nodes chosen before it leave with it: two that hold a volume's last healthy
                # replicas never go in one command (its drain's re-check would cancel both, after
                # the successor was bought)
                going = {d.name for d in chosen} | {dec.name}
                left = {t.name for t in targets if t.name not in taken and t.name not in going}
                held = next(iter(storage_blockers(dec.name, storage, left)), None)
            if held is not None:
                dec.state, dec.reasons = NodeState.BLOCKED, [held]
                continue
            chosen.append(dec)
        if not fresh.intersection(d.name for d in chosen):
            chosen = []  # only refused nodes left: what they were refused for stands
        if len(chosen) < 2:
            for d in chosen:  # alone: single-node consolidation, which Karpenter asks of every candidate
                if d.state == NodeState.UTILIZED:  # a spare node: its pods may fit the others' room
                    d.state, d.reasons = NodeState.CONSOLIDATED, []
                singles.append(d)
            continue
        if plan.consolidation:
            for d in chosen:
                if d.name in fresh:  # a refused node keeps saying why it was refused
                    d.reasons = [Blocker(code=ONE_COMMAND, message="one multi-node consolidation per loop")]
            continue
        # The budget bounds the command (each node counts); single-node consolidation may take any one.
        plan.consolidation_allowed = min(ledger.left(name, DisruptionReason.UNDERUTILIZED), len(chosen))
        for k, dec in enumerate(chosen):
            evict = pods_to_evict(dec.name, on_node.get(dec.name, []))
            if k < plan.consolidation_allowed:  # what the loop holds for the command while it plans
                budget.consume(evict)
                ledger.count(name)
            if dec.name not in fresh:  # a refused node rejoining
                dec.reasons, dec.removable_at = [], None
            dec.state, dec.selected = NodeState.CONSOLIDATED, True
            plan.consolidation.append(NodeRemoval.of(dec, now, evict))
    return singles
