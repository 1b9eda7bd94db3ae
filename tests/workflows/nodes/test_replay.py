"""Every node workflow type replays histories recorded from real runs (the headless scale-down
demo: dev server, sim, the real worker) on the current code. A change that would break the runs
in flight (a command added, removed or reordered without workflow.patched) fails here.
Re-record after an intended change: see docs/development.md, "Changing a workflow safely".

A worker release replays the runs the release before it started, and no older ones
(docs/development.md, "How a patch retires"): histories/ holds the recordings of release 0.2.0,
the first whose loops record their decisions; those of 0.1.0, which planned in the workflow,
retired with that branch."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
from temporalio.client import WorkflowHistory

from scaling.nodes import contracts
from tests.workflows.record_history import HISTORIES, NODE_TYPES, node_history_file
from tests.workflows.replayer import committed, new_replayer
from workflows.all import WORKFLOWS
from workflows.nodes.autoscaler import DECISIONS_RECORDED

# Every node history kept.
KEPT = sorted(HISTORIES.glob("node*.json"))


def load(workflow_type: str) -> WorkflowHistory:
    return committed(node_history_file(workflow_type))


async def replay_failure(history: WorkflowHistory) -> Exception | None:
    replayer = new_replayer(WORKFLOWS)
    result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
    return result.replay_failure


@pytest.mark.parametrize("workflow_type", NODE_TYPES)
async def test_recorded_history_replays(workflow_type: str) -> None:
    history = load(workflow_type)
    started = history.events[0].workflow_execution_started_event_attributes
    assert started.workflow_type.name == workflow_type
    # A history of just the start would replay against anything.
    assert len(history.events) > 10
    failure = await replay_failure(history)
    assert failure is None, f"{workflow_type}: {failure}"


@pytest.mark.parametrize("path", KEPT, ids=lambda p: f"{p.parent.name}/{p.stem}")
async def test_every_kept_history_replays(path: Path) -> None:
    history = committed(path)
    assert len(history.events) > 10
    failure = await replay_failure(history)
    assert failure is None, f"{path.parent.name}/{path.name}: {failure}"


def test_every_node_workflow_type_is_kept() -> None:
    types = {
        json.loads(p.read_text())["events"][0]["workflowExecutionStartedEventAttributes"]["workflowType"]["name"]
        for p in KEPT
    }
    assert types == set(NODE_TYPES)


def patches_in(events: list[dict]) -> set[str]:
    out = set()
    for e in events:
        marker = e.get("markerRecordedEventAttributes")
        if marker and marker.get("markerName") == "core_patch":
            for payload in marker["details"]["patch-data"]["payloads"]:
                out.add(json.loads(base64.b64decode(payload["data"]))["id"])
    return out


def local_activities_in(events: list[dict]) -> list[str]:
    out = []
    for e in events:
        marker = e.get("markerRecordedEventAttributes")
        if marker and marker.get("markerName") == "core_local_activity":
            data = marker["details"]["data"]["payloads"][0]["data"]
            out.append(json.loads(base64.b64decode(data))["activity_type"])
    return out


def test_the_kept_loop_recorded_its_decisions() -> None:
    """0.2.0's loop asked for decisions-recorded (a marker this code only deprecates) and
    recorded a plan_scale_up marker per loop that planned: its replay reads those decisions."""
    events = json.loads(node_history_file("NodeAutoscaler").read_text())["events"]
    assert DECISIONS_RECORDED in patches_in(events)
    assert contracts.PLAN_SCALE_UP in local_activities_in(events)
