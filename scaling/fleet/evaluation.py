"""One evaluation of a region: per instance type, scale up, remove one empty cluster, or
nothing. What the FleetAutoscaler asks every interval, and what bench/fleet_eval.py times."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence

from pydantic import BaseModel, Field

from scaling.fleet.capacity import TypeRules
from scaling.fleet.models import ClusterRecord
from scaling.fleet.scale_down import RemovalDecision, cluster_to_remove
from scaling.fleet.scale_up import ScaleUpDecision, scale_up_needed


class TypeEvaluation(BaseModel):
    """The outcome for one instance type."""

    instance_type: str
    scale_up: ScaleUpDecision
    remove: RemovalDecision | None = None


class RegionEvaluation(BaseModel):
    """The outcome for every instance type the region supports."""

    types: list[TypeEvaluation] = Field(default_factory=list)

    def scale_up_types(self) -> list[str]:
        return [t.instance_type for t in self.types if t.scale_up.needed]

    def removals(self) -> list[str]:
        return [t.remove.cluster_id for t in self.types if t.remove is not None]


def evaluate_region(
    clusters: Sequence[ClusterRecord],
    rules: Mapping[str, TypeRules],
    *,
    scale_up_enabled: bool = True,
    scale_down_enabled: bool = True,
) -> RegionEvaluation:
    """Seed 000's creation and deletion evaluations for each instance type (a new cluster when free
    units fall under the slack or none holds the biggest size; an empty cluster goes when the rest
    still cover the type). A type that needs a
    scale-up removes nothing in the same evaluation."""
    by_type: dict[str, list[ClusterRecord]] = defaultdict(list)
    for c in clusters:
        for itype in c.types:  # a cluster that runs several types counts for each
            by_type[itype].append(c)
    out: list[TypeEvaluation] = []
    for itype in sorted(rules):
        r = rules[itype]
        mine = by_type.get(itype, [])
        up = scale_up_needed(mine, r)
        remove = None
        if scale_down_enabled and not up.needed:
            remove = cluster_to_remove(mine, r)
        if not scale_up_enabled and up.needed:
            up = up.model_copy(update={"needed": False})
        out.append(TypeEvaluation(instance_type=itype, scale_up=up, remove=remove))
    return RegionEvaluation(types=out)
