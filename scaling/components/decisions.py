"""The ComponentAutoscaler's recorded decisions, per component and round: which groups it keeps,
adopts and deletes (`reconcile`), and its plan (the planner of its source, the operator's
overrides, the scale intervals).

Each runs as a local activity (activities/components/decisions.py, names in
scaling.components.contracts) whose result, what the decision read and what it decided, is in
the autoscaler's history: a replay reads the recorded decision, so a change to a planner or to
how groups are adopted ships without a patch. What a decision reads is bounded by the
component's groups (resource types x PD label sets) and its metrics' per-group aggregates.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

from scaling.components.contracts import AutoClusterView, PdPlan
from scaling.components.groups import Reconciled, reconcile
from scaling.components.overrides import PINNED, apply_overrides
from scaling.components.plan import Change, ComponentPlan, PlanInput
from scaling.components.planners import plan_from_external, plan_from_pd, plan_growth
from scaling.components.state import GroupRecord, Overrides
from scaling.components.timing import ComponentTiming, gate


class GroupFigures(BaseModel):
    """What the groups' bookkeeping reads: the records kept, and the groups found by label."""

    records: dict[str, GroupRecord] = Field(default_factory=dict)
    found: list[AutoClusterView] = Field(default_factory=list)


class GroupDecision(BaseModel):
    figures: GroupFigures
    reconciled: Reconciled


class PlanFigures(BaseModel):
    """What a component's plan reads: the planner's input and its source's answer (`source`:
    growth's rules over `plan.metrics`, PD's `pd_plans`, or an external `recommended` count), the
    operator's overrides, and the scale intervals' clock."""

    source: Literal["growth", "pd", "external"]
    plan: PlanInput
    pd_plans: list[PdPlan] = Field(default_factory=list)
    recommended: int = 0
    overrides: Overrides = Field(default_factory=Overrides)
    groups: dict[str, GroupRecord] = Field(default_factory=dict)
    timing: ComponentTiming = Field(default_factory=ComponentTiming)
    now: datetime


class PlanDecision(BaseModel):
    """A recorded plan: its figures, the plan after the overrides, and what may go now (pinned
    changes at once, the others once their interval passed) or waits until `retry_at`."""

    figures: PlanFigures
    plan: ComponentPlan
    allowed: list[Change] = Field(default_factory=list)
    deferred: list[Change] = Field(default_factory=list)
    retry_at: datetime | None = None


def decide_groups(figures: GroupFigures) -> GroupDecision:
    return GroupDecision(figures=figures, reconciled=reconcile(figures.records, figures.found))


def decide_plan(figures: PlanFigures) -> PlanDecision:
    inp = figures.plan
    if figures.source == "external":
        plan = plan_from_external(inp, figures.recommended)
    elif figures.source == "pd":
        plan = plan_from_pd(inp, figures.pd_plans)
    else:
        plan = plan_growth(inp)
    plan = apply_overrides(plan, inp, figures.overrides, figures.groups)
    return release(PlanDecision(figures=figures, plan=plan), figures.now)


def release(decision: PlanDecision, now: datetime) -> PlanDecision:
    """The plan's changes that may go at `now`: pinned ones at once, the others once their
    direction's interval since the component's last change has passed."""
    figures, plan = decision.figures, decision.plan
    pinned = [ch for ch in plan.changes if ch.reason == PINNED]
    rest = plan.model_copy(update={"changes": [ch for ch in plan.changes if ch not in pinned]})
    gated = gate(rest, figures.timing, figures.plan.spec, now)
    return decision.model_copy(
        update={"allowed": [*pinned, *gated.allowed], "deferred": gated.deferred, "retry_at": gated.retry_at}
    )
