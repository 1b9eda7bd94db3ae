"""When an empty data-plane cluster may be removed (seed 000's deletion evaluation: the region's
other clusters must still hold the type's biggest size and its slack).

A cluster is removable only if it is ready, empty, not blocked by an operator, and a dry run of
the scale-up rule over the *remaining ready* clusters of its type says "no scale-up": so a
scale-down never makes the next evaluation scale up again (no flapping).
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import Enum

from pydantic import BaseModel

from scaling.fleet.capacity import (
    CapacityTally,
    TypeRules,
    can_hold_biggest,
    cluster_capacity_units,
    ready_clusters,
    supports,
    tally_capacity,
)
from scaling.fleet.models import ClusterPhase, ClusterRecord
from scaling.fleet.scale_up import ScaleUpReason, scale_up_decision


class RemovalReason(str, Enum):
    REMOVABLE = "removable"
    NOT_READY = "not_ready"
    OTHER_TYPE = "other_type"  # the rules passed are for another instance type
    NOT_DYNAMIC = "not_dynamic"  # registered (manual) or enterprise: dynamic scaling never removes it
    NOT_EMPTY = "not_empty"
    BLOCKED = "blocked"
    WOULD_SCALE_UP = "would_scale_up"  # without it, the region would need a new cluster


class RemovalDecision(BaseModel):
    """Whether a cluster may be removed and why; `dry_run` is the scale-up rule's answer
    without it."""

    cluster_id: str
    removable: bool
    reason: RemovalReason
    dry_run: ScaleUpReason | None = None


class RemovalFacts(BaseModel):
    """What the removal rule reads of one cluster: a recorded decision's input carries these
    instead of the cluster's record (scaling.fleet.decisions)."""

    cluster_id: str
    instance_type: str  # the rules it is judged by
    phase: ClusterPhase
    supports: bool = True  # runs the type
    dynamic: bool = True  # created by growth (removable_kind)
    blocked: bool = False
    empty: bool = True
    max_units: int | None = None  # the agent's figure; among removable clusters the least goes
    capacity_units: int = 0
    holds_biggest: bool = False


def is_empty(cluster: ClusterRecord) -> bool:
    return cluster.instances == 0 and cluster.consumed_units == 0


def removable_kind(cluster: ClusterRecord) -> bool:
    """Only clusters growth created are removed by it: a registered cluster leaves when its
    owner takes it off the list (as upstream's manual clusters), an enterprise one never here."""
    return not cluster.manual and cluster.cluster_type != "enterprise"


def removal_facts(cluster: ClusterRecord, rules: TypeRules) -> RemovalFacts:
    return RemovalFacts(
        cluster_id=cluster.id,
        instance_type=rules.instance_type,
        phase=cluster.phase,
        supports=supports(cluster, rules.instance_type),
        dynamic=removable_kind(cluster),
        blocked=cluster.deletion_blocked,
        empty=is_empty(cluster),
        max_units=cluster.units(rules.instance_type).max_units,
        capacity_units=cluster_capacity_units(cluster, rules),
        holds_biggest=can_hold_biggest(cluster, rules),
    )


def without(ready: CapacityTally, cluster: RemovalFacts) -> CapacityTally:
    """The ready clusters' tally with an empty ready cluster taken out (the dry run's region)."""
    return ready.less(cluster.capacity_units, 0, cluster.holds_biggest, ongoing=False)


def judge_removal(
    cluster: RemovalFacts, others: CapacityTally, rules: TypeRules, *, rechecking: bool = False
) -> RemovalDecision:
    """May the cluster be removed, the region's other ready clusters of its type being `others`?
    `rechecking` is the second check once it is deprovisioning (seed 000: re-check emptiness and
    capacity before deleting), when it is no longer ready."""

    def refused(reason: RemovalReason) -> RemovalDecision:
        return RemovalDecision(cluster_id=cluster.cluster_id, removable=False, reason=reason)

    if not cluster.supports:
        return refused(RemovalReason.OTHER_TYPE)
    if not cluster.dynamic:
        return refused(RemovalReason.NOT_DYNAMIC)
    if cluster.phase != (ClusterPhase.DEPROVISIONING if rechecking else ClusterPhase.READY):
        return refused(RemovalReason.NOT_READY)
    if cluster.blocked:
        return refused(RemovalReason.BLOCKED)
    if not cluster.empty:
        return refused(RemovalReason.NOT_EMPTY)
    dry = scale_up_decision(others, rules)
    return RemovalDecision(
        cluster_id=cluster.cluster_id,
        removable=not dry.needed,
        reason=RemovalReason.WOULD_SCALE_UP if dry.needed else RemovalReason.REMOVABLE,
        dry_run=dry.reason,
    )


def removal_decision(
    cluster: ClusterRecord,
    clusters: Sequence[ClusterRecord],
    rules: TypeRules,
    *,
    rechecking: bool = False,
) -> RemovalDecision:
    """`judge_removal` over a registry: the other clusters are the ready ones of its type."""
    others = [c for c in ready_clusters(clusters, rules.instance_type) if c.id != cluster.id]
    return judge_removal(removal_facts(cluster, rules), tally_capacity(others, rules), rules, rechecking=rechecking)


def removal_candidates(ready: Sequence[ClusterRecord], rules: TypeRules, limit: int) -> list[RemovalFacts]:
    """The ready clusters the scale-down may remove (empty, growth's, not blocked), at most
    `limit`: per max_units the last registered (equal figures decide alike, the rule keeps the
    last), the least max_units first (the rule prefers them, and a bigger cluster's dry run
    takes more capacity out)."""
    by_units: dict[int | None, RemovalFacts] = {}  # None (not reported) counts with the expected units
    for c in ready:
        if c.deletion_blocked or not is_empty(c) or not removable_kind(c):
            continue
        facts = removal_facts(c, rules)
        by_units.pop(facts.max_units, None)
        by_units[facts.max_units] = facts  # moved last: the dict keeps the registry order of the last ones
    order = list(by_units)
    kept = sorted(order, key=lambda units: units or 0)[:limit]
    return [by_units[units] for units in order if units in kept]


def choose_removal(
    ready: CapacityTally, candidates: Sequence[RemovalFacts], rules: TypeRules
) -> RemovalDecision | None:
    """At most one removable cluster of the type per evaluation: the candidate with the least
    max_units (the last registered among equals) whose removal leaves the ready clusters without
    the need of a scale-up. O(n): each dry run takes its candidate out of one tally."""
    best: RemovalFacts | None = None
    for c in candidates:
        if scale_up_decision(without(ready, c), rules).needed:
            continue
        if best is None or (c.max_units or 0) <= (best.max_units or 0):
            best = c
    return None if best is None else judge_removal(best, without(ready, best), rules)


def cluster_to_remove(clusters: Sequence[ClusterRecord], rules: TypeRules) -> RemovalDecision | None:
    """`choose_removal` over a registry's ready clusters of the type."""
    ready = ready_clusters(clusters, rules.instance_type)
    return choose_removal(tally_capacity(ready, rules), removal_candidates(ready, rules, len(ready)), rules)
