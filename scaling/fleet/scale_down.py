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

from scaling.fleet.capacity import TypeRules, ready_clusters, supports, tally_capacity
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


def is_empty(cluster: ClusterRecord) -> bool:
    return cluster.instances == 0 and cluster.consumed_units == 0


def removable_kind(cluster: ClusterRecord) -> bool:
    """Only clusters growth created are removed by it: a registered cluster leaves when its
    owner takes it off the list (as upstream's manual clusters), an enterprise one never here."""
    return not cluster.manual and cluster.cluster_type != "enterprise"


def removal_decision(
    cluster: ClusterRecord,
    clusters: Sequence[ClusterRecord],
    rules: TypeRules,
    *,
    rechecking: bool = False,
) -> RemovalDecision:
    """May `cluster` be removed? `rechecking` is the second check once it is deprovisioning
    (seed 000: re-check emptiness and capacity before deleting), when it is no longer ready."""
    if not supports(cluster, rules.instance_type):
        return RemovalDecision(cluster_id=cluster.id, removable=False, reason=RemovalReason.OTHER_TYPE)
    if not removable_kind(cluster):
        return RemovalDecision(cluster_id=cluster.id, removable=False, reason=RemovalReason.NOT_DYNAMIC)
    expected_phase = ClusterPhase.DEPROVISIONING if rechecking else ClusterPhase.READY
    if cluster.phase != expected_phase:
        return RemovalDecision(cluster_id=cluster.id, removable=False, reason=RemovalReason.NOT_READY)
    if cluster.deletion_blocked:
        return RemovalDecision(cluster_id=cluster.id, removable=False, reason=RemovalReason.BLOCKED)
    if not is_empty(cluster):
        return RemovalDecision(cluster_id=cluster.id, removable=False, reason=RemovalReason.NOT_EMPTY)
    others = [c for c in ready_clusters(clusters, rules.instance_type) if c.id != cluster.id]
    dry = scale_up_decision(tally_capacity(others, rules), rules)
    return RemovalDecision(
        cluster_id=cluster.id,
        removable=not dry.needed,
        reason=RemovalReason.WOULD_SCALE_UP if dry.needed else RemovalReason.REMOVABLE,
        dry_run=dry.reason,
    )


def cluster_to_remove(clusters: Sequence[ClusterRecord], rules: TypeRules) -> RemovalDecision | None:
    """At most one removable cluster of the type per evaluation: the empty ready one with the
    least capacity (the last one registered among equals). O(n): the dry run takes each
    candidate out of one tally of the ready clusters."""
    ready = ready_clusters(clusters, rules.instance_type)
    tally = tally_capacity(ready, rules)
    best: ClusterRecord | None = None
    for c in ready:
        if c.deletion_blocked or not is_empty(c) or not removable_kind(c):
            continue
        if scale_up_decision(tally.without(c, rules), rules).needed:
            continue
        if best is None or (c.units(rules.instance_type).max_units or 0) <= (
            best.units(rules.instance_type).max_units or 0
        ):
            best = c
    if best is None:
        return None
    return removal_decision(best, clusters, rules)
