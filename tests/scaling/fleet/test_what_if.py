"""Fleet what-if over the recorded evaluations of a FleetAutoscaler (tests/workflows/histories/
0.2.0/fleet_FleetAutoscaler_scaling.json: an empty region starts a cluster, 6 instances of 2 units
fill it and start a second one, all are deleted and one empty cluster goes): the recorded
configuration decides what the region decided; a changed one decides by today's rules on the
recorded figures. A history from 0.1.0 recorded no evaluation."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from scaling.fleet.config import FleetConfig
from scaling.fleet.region import FleetAutoscalerInput
from scaling.fleet.what_if import fleet_what_if, recorded_evaluations
from scaling.history import first_input
from starters.history import history_from_file
from tests.cli import growth

HISTORIES = Path(__file__).parents[2] / "workflows" / "histories"
HISTORY = HISTORIES / "0.2.0" / "fleet_FleetAutoscaler_scaling.json"


def recorded_config() -> FleetConfig:
    started = next(e for e in history_from_file(str(HISTORY)).events if e.kind == "started")
    return FleetAutoscalerInput.model_validate(first_input(started)).config


def changed(config: FleetConfig, **type_limits) -> FleetConfig:  # noqa: ANN003
    """The recorded configuration with the standard type's region limits changed."""
    raw = config.model_dump(mode="json", by_alias=True)
    raw["supported_providers"][0]["regions"][0]["supported_instance_type"]["standard"].update(type_limits)
    return FleetConfig.model_validate(raw)


def test_the_recorded_configuration_decides_what_the_region_decided() -> None:
    report = fleet_what_if(history_from_file(str(HISTORY)))
    assert report.total_happened.scale_up == {"standard": 2} and len(report.total_happened.removals) == 1
    for r in report.rounds:
        assert r.what_if == r.happened, r.round
    assert report.difference == {"standard": 0} and report.notes == []


def test_more_slack_wants_a_cluster_where_the_recorded_figures_fall_short_of_it() -> None:
    history = history_from_file(str(HISTORY))
    report = fleet_what_if(history, changed(recorded_config(), min_available_capacity_slack_streaming_units=15))
    # Once both clusters reported 10 units each, 20 free is more than a slack of 15: no more wanted,
    # and an empty cluster's removal would leave 10 < 15: never removed.
    assert report.total_what_if.removals == []
    short = [r for r in report.rounds if r.what_if.scale_up and not r.happened.scale_up]
    assert short and all(
        int(r.units["standard"].split("/")[1]) - int(r.units["standard"].split("/")[0]) < 15 for r in short
    )
    assert report.difference["standard"] >= len(short)  # once per evaluation (decisions, not clusters)
    # A limit that is already reached: never a cluster.
    capped = fleet_what_if(history, changed(recorded_config(), limit=0))
    assert capped.total_what_if.scale_up == {} and capped.difference == {"standard": -2}


def test_every_recorded_evaluation_carries_what_it_read() -> None:
    evaluations = recorded_evaluations(history_from_file(str(HISTORY)))
    assert evaluations and all(e.provider == "aws" and e.region == "us-east-1" for e in evaluations)
    first = evaluations[0]
    assert [t.rules.instance_type for t in first.figures.types] == ["standard"]
    assert first.figures.types[0].tally.total_units == 0 and first.evaluation.scale_up_types() == ["standard"]


def test_a_run_from_0_1_0_recorded_no_evaluation() -> None:
    report = fleet_what_if(history_from_file(str(HISTORIES / "0.1.0" / "fleet_FleetAutoscaler_scaling.json")))
    assert report.rounds_replayed == 0 and "0.2.0" in report.notes[0]


async def test_the_command_reads_a_fleet_config_file(tmp_path: Path) -> None:
    path = tmp_path / "fleet.yaml"
    path.write_text(yaml.safe_dump(changed(recorded_config(), limit=0).model_dump(mode="json", by_alias=True)))
    out = await growth("fleet", "what-if", "--history", str(HISTORY), "--fleet-config", str(path), "-o", "json")
    assert json.loads(out.stdout)["difference"] == {"standard": -2}
    path.write_text("supported_providers: 3\n")
    refused = await growth("fleet", "what-if", "--history", str(HISTORY), "--fleet-config", str(path), expect=2)
    assert "supported_providers" in refused.stderr
