"""`growth nodes what-if consolidate`: what consolidation would do to the cluster now and what it would
save, as if every group wrote consolidationPolicy: WhenEmptyOrUnderutilized (a group that wrote
WhenEmpty stays so) and every unneeded timer had run out. Budgets, PDBs, do-not-disrupt, Longhorn,
minNodes, headroom and billing holds apply as in the loop; each Consolidated node's successors are
planned as its NodeReplacement would plan them, and one that saves too little is left out; so is the
multi-node consolidation of the evaluation's candidates (scaling.nodes.disruption.multi_node)."""

from __future__ import annotations

from pydantic import BaseModel, Field

from scaling.nodes.catalogue import catalogue_index, hourly_prices
from scaling.nodes.contracts import ScaleDownObservation
from scaling.nodes.disruption.arrival_orders import with_stranding
from scaling.nodes.disruption.models import ConsolidationPolicy
from scaling.nodes.disruption.multi_node import plan_consolidation
from scaling.nodes.disruption.replacement import plan_replacement, saving_refused
from scaling.nodes.models import NodeGroup, ServerType
from scaling.nodes.scale_down.candidates import plan_scale_down
from scaling.nodes.scale_down.checks import is_managed, pool_for
from scaling.nodes.scale_down.methods import method_for
from scaling.nodes.scale_down.methods.consolidated import MIN_SAVING
from scaling.nodes.scale_down.models import NodeRemoval, NodeState, ScaleDownLoopSettings

CONSOLIDATING = (NodeState.EMPTY, NodeState.UNDERUSED, NodeState.CONSOLIDATED)


class ConsolidationStep(BaseModel):
    node: str
    kind: str  # Empty, Underused (removed) or Consolidated (replaced)
    nodes: list[str] = Field(default_factory=list)  # a multi-node consolidation: every node it replaces
    server_type: str = ""
    price_before: float | None = None
    successors: list[str] = Field(default_factory=list)  # provider/server type of each
    price_after: float = 0.0
    # The pods it would evict one at a time, in this order (ReplacementPlan.drain_order; []: together).
    drain_order: list[str] = Field(default_factory=list)


class ConsolidationReport(BaseModel):
    steps: list[ConsolidationStep] = Field(default_factory=list)
    price_per_hour_before: float = 0.0  # every growth node the catalogue prices
    price_per_hour_after: float = 0.0
    not_worth_it: list[str] = Field(default_factory=list)  # nodes whose successors would save too little
    unpriced: list[str] = Field(default_factory=list)  # growth nodes the catalogue does not price


def _as_consolidating(g: NodeGroup) -> NodeGroup:
    policy = g.scale_down.policy if g.scale_down.policy is ConsolidationPolicy.WHEN_EMPTY else None
    scale_down = g.scale_down.model_copy(
        update={"policy": policy or ConsolidationPolicy.WHEN_EMPTY_OR_UNDERUTILIZED, "delay_after_add_s": 0.0}
    )
    return g.model_copy(update={"scale_down": scale_down})


def consolidation_now(obs: ScaleDownObservation, catalogue: list[ServerType], now: float) -> ConsolidationReport:
    prices = catalogue_index(catalogue)
    groups = [_as_consolidating(g) for g in obs.groups]
    report = ConsolidationReport()
    price: dict[str, float] = {}
    for n in obs.nodes:
        pool = pool_for(n, groups) if is_managed(n) else None
        known = prices.get((pool.provider, pool.server_type.lower())) if pool is not None else None
        if known is not None:
            price[n.name] = known.price_hourly
        elif is_managed(n):
            report.unpriced.append(n.name)
    report.price_per_hour_before = report.price_per_hour_after = sum(price.values())
    plan = plan_scale_down(
        obs.nodes,
        obs.pods,
        obs.pdbs,
        groups,
        obs.storage,
        now,
        unneeded_since={n.name: 0.0 for n in obs.nodes},  # every timer run out
        last_scale_up_at=None,
        protected=set(),
        in_progress=set(),
        settings=ScaleDownLoopSettings(max_removals_per_loop=len(obs.nodes) + 1),
        prices=hourly_prices(catalogue),
    )
    leaving = {r.name for r in plan.to_remove}
    for r in plan.to_remove:
        if r.kind not in CONSOLIDATING:
            continue
        pool = pool_for(next(n for n in obs.nodes if n.name == r.name), groups)
        step = ConsolidationStep(
            node=r.name, kind=r.kind.value, server_type=pool.server_type if pool else "", price_before=price.get(r.name)
        )
        if method_for(r.kind.value).replaces:
            succ = plan_replacement(obs, catalogue, r.name, leaving - {r.name}, now)
            succ = with_stranding(obs, catalogue, succ, r.name, leaving - {r.name}, now)
            if succ.problems or saving_refused(succ, MIN_SAVING) is not None:
                report.not_worth_it.append(r.name)
                continue
            step.successors = [
                f"{p.candidates[0].provider}/{p.candidates[0].server_type}" for p in succ.new_nodes if p.candidates
            ]
            step.price_after = succ.price_after
            step.drain_order = succ.drain_order
        report.steps.append(step)
        report.price_per_hour_after += step.price_after - (step.price_before or 0.0)
    if plan.consolidation:
        report.steps.extend(
            _multi_node(
                report, obs, catalogue, plan.consolidation, plan.consolidation_allowed, leaving, price, groups, now
            )
        )
    return report


def _multi_node(
    report: ConsolidationReport,
    obs: ScaleDownObservation,
    catalogue: list[ServerType],
    candidates: list[NodeRemoval],
    allowed: int,
    leaving: set[str],
    price: dict[str, float],
    groups: list[NodeGroup],
    now: float,
) -> list[ConsolidationStep]:
    """The multi-node consolidation its NodeReplacement would plan for the evaluation's candidates."""
    names = [r.name for r in candidates]
    succ = plan_consolidation(
        obs.model_copy(update={"groups": groups}), catalogue, names, leaving, now, MIN_SAVING, allowed
    )
    if succ.refused:
        report.not_worth_it.extend(names)
        return []
    nodes = succ.nodes or names[:1]
    by_name = {n.name: n for n in obs.nodes}
    types = {pool.server_type for n in nodes if (pool := pool_for(by_name[n], groups)) is not None}
    step = ConsolidationStep(
        node=nodes[0],
        kind=NodeState.CONSOLIDATED.value,
        nodes=nodes if len(nodes) > 1 else [],
        server_type="+".join(sorted(types)),
        price_before=succ.price_before,
        successors=[
            f"{p.candidates[0].provider}/{p.candidates[0].server_type}" for p in succ.new_nodes if p.candidates
        ],
        price_after=succ.price_after,
        drain_order=succ.drain_order,
    )
    report.price_per_hour_after += step.price_after - sum(price.get(n, 0.0) for n in nodes)
    return [step]
