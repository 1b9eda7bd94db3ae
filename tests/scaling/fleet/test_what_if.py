"""Fleet what-if over the recorded FleetAutoscaler history (tests/workflows/fleet/histories/
fleet_autoscaler.json: the fleet demo's 12 instances on one standard cluster): unchanged
configuration reproduces the recorded decisions; a changed one gives the decisions of
evaluate_region computed directly on the recorded registry."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from scaling.fleet.capacity import type_rules
from scaling.fleet.config import FleetConfig
from scaling.fleet.evaluation import evaluate_region
from scaling.fleet.what_if import fleet_what_if, recorded_rounds
from starters.history import history_from_file
from tests.cli import growth

HISTORY = Path(__file__).parents[2] / "workflows" / "fleet" / "histories" / "fleet_autoscaler.json"
REGISTERED = HISTORY.with_name("fleet_autoscaler_registered.json")


def changed(config: FleetConfig, **type_limits) -> FleetConfig:  # noqa: ANN003
    """The recorded configuration with the standard type's region limits changed."""
    raw = config.model_dump(mode="json", by_alias=True)
    raw["supported_providers"][0]["regions"][0]["supported_instance_type"]["standard"].update(type_limits)
    return FleetConfig.model_validate(raw)


def test_unchanged_configuration_decides_what_the_loop_did() -> None:
    history = history_from_file(str(HISTORY))
    report = fleet_what_if(history)
    assert report.rounds_replayed >= 10 and report.total_happened.scale_up == {"standard": 1}
    for r in report.rounds:
        assert r.what_if == r.happened, r.round
    assert report.difference == {"standard": 0}


def test_more_slack_wants_a_second_cluster_once_the_first_is_ready() -> None:
    history = history_from_file(str(HISTORY))
    rounds = recorded_rounds(history)
    config = changed(rounds[0].config, min_available_capacity_slack_streaming_units=20)
    report = fleet_what_if(history, config)
    ready = [
        r for r in rounds if any(c.units(c.instance_type).max_units for c in r.clusters)
    ]  # the agent reported 18 units
    assert ready
    rules = type_rules(config, ready[0].provider, ready[0].region)
    direct = evaluate_region(ready[0].clusters, rules)
    assert direct.scale_up_types() == ["standard"]  # 18 free < a slack of 20
    replayed = next(r for r in report.rounds if r.at == ready[0].at)
    assert replayed.what_if.scale_up == {"standard": 1} and replayed.happened.scale_up == {}
    assert replayed.units == {"standard": "0/18"}
    assert report.difference["standard"] >= len(ready)  # once per round (decisions, not clusters)
    # A limit that is already reached: never a cluster.
    capped = fleet_what_if(history, changed(rounds[0].config, limit=0))
    assert capped.total_what_if.scale_up == {} and capped.difference == {"standard": -1}


async def test_the_command_reads_a_fleet_config_file(tmp_path: Path) -> None:
    config = changed(recorded_rounds(history_from_file(str(HISTORY)))[0].config, limit=0)
    path = tmp_path / "fleet.yaml"
    path.write_text(yaml.safe_dump(config.model_dump(mode="json", by_alias=True)))
    out = await growth("fleet", "what-if", "--history", str(HISTORY), "--fleet-config", str(path), "-o", "json")
    assert json.loads(out.stdout)["difference"] == {"standard": -1}
    path.write_text("supported_providers: 3\n")
    refused = await growth("fleet", "what-if", "--history", str(HISTORY), "--fleet-config", str(path), expect=2)
    assert "supported_providers" in refused.stderr


def test_a_run_that_starts_with_the_registry_as_columns_is_read(tmp_path: Path) -> None:
    """Patch compact-registry: a continued run's input holds the registry as columns. The recorded
    region run ends in continue-as-new; its next run starts with that input."""
    raw = json.loads(REGISTERED.read_text())
    carried = raw["events"][-1]["workflowExecutionContinuedAsNewEventAttributes"]["input"]
    raw["events"][0]["workflowExecutionStartedEventAttributes"]["input"] = carried
    path = tmp_path / "next_run.json"
    path.write_text(json.dumps(raw))
    first = recorded_rounds(history_from_file(str(path)))[0]
    assert [c.id for c in first.clusters] == ["both", "std", "ent"]
    both = first.clusters[0]
    assert both.manual and {t: u.max_units for t, u in both.types.items()} == {"standard": 4, "developer": 4}
