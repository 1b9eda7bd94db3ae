"""One evaluation of a region: per instance type, scale up, remove one empty cluster, or
nothing. What the FleetAutoscaler decides every interval (recorded: scaling.fleet.decisions),
and what bench/fleet_eval.py times.

The rules read per type a few figures of the registry (`RegionFigures`), not the registry: its
capacity tally, its ready clusters' tally and the few clusters a scale-down may remove. So what
a round's decision read is small enough to record beside what it decided, at any fleet size."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence

from pydantic import BaseModel, Field

from scaling.fleet.capacity import CapacityTally, TypeRules, ready_clusters, tally_capacity
from scaling.fleet.models import ClusterRecord
from scaling.fleet.scale_down import RemovalDecision, RemovalFacts, choose_removal, removal_candidates
from scaling.fleet.scale_up import ScaleUpDecision, scale_up_decision

# Removal candidates kept per type: one per distinct max_units, the least first. Past the first
# few, a candidate whose dry run passes is one with more units than one whose dry run failed,
# which cannot happen (more units out of the tally never passes where fewer failed).
MAX_CANDIDATES = 16


class TypeFigures(BaseModel):
    """What the rules read for one instance type."""

    rules: TypeRules
    tally: CapacityTally  # every cluster of the type that gives capacity
    ready: CapacityTally  # the ready ones: a scale-down's dry run takes its candidate out of these
    candidates: list[RemovalFacts] = Field(default_factory=list)  # at most MAX_CANDIDATES


class RegionFigures(BaseModel):
    """What one evaluation of a region reads: bounded by the instance types it supports."""

    types: list[TypeFigures] = Field(default_factory=list)  # sorted by instance type
    scale_up_enabled: bool = True
    scale_down_enabled: bool = True


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


def region_figures(
    clusters: Sequence[ClusterRecord],
    rules: Mapping[str, TypeRules],
    *,
    scale_up_enabled: bool = True,
    scale_down_enabled: bool = True,
) -> RegionFigures:
    """The registry's figures per instance type (a cluster that runs several types counts for each)."""
    by_type: dict[str, list[ClusterRecord]] = defaultdict(list)
    for c in clusters:
        for itype in c.types:
            by_type[itype].append(c)
    out: list[TypeFigures] = []
    for itype in sorted(rules):
        r, mine = rules[itype], by_type.get(itype, [])
        ready = ready_clusters(mine, itype)
        out.append(
            TypeFigures(
                rules=r,
                tally=tally_capacity(mine, r),
                ready=tally_capacity(ready, r),
                candidates=removal_candidates(ready, r, MAX_CANDIDATES),
            )
        )
    return RegionFigures(types=out, scale_up_enabled=scale_up_enabled, scale_down_enabled=scale_down_enabled)


def evaluate(figures: RegionFigures) -> RegionEvaluation:
    """Seed 000's creation and deletion evaluations for each instance type (a new cluster when free
    units fall under the slack or none holds the biggest size; an empty cluster goes when the rest
    still cover the type). A type that needs a scale-up removes nothing in the same evaluation."""
    out: list[TypeEvaluation] = []
    for t in figures.types:
        up = scale_up_decision(t.tally, t.rules)
        remove = None
        if figures.scale_down_enabled and not up.needed:
            remove = choose_removal(t.ready, t.candidates, t.rules)
        if not figures.scale_up_enabled and up.needed:
            up = up.model_copy(update={"needed": False})
        out.append(TypeEvaluation(instance_type=t.rules.instance_type, scale_up=up, remove=remove))
    return RegionEvaluation(types=out)


def evaluate_region(
    clusters: Sequence[ClusterRecord],
    rules: Mapping[str, TypeRules],
    *,
    scale_up_enabled: bool = True,
    scale_down_enabled: bool = True,
) -> RegionEvaluation:
    """`evaluate` over a registry."""
    return evaluate(
        region_figures(clusters, rules, scale_up_enabled=scale_up_enabled, scale_down_enabled=scale_down_enabled)
    )
