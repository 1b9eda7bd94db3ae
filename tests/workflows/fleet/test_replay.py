"""Every kept fleet history replays on the current code (tests/workflows/histories/<release>/
fleet_*.json): runs started by 0.1.0, which decided in workflow code, and runs of 0.2.0, whose
decisions are recorded activities. Record them again after an intended change (release
policy: docs/development.md) with

    .venv/bin/python -m tests.workflows.fleet.record_region_history [OUT.json] # registered clusters
    .venv/bin/python -m tests.workflows.fleet.record_scaling_history OUT.json  # scale up, place, scale down
    .venv/bin/python -m tests.workflows.fleet.record_history                   # a DataPlaneCluster's lifecycle
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scaling.fleet import contracts
from tests.workflows.release_histories import HISTORIES, kept, patches, replays, scheduled
from workflows.fleet.autoscaler import DECISIONS_RECORDED

FLEET = kept("fleet_*.json")


@pytest.mark.parametrize("path", FLEET, ids=lambda p: str(p.relative_to(HISTORIES)))
async def test_kept_history_replays(path: Path) -> None:
    await replays(path)


def test_each_release_keeps_a_history_of_each_fleet_workflow() -> None:
    for release in ("0.1.0", "0.2.0"):
        names = {p.name for p in FLEET if p.parent.name == release}
        assert {"fleet_DataPlaneCluster.json", "fleet_InstanceIndex.json"} <= names, release
        assert {"fleet_FleetAutoscaler_registered.json", "fleet_FleetAutoscaler_scaling.json"} <= names, release


@pytest.mark.parametrize("case", ["registered", "scaling"])
def test_0_1_0_regions_decided_in_workflow_code_and_0_2_0_ones_recorded_their_decisions(case: str) -> None:
    old = HISTORIES / "0.1.0" / f"fleet_FleetAutoscaler_{case}.json"
    new = HISTORIES / "0.2.0" / f"fleet_FleetAutoscaler_{case}.json"
    assert DECISIONS_RECORDED not in patches(old)
    assert not set(scheduled(old)) & contracts.DECISION_NAMES
    assert DECISIONS_RECORDED in patches(new)
    assert contracts.EVALUATE_REGION in scheduled(new)


def test_the_0_2_0_scaling_region_recorded_each_kind_of_decision() -> None:
    made = set(scheduled(HISTORIES / "0.2.0" / "fleet_FleetAutoscaler_scaling.json"))
    assert made == contracts.DECISION_NAMES


def test_an_idle_round_records_no_decision() -> None:
    """The registered region idles for most of its run: its evaluation is asked again only when the
    registry's figures changed, so most rounds (each ends in a timer) record none."""
    path = HISTORIES / "0.2.0" / "fleet_FleetAutoscaler_registered.json"
    events = json.loads(path.read_text())["events"]
    rounds = sum(e["eventType"] == "EVENT_TYPE_TIMER_STARTED" for e in events)
    evaluations = scheduled(path).count(contracts.EVALUATE_REGION)
    assert rounds >= 20 and evaluations < rounds / 2
