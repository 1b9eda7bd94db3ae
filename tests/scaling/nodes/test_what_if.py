"""What-if replay over the recorded NodeAutoscaler history (tests/workflows/histories/
nodes_NodeAutoscaler.json: the burst demo's 40 pods): unchanged inputs reproduce what the loop
started, and changed inputs give the figures of a plan computed directly with the planner."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from scaling.nodes.catalogue import catalogue_index
from scaling.nodes.nodegroups import parse_node_groups_yaml
from scaling.nodes.scale_up.planning import plan_demand
from scaling.nodes.what_if import RecordedLoop, plan_loop, recorded_loops, what_if
from starters.history import history_from_file
from tests.cli import growth

HISTORY = Path(__file__).parents[2] / "workflows" / "histories" / "nodes_NodeAutoscaler.json"

# The demo's group with only its second tier (cx32, cpx31): what a cheaper-first pool's loss costs.
CX32_ONLY = """
apiVersion: growth.autoscaling.dev/v1alpha1
kind: NodeGroupWithPriority
metadata: {name: general}
spec:
  labels: {growth.autoscaling.dev/demo: "true"}
  maxNodes: 50
  pools:
    - {provider: kwok, serverType: [cx32, cpx31], priority: 50}
"""


@pytest.fixture(scope="module")
def history():  # noqa: ANN201
    return history_from_file(str(HISTORY))


def first_burst(loops: list[RecordedLoop]) -> RecordedLoop:
    """The loop that saw the 40 pods first, with nothing in flight: a plan from scratch."""
    return next(loop for loop in loops if loop.observation.demand.unschedulable and not loop.in_flight)


def test_unchanged_inputs_start_what_the_loop_started(history) -> None:  # noqa: ANN001
    report = what_if(history)
    assert report.total_recorded.nodes >= 10  # the recording scaled up (else this test proves nothing)
    assert sum(1 for loop in report.loops if loop.recorded.nodes) >= 2  # more than one loop started nodes
    for loop in report.loops:
        assert loop.what_if.choices == loop.recorded.choices, loop.loop
        assert loop.difference.nodes == 0 and loop.difference.server_types == {}
    assert report.total_what_if.cost_per_hour == report.total_recorded.cost_per_hour > 0
    assert report.difference.nodes == 0


def test_loops_that_planned_read_their_recorded_decision(history) -> None:  # noqa: ANN001
    """The loops that planned recorded plan_scale_up (input and decision); unchanged, today's
    planner on that input decides what was recorded, whatever the history says of the state."""
    loops = recorded_loops(history)
    deciding = [loop for loop in loops if loop.decision is not None]
    assert any(loop.started for loop in deciding) and len(deciding) < len(loops)  # idle loops record none
    for loop in deciding:
        assert loop.decision is not None and loop.decision.input is not None
        recorded, _ = loop.decision.planned()
        planned, _ = plan_loop(loop, None, loop.settings)
        assert planned == recorded
        # Had the rebuilt state been wrong, the input still is what the planner saw.
        assert plan_loop(loop.model_copy(update={"in_flight": []}), None, loop.settings)[0] == recorded


def test_a_node_cap_gives_the_direct_plans_figures(history) -> None:  # noqa: ANN001
    loops = recorded_loops(history)
    loop = first_burst(loops)
    direct = plan_demand(
        loop.observation.demand, loop.observation.groups, catalogue_index(loop.catalogue), [], max_nodes_total=10
    )
    prices = catalogue_index(loop.catalogue)
    report = what_if(history, settings_changes={"max_nodes_total": 10})
    replayed = report.loops[loops.index(loop)]
    assert replayed.what_if.nodes == len(direct.new_nodes) == 10
    want = Counter(n.candidates[0].server_type for n in direct.new_nodes)
    assert {c.server_type: c.count for c in replayed.what_if.choices} == dict(want)
    assert replayed.what_if.cost_per_hour == pytest.approx(
        sum(prices[("kwok", t)].price_hourly * n for t, n in want.items())
    )
    placed = sum(sum(n.pods.values()) for n in direct.new_nodes)
    assert replayed.what_if.pods_pending == loop.observation.demand.unschedulable - placed > 0
    assert replayed.difference.nodes == 10 - replayed.recorded.nodes < 0
    assert report.total_what_if.nodes < report.total_recorded.nodes


def test_changed_groups_give_the_direct_plans_types(history) -> None:  # noqa: ANN001
    groups, problems = parse_node_groups_yaml(CX32_ONLY, {"kwok"})
    assert not problems
    loops = recorded_loops(history)
    loop = first_burst(loops)
    direct = plan_demand(loop.observation.demand, groups, catalogue_index(loop.catalogue), [])
    report = what_if(history, groups)
    replayed = report.loops[loops.index(loop)]
    assert replayed.what_if.nodes == len(direct.new_nodes) > 0
    assert {c.server_type for c in replayed.what_if.choices} <= {"cx32", "cpx31"}
    assert "kwok/cx22" in report.difference.server_types and report.difference.server_types["kwok/cx22"] < 0
    assert replayed.what_if.pods_pending == 0


async def test_the_command_prints_json_and_refuses_bad_input(tmp_path: Path) -> None:
    out = await growth("nodes", "what-if", "--history", str(HISTORY), "--max-nodes-total", "10", "-o", "json")
    report = json.loads(out.stdout)
    assert (
        report["total_what_if"]["nodes"]
        == what_if(history_from_file(str(HISTORY)), None, {"max_nodes_total": 10}).total_what_if.nodes
    )
    assert report["difference"]["nodes"] < 0
    table = (await growth("nodes", "what-if", "--history", str(HISTORY))).stdout
    assert "difference:     +0 node(s)" in table
    bad = tmp_path / "groups.yaml"
    bad.write_text(CX32_ONLY.replace("priority: 50", "priority: high"))
    refused = await growth("nodes", "what-if", "--history", str(HISTORY), "--node-groups", str(bad), expect=2)
    assert "priority" in refused.stderr
    settings = tmp_path / "planning.yaml"
    settings.write_text("max_nodes_totl: 3\n")
    refused = await growth("nodes", "what-if", "--history", str(HISTORY), "--settings", str(settings), expect=2)
    assert "max_nodes_totl: not an AutoscalerSettings field" in refused.stderr
    missing = await growth("nodes", "what-if", "--history", str(tmp_path / "nope.json"), expect=1)
    assert "nope.json" in missing.stderr
