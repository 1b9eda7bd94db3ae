"""A loop's scale-up decision, as its history records it: what the planner was given, what it decided.

The NodeAutoscaler runs `decide_scale_up` in a local activity (contracts.PLAN_SCALE_UP), so the
decision is a marker in the loop's history: a replay reads it instead of planning again, and a
change to the planner needs no workflow patch. The result carries the input too (a local
activity's input is not in history), so `growth nodes what-if` runs today's planner on exactly
what the loop's planner was given (scaling/nodes/what_if.py).

Neither grows with the cluster beyond what the loop carries already: the demand is the
observation's aggregated shapes, and the in-flight requests and the planned nodes are written
as runs of identical entries (a batch's members are one run), with only the sampled pod uids
kept per node.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, Field

from scaling.nodes.catalogue import catalogue_index
from scaling.nodes.headroom import HeadroomSplit, split_headroom
from scaling.nodes.loop import never_satisfiable_of, within_in_flight_limit
from scaling.nodes.models import InFlightRequest, NodeGroup, PlannedNode, PodProblem, ScaleUpPlan, ServerType
from scaling.nodes.scale_up.approvals import ApprovalGate, approval_gates
from scaling.nodes.scale_up.demand import PendingDemand
from scaling.nodes.scale_up.min_size import below_min_nodes, requests_to_reach_min_nodes
from scaling.nodes.scale_up.planning import Catalogue, plan_demand


class InFlightRun(BaseModel):
    """`count` consecutive in-flight requests alike but for their ids (left out: the planner
    never reads them)."""

    request: InFlightRequest
    count: int = 1


class PlannedRun(BaseModel):
    """Consecutive planned nodes alike but for their named pods, and the approval gate they share."""

    node: PlannedNode  # pod_uids empty: each node's are in `pod_uids`
    pod_uids: list[list[str]]  # one list per node of the run
    gate: ApprovalGate | None = None


class ScaleUpInput(BaseModel):
    """What the planner is given: the loop's pending demand (never-satisfiable shapes left out),
    its groups, the catalogue it fetched, the requests it counts in flight and its limits."""

    demand: PendingDemand
    groups: list[NodeGroup] = Field(default_factory=list)
    catalogue: list[ServerType] = Field(default_factory=list)
    in_flight: list[InFlightRun] = Field(default_factory=list)
    unavailable: list[tuple[str, str]] = Field(default_factory=list)  # (group, pool)
    max_nodes_total: int | None = None
    max_price_per_hour_total: float | None = None
    enforce_min_nodes: bool = True
    requests_in_flight: int = 0  # every request the loop holds, for max_requests_in_flight
    max_requests_in_flight: int = 1500

    def in_flight_requests(self) -> list[InFlightRequest]:
        return [r.request for r in self.in_flight for _ in range(r.count)]


class ScaleUpDecision(BaseModel):
    """What the planner decided (`plan` without its new nodes, which are in `new_nodes`)."""

    input: ScaleUpInput | None = None  # None: there was nothing to decide
    plan: ScaleUpPlan = Field(default_factory=ScaleUpPlan)
    new_nodes: list[PlannedRun] = Field(default_factory=list)
    headroom_problems: list[PodProblem] = Field(default_factory=list)
    never_satisfiable: dict[str, PodProblem] = Field(default_factory=dict)  # shape key -> its problem

    def planned(self) -> tuple[list[PlannedNode], list[ApprovalGate | None]]:
        """The planned nodes in plan order, and each one's approval gate."""
        nodes: list[PlannedNode] = []
        gates: list[ApprovalGate | None] = []
        for run in self.new_nodes:
            for uids in run.pod_uids:
                nodes.append(run.node.model_copy(update={"pod_uids": uids}))
                gates.append(run.gate)
        return nodes, gates


def in_flight_runs(requests: list[InFlightRequest]) -> list[InFlightRun]:
    runs: list[InFlightRun] = []
    for r in requests:
        alike = r.model_copy(update={"id": ""})
        if runs and runs[-1].request == alike:
            runs[-1].count += 1
        else:
            runs.append(InFlightRun(request=alike))
    return runs


