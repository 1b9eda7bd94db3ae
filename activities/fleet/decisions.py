"""The fleet region's decisions as activities (scaling.fleet.decisions): pure, so every worker
registers them, with or without OCM settings; the region's history records their inputs and results."""

from __future__ import annotations

from temporalio import activity

from scaling.fleet import contracts
from scaling.fleet.decisions import PlacementFigures, Placements, RecheckFigures, Rechecks, place, recheck
from scaling.fleet.evaluation import RegionEvaluation, RegionFigures, evaluate


@activity.defn(name=contracts.PLACE_INSTANCES)
async def place_instances(figures: PlacementFigures) -> Placements:
    return place(figures)


@activity.defn(name=contracts.RECHECK_REMOVALS)
async def recheck_removals(figures: RecheckFigures) -> Rechecks:
    return recheck(figures)


@activity.defn(name=contracts.EVALUATE_REGION)
async def evaluate_region(figures: RegionFigures) -> RegionEvaluation:
    return evaluate(figures)


DECISIONS = [place_instances, recheck_removals, evaluate_region]
