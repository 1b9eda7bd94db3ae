"""An operator's overrides applied to a component's plan: pins and scale-in blocks.

A pin (`growth components pin`) holds one cluster's replicas (the base TidbCluster's or one
heterogeneous group's): the planner's changes to that cluster are dropped and, when its replicas
differ from the pin, one change to the pinned count takes their place (marked so the interval
guard lets it through at once). A scale-in block holds the planner's scale-ins of the component;
pins still go through. Pure: the workflow calls it with its state.
"""

from __future__ import annotations

from scaling.components.plan import HOMOGENEOUS, Change, ComponentPlan, PlanInput
from scaling.components.state import GroupRecord, Overrides

PINNED = "pinned by an operator"


def apply_overrides(
    plan: ComponentPlan, inp: PlanInput, overrides: Overrides, groups: dict[str, GroupRecord]
) -> ComponentPlan:
    """The plan after the operator's pins and scale-in blocks for `plan.component`."""
    component = plan.component
    changes = list(plan.changes)
    notes = list(plan.notes)
    current = {inp.base_cluster: inp.homogeneous_replicas, **{g.name: g.replicas for g in inp.groups}}
    for key, replicas in sorted(overrides.pins.items()):
        comp, _, cluster = key.partition("/")
        if comp != component or cluster not in current:
            continue
        changes = [ch for ch in changes if ch.cluster != cluster]
        if current[cluster] != replicas:
            rec = groups.get(cluster)
            changes.append(
                Change(
                    cluster=cluster,
                    group=HOMOGENEOUS if cluster == inp.base_cluster else (rec.group if rec else ""),
                    direction="out" if replicas > current[cluster] else "in",
                    from_replicas=current[cluster],
                    to_replicas=replicas,
                    reason=PINNED,
                )
            )
    if overrides.scale_in_blocked(component):
        blocked = [ch for ch in changes if ch.direction == "in" and ch.reason != PINNED]
        if blocked:
            notes.append(f"scale-in blocked by an operator: {len(blocked)} change(s) held")
        changes = [ch for ch in changes if ch not in blocked]
    return plan.model_copy(update={"changes": changes, "notes": notes})