def planned_runs(nodes: list[PlannedNode], gates: list[ApprovalGate | None]) -> list[PlannedRun]:
    runs: list[PlannedRun] = []
    for node, gate in zip(nodes, gates, strict=True):
        alike = node.model_copy(update={"pod_uids": []})
        if runs and runs[-1].node == alike and runs[-1].gate == gate:
            runs[-1].pod_uids.append(node.pod_uids)
        else:
            runs.append(PlannedRun(node=alike, pod_uids=[node.pod_uids], gate=gate))
    return runs


def nothing_to_decide(
    demand: PendingDemand,
    groups: list[NodeGroup],
    in_flight: list[InFlightRequest],
    enforce_min_nodes: bool,
) -> bool:
    """When the loop skips the planner (its decision would be empty): no pending shape, and no
    pool below its minNodes. Workflow orchestration: what it says decides whether the loop
    records a decision, so a change to it is a workflow change (replay safety)."""
    if demand.shapes:
        return False
    return not (enforce_min_nodes and below_min_nodes(groups, demand.nodes, in_flight))


def empty_decision(demand: PendingDemand) -> ScaleUpDecision:
    """The decision of a loop with nothing to decide: what the demand says fits existing nodes."""
    return ScaleUpDecision(
        plan=ScaleUpPlan(
            fits_existing=[p.uid for p in demand.fits_existing_pods], pods_fit_existing=demand.fits_existing
        )
    )


def plan_new_nodes(
    demand: PendingDemand,
    groups: Sequence[NodeGroup],
    prices: Catalogue,
    in_flight: list[InFlightRequest],
    unavailable: set[tuple[str, str]],
    *,
    max_nodes_total: int | None,
    max_price_per_hour_total: float | None,
    enforce_min_nodes: bool,
    requests_in_flight: int,
    max_requests_in_flight: int,
) -> tuple[HeadroomSplit, list[PlannedNode]]:
    """The demand planned, headroom split out (its plan's new_nodes with the nodes that raise pools
    to their minNodes), and the nodes to request now within the in-flight limit. The loop's
    decision and what-if's replanning of a loop recorded without one both plan so."""
    split = split_headroom(
        plan_demand(
            demand,
            groups,
            prices,
            in_flight,
            max_nodes_total=max_nodes_total,
            unavailable_pools=unavailable,
            max_price_per_hour_total=max_price_per_hour_total,
        )
    )
    plan = split.plan
    if enforce_min_nodes:
        plan.new_nodes += requests_to_reach_min_nodes(
            groups,
            demand.nodes,
            in_flight,
            plan.new_nodes,
            unavailable=unavailable,
            max_nodes_total=max_nodes_total,
        )
    return split, within_in_flight_limit(plan.new_nodes, requests_in_flight, max_requests_in_flight)


def decide_scale_up(inp: ScaleUpInput) -> ScaleUpDecision:
    """Plan the demand (scaling/nodes/scale_up/planning.py), add the nodes that raise pools to
    their minNodes, keep within the in-flight limit, and gate each node on its group's approval
    policy. Headroom (virtual pods) is split out of what real pods see."""
    prices = catalogue_index(inp.catalogue)
    split, nodes = plan_new_nodes(
        inp.demand,
        inp.groups,
        prices,
        inp.in_flight_requests(),
        set(inp.unavailable),
        max_nodes_total=inp.max_nodes_total,
        max_price_per_hour_total=inp.max_price_per_hour_total,
        enforce_min_nodes=inp.enforce_min_nodes,
        requests_in_flight=inp.requests_in_flight,
        max_requests_in_flight=inp.max_requests_in_flight,
    )
    plan = split.plan
    never = never_satisfiable_of(plan.problems)
    gates = approval_gates(nodes, {g.name: g for g in inp.groups}, prices)
    return ScaleUpDecision(
        input=inp,
        plan=plan.model_copy(update={"new_nodes": []}),
        new_nodes=planned_runs(nodes, gates),
        headroom_problems=split.problems,
        never_satisfiable=never,
    )
