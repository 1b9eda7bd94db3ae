"""When a region needs a new data-plane cluster for an instance type (seed 000: below the region's
limit, no scale-up under way, and no cluster can hold the biggest size or free units fall under the
slack; with the design notes' reading of its ambiguities)."""

from __future__ import annotations

from collections.abc import Iterable
from enum import Enum

from pydantic import BaseModel

from scaling.fleet.capacity import CapacityTally, TypeRules, tally_capacity
from scaling.fleet.models import ClusterRecord


class ScaleUpReason(str, Enum):
    LIMIT_REACHED = "limit_reached"  # consumed >= limit (limit 0: always)
    SCALE_UP_ONGOING = "scale_up_ongoing"  # a cluster of the type is still coming up
    NO_ROOM_FOR_BIGGEST = "no_room_for_biggest"  # no cluster can hold the biggest size
    FREE_BELOW_SLACK = "free_below_slack"  # free < slack (strictly)
    LIMIT_COVERED = "limit_covered"  # slack short, but capacity covers the limit already
    ENOUGH_CAPACITY = "enough_capacity"


class ScaleUpDecision(BaseModel):
    """Whether to create a cluster for the type, and the rule that decided."""

    needed: bool
    reason: ScaleUpReason
    free_units: int = 0
    total_units: int = 0
    consumed_units: int = 0


def scale_up_decision(tally: CapacityTally, rules: TypeRules) -> ScaleUpDecision:
    """The scale-up rule over a region's tally for one instance type."""

    def decide(needed: bool, reason: ScaleUpReason) -> ScaleUpDecision:
        return ScaleUpDecision(
            needed=needed,
            reason=reason,
            free_units=tally.free_units,
            total_units=tally.total_units,
            consumed_units=tally.consumed_units,
        )

    if rules.limit is not None and tally.consumed_units >= rules.limit:
        return decide(False, ScaleUpReason.LIMIT_REACHED)
    if tally.scale_up_ongoing > 0:
        return decide(False, ScaleUpReason.SCALE_UP_ONGOING)
    if tally.holders_of_biggest == 0:
        return decide(True, ScaleUpReason.NO_ROOM_FOR_BIGGEST)
    if rules.slack > 0 and tally.free_units < rules.slack:
        # A new cluster's capacity could not be used: the region's capacity covers the limit.
        if rules.limit is not None and tally.total_units >= rules.limit:
            return decide(False, ScaleUpReason.LIMIT_COVERED)
        return decide(True, ScaleUpReason.FREE_BELOW_SLACK)
    return decide(False, ScaleUpReason.ENOUGH_CAPACITY)


def scale_up_needed(clusters: Iterable[ClusterRecord], rules: TypeRules) -> ScaleUpDecision:
    """Seed 000's scale-up evaluation for `rules.instance_type` over a region's clusters: a new
    cluster when none can hold the biggest size or free units fall under the slack, unless the
    limit is reached or one is coming up already."""
    return scale_up_decision(tally_capacity(clusters, rules), rules)
