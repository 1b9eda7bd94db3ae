"""Fleet what-if over the recorded FleetAutoscaler history (tests/workflows/fleet/histories/
fleet_autoscaler.json: the fleet demo's 12 instances on one standard cluster): unchanged
configuration reproduces the recorded decisions; a changed one gives the decisions of
evaluate_region computed directly on the recorded registry."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import yaml

from scaling.fleet import contracts
from scaling.fleet.capacity import type_rules
from scaling.fleet.config import FleetConfig
from scaling.fleet.evaluation import evaluate_region
from scaling.fleet.models import ClusterPhase
from scaling.fleet.region import ClusterMessage, ClusterMessages
from scaling.fleet.what_if import FleetDecisions, fleet_what_if, recorded_rounds
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
    # Its first round ends at its first wait; the recorded run's registrations and reports before
    # that are the first run's (the next run knows these clusters and registers none).
    wait = next(e for e in raw["events"] if e["eventType"] == "EVENT_TYPE_TIMER_STARTED")
    raw["events"] = [raw["events"][0], wait]
    path = tmp_path / "next_run.json"
    path.write_text(json.dumps(raw))
    first = recorded_rounds(history_from_file(str(path)))[0]
    assert [c.id for c in first.clusters] == ["both", "std", "ent"]
    both = first.clusters[0]
    assert both.manual and {t: u.max_units for t, u in both.types.items()} == {"standard": 4, "developer": 4}


# The fleet demo's FleetAutoscaler history from a CI run where what-if counted a scale-up the loop
# never made (main 474b1ce, tests/e2e/test_fleet_e2e.py, `make test`): its first 724 events, less
# the index shards' traffic (their starts and index_ops signals, which what-if does not read).
# The first cluster's Ready report came in while the loop was still sending a round's signals,
# after that round had evaluated: the next round placed 18 instances on it (answering a create)
# and started the second cluster, and the placements went out after that start.
READY_AFTER_ITS_ROUND = Path(__file__).parent / "histories" / "fleet_autoscaler_ready_after_its_round.json"


def test_a_report_after_the_rounds_evaluation_counts_for_the_next_round() -> None:
    history = history_from_file(str(READY_AFTER_ITS_ROUND))
    report = fleet_what_if(history)
    assert report.total_happened.scale_up == {"standard": 2} and report.difference == {"standard": 0}
    for r in report.rounds:
        assert r.what_if == r.happened, r.round
    rounds = recorded_rounds(history)
    n = next(n for n, r in enumerate(rounds) if any(c.phase == ClusterPhase.READY for c in r.clusters))
    delivered, placed = rounds[n - 1], rounds[n]
    # The round the Ready report was delivered in (after its evaluation task) decided on the
    # cluster waiting for its agent; it was evaluated with the next round's 18 placements when
    # the rounds shared their TypeUnits.
    assert delivered.at == datetime(2026, 11, 26, 11, 8, 18, 813925)  # round 56 of the CI run's report
    assert [(c.phase, c.units("standard").consumed_units) for c in delivered.clusters] == [(ClusterPhase.WAITING, 0)]
    assert delivered.started == []
    # The next round decided on its own placements, sent in one cluster_messages after the start.
    units = [(c.units("standard").consumed_units, c.units("standard").max_units) for c in placed.clusters]
    assert units == [(18, 18)] and placed.started == ["standard"]


def test_a_batched_deprovision_is_a_decision() -> None:
    """Patch batched-outbox: a deprovision mark goes out inside cluster_messages; the round that
    sent it marked that cluster, and the rounds after see it deprovisioning."""
    history = history_from_file(str(READY_AFTER_ITS_ROUND))
    last = history.events[-1]
    cid = recorded_rounds(history)[-1].clusters[0].id
    batch = ClusterMessages(messages=[ClusterMessage(cluster_id=cid, signal=contracts.SIGNAL_DEPROVISION)])
    sent = last.model_copy(
        update={
            "kind": "signal_out",
            "name": contracts.SIGNAL_CLUSTER_MESSAGES,
            "input": [batch.model_dump(mode="json")],
            "workflow_id": contracts.cluster_workflow_id(cid),
        }
    )
    history.events += [sent, last.model_copy(update={"kind": "timer"}), last.model_copy(update={"kind": "timer"})]
    *_, marking, after = recorded_rounds(history)
    assert marking.marked == [cid] and marking.clusters[0].phase == ClusterPhase.READY
    assert after.marked == [] and after.clusters[0].phase == ClusterPhase.DEPROVISIONING


def test_registered_clusters_are_no_scale_ups() -> None:
    """The region starts a registered cluster's workflow too (manual in its input): the cluster
    exists already, so no decision, and the registry holds it as registered (never removed)."""
    history = history_from_file(str(REGISTERED))
    report = fleet_what_if(history)
    assert report.rounds_replayed >= 10
    assert report.total_happened == report.total_what_if == FleetDecisions()
    last = recorded_rounds(history)[-1]
    assert {c.id for c in last.clusters} == {"both", "std", "ent"} and all(c.manual for c in last.clusters)
