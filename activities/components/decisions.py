"""The ComponentAutoscaler's decisions as local activities (scaling.components.decisions): pure,
so every worker registers them; the autoscaler's history records their results."""

from __future__ import annotations

from temporalio import activity

from scaling.components import contracts
from scaling.components.decisions import (
    GroupDecision,
    GroupFigures,
    PlanDecision,
    PlanFigures,
    decide_groups,
    decide_plan,
)


@activity.defn(name=contracts.DECIDE_GROUPS)
async def groups_decision(figures: GroupFigures) -> GroupDecision:
    return decide_groups(figures)


@activity.defn(name=contracts.DECIDE_PLAN)
async def plan_decision(figures: PlanFigures) -> PlanDecision:
    return decide_plan(figures)


DECISIONS = [groups_decision, plan_decision]
