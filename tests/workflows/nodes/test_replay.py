"""Every node workflow type replays a history recorded from a real run (the headless
scale-down demo: dev server, sim, the real worker) on the current code. A change that would
break the runs in flight (a command added, removed or reordered without workflow.patched) fails
here. Re-record after an intended change: see README "Changing a workflow safely".

Histories recorded before a patch are kept in histories/before/<patch id>/: runs that old may
still be open, and they must keep replaying along the patch's old branch."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from temporalio.client import WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer

from tests.workflows.record_history import HISTORIES, NODE_TYPES, node_history_file
from workflows.all import WORKFLOWS

BEFORE_PATCHES = sorted((HISTORIES / "before").glob("*/*.json"))


def load(workflow_type: str) -> WorkflowHistory:
    return load_file(node_history_file(workflow_type))


def load_file(path: Path) -> WorkflowHistory:
    return WorkflowHistory.from_json(path.stem, json.loads(path.read_text()))


async def replay_failure(history: WorkflowHistory) -> Exception | None:
    replayer = Replayer(workflows=WORKFLOWS, data_converter=pydantic_data_converter)
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


@pytest.mark.parametrize("path", BEFORE_PATCHES, ids=lambda p: f"{p.parent.name}/{p.stem}")
async def test_history_recorded_before_a_patch_replays(path: Path) -> None:
    history = load_file(path)
    assert len(history.events) > 10
    failure = await replay_failure(history)
    assert failure is None, f"{path.parent.name}/{path.name}: {failure}"


def test_histories_from_before_bounded_scale_down_take_the_old_branch() -> None:
    """They still fetch the whole cluster (observe_scale_down): the old branch is what replays."""
    names = {
        p.stem: {
            e["activityTaskScheduledEventAttributes"]["activityType"]["name"]
            for e in json.loads(p.read_text())["events"]
            if "activityTaskScheduledEventAttributes" in e
        }
        for p in BEFORE_PATCHES
        if p.parent.name == "bounded-scale-down"
    }
    assert set(names) == {"nodes_NodeAutoscaler", "nodes_NodeScaleDown"}
    assert all("observe_scale_down" in n and "evaluate_scale_down" not in n for n in names.values())
    current = {
        t: {e.activity_task_scheduled_event_attributes.activity_type.name for e in load(t).events}
        for t in ("NodeAutoscaler", "NodeScaleDown")
    }
    assert "evaluate_scale_down" in current["NodeAutoscaler"] and "check_node_removal" in current["NodeScaleDown"]
    assert not any("observe_scale_down" in n for n in current.values())
