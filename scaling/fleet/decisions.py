"""The FleetAutoscaler's recorded decisions: where waiting instances go, which clusters marked for
removal may be deleted, and the region's evaluation (scale up or remove per instance type).

Each runs as an activity (activities/fleet/decisions.py, names in scaling.fleet.contracts): its
input, what the decision read, and its result, what it decided, are in the region's history. A
replay reads the recorded decision, so a change to the rules ships without a patch, and `growth
fleet what-if` runs today's rules on the recorded figures. Not a local activity: the region is
woken by signals all the time, and a local activity's result can reach the workflow in another
activation on replay than it did when it ran (before or with a signal that came in meanwhile),
which took the loop another way (a replay failed so under load); an activity's completion is an
event in the history, ordered with the signals. The figures are bounded
whatever the fleet's size: the evaluation reads per type a tally and a few candidates
(scaling.fleet.evaluation), a placement a batch of the queue and the clusters that could take
one of them (as columns), a re-check the removal facts of the clusters marked.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pydantic import BaseModel, Field

from scaling.fleet.capacity import CapacityTally, TypeRules, cluster_free_units, ready_clusters, scaled, tally_capacity
from scaling.fleet.cluster_table import ClusterTable, from_table, to_table
from scaling.fleet.models import ClusterPhase, ClusterRecord, CompactInstance, ManagedInstance
from scaling.fleet.placement import FirstFit
from scaling.fleet.scale_down import RemovalDecision, RemovalFacts, judge_removal, removal_facts

# Queued instances per placement decision: its record stays far under the 256 KB an event may
# hold (about 70 bytes an instance in, 50 out, 40 a cluster at most max_clusters).
PLACE_BATCH = 500


class PlacementFigures(BaseModel):
    """What one placement reads: the queued instances in order, and the clusters that could take
    one of them (ready, schedulable, under their instance limit, not enterprise, with free units
    of a queued type); the others could take none."""

    rules: dict[str, TypeRules] = Field(default_factory=dict)  # the queued instances' types
    clusters: ClusterTable = Field(default_factory=ClusterTable)
    queue: list[CompactInstance] = Field(default_factory=list)  # at most PLACE_BATCH


class Placements(BaseModel):
    """A placement's outcome: instance id -> cluster id for those placed (the others wait)."""

    placed: dict[str, str] = Field(default_factory=dict)


class Recheck(BaseModel):
    """A cluster marked for removal, due for its second check, and its type's ready clusters."""

    cluster: RemovalFacts
    rules: TypeRules
    others: CapacityTally


class RecheckFigures(BaseModel):
    checks: list[Recheck] = Field(default_factory=list)  # bounded by the registry's clusters marked


class Rechecks(BaseModel):
    decisions: list[RemovalDecision] = Field(default_factory=list)  # one per check, in order


def _open(cluster: ClusterRecord, types: set[str], rules: Mapping[str, TypeRules]) -> bool:
    return (
        cluster.phase == ClusterPhase.READY
        and cluster.schedulable
        and (cluster.instance_limit < 0 or cluster.instances < cluster.instance_limit)
        and any(scaled(cluster, t) and cluster_free_units(cluster, rules[t]) > 0 for t in types)
    )


def placement_figures(
    clusters: Sequence[ClusterRecord], queue: Sequence[ManagedInstance], rules: Mapping[str, TypeRules]
) -> PlacementFigures:
    """The figures for placing `queue` (one batch) on the registry's `clusters`."""
    mine = {i.instance_type: rules[i.instance_type] for i in queue if i.instance_type in rules}
    types = set(mine)
    return PlacementFigures(
        rules=mine, clusters=to_table(c for c in clusters if _open(c, types, mine)), queue=list(queue)
    )


def place(figures: PlacementFigures) -> Placements:
    """First fit, in queue order: each instance on the first cluster with room that never refused it."""
    clusters = list(from_table(figures.clusters).values())
    fit = FirstFit(clusters)
    by_id = {c.id: c for c in clusters}
    placed: dict[str, str] = {}
    for inst in figures.queue:
        rules = figures.rules.get(inst.instance_type)
        cid = fit.place(inst, rules) if rules else None
        if cid is None:
            continue
        rec = by_id[cid]  # counted before the next one: FirstFit reads it
        rec.types[inst.instance_type].consumed_units += inst.units
        rec.instances += 1
        placed[inst.id] = cid
    return Placements(placed=placed)


def recheck_figures(
    marked: Sequence[ClusterRecord], clusters: Sequence[ClusterRecord], rules: Mapping[str, TypeRules]
) -> RecheckFigures:
    """The figures for re-checking `marked` (deprovisioning, with rules for their type)."""
    checks = []
    for rec in marked:
        r = rules[rec.instance_type]
        others = [c for c in ready_clusters(clusters, r.instance_type) if c.id != rec.id]
        checks.append(Recheck(cluster=removal_facts(rec, r), rules=r, others=tally_capacity(others, r)))
    return RecheckFigures(checks=checks)


def recheck(figures: RecheckFigures) -> Rechecks:
    return Rechecks(decisions=[judge_removal(c.cluster, c.others, c.rules, rechecking=True) for c in figures.checks])
