"""PD's /autoscaling answer as a component plan: each of PD's plans is one group's target."""

from __future__ import annotations

from scaling.components.contracts import PdPlan
from scaling.components.plan import GROUP_LABEL, ComponentPlan, PlanInput
from scaling.components.planners.targets import Targets


def plan_from_pd(inp: PlanInput, plans: list[PdPlan]) -> ComponentPlan:
    """PD returns the full set of groups of a component it planned: each plan is a group's
    target; a standing group PD left out goes to 0. Counts are capped by the resource type's
    count. No plan at all for this component (PD answers nothing for a component within its
    thresholds, and growth asks once for both) changes nothing: it never drains the groups."""
    plan = ComponentPlan(component=inp.spec.component)
    if not any(p.component == inp.spec.component for p in plans):
        plan.notes.append(f"PD gave no plan for {inp.spec.component}: nothing changed")
        return plan
    t = Targets(inp)
    wanted: set[str] = set()
    per_type: dict[str, int] = {}
    for p in plans:
        if p.component != inp.spec.component:
            continue
        res = inp.spec.resources.get(p.resource_type)
        if res is None:
            plan.notes.append(f"PD planned unknown resource type {p.resource_type!r}: ignored")
            continue
        labels = dict(p.labels)
        name = t.ensure_group(res, labels, labels.get(GROUP_LABEL) or p.resource_type)
        count = max(0, p.count)
        if res.count is not None:
            count = min(count, max(0, res.count - per_type.get(res.name, 0)))
        per_type[res.name] = per_type.get(res.name, 0) + count
        wanted.add(name)
        t.set(name, count, "PD's plan")
    for name in t.meta:
        if name != inp.base_cluster and name not in wanted and t.target[name] > 0:
            t.set(name, 0, "not in PD's plan")
    plan.changes = [c for c in t.changes() if not (c.create and c.to_replicas == 0)]
    return plan
