"""Every node workflow type replays a history recorded from a real run (the headless
scale-down demo: dev server, sim, the real worker) on the current code. A change that would
break the runs in flight (a command added, removed or reordered without workflow.patched) fails
here. Re-record after an intended change: see README "Changing a workflow safely".

Histories recorded before a patch are kept in histories/before/<patch id>/: runs that old may
still be open, and they must keep replaying along the patch's old branch."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
from temporalio.client import WorkflowHistory

from tests.workflows.record_history import HISTORIES, NODE_TYPES, node_history_file
from tests.workflows.replayer import new_replayer
from workflows.all import WORKFLOWS

BEFORE_PATCHES = sorted((HISTORIES / "before").glob("*/*.json"))


def load(workflow_type: str) -> WorkflowHistory:
    return load_file(node_history_file(workflow_type))


def load_file(path: Path) -> WorkflowHistory:
    return WorkflowHistory.from_json(path.stem, json.loads(path.read_text()))


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
        if p.parent.name in ("bounded-scale-down", "bounded-removal-check")
    }
    assert set(names) == {"nodes_NodeAutoscaler", "nodes_NodeScaleDown"}
    assert all("observe_scale_down" in n and "evaluate_scale_down" not in n for n in names.values())
    current = {
        t: {e.activity_task_scheduled_event_attributes.activity_type.name for e in load(t).events}
        for t in ("NodeAutoscaler", "NodeScaleDown")
    }
    assert "evaluate_scale_down" in current["NodeAutoscaler"] and "check_node_removal" in current["NodeScaleDown"]
    assert not any("observe_scale_down" in n for n in current.values())


def test_the_history_from_before_orphans_beside_cluster_takes_the_old_branch() -> None:
    """It brought every node and machine into the history (observe_orphans); the current
    recording finds the orphans beside the cluster."""
    path = HISTORIES / "before" / "orphans-beside-cluster" / "nodes_NodeAutoscaler.json"
    old = {
        e["activityTaskScheduledEventAttributes"]["activityType"]["name"]
        for e in json.loads(path.read_text())["events"]
        if "activityTaskScheduledEventAttributes" in e
    }
    assert "observe_orphans" in old and "find_orphans" not in old
    current = {e.activity_task_scheduled_event_attributes.activity_type.name for e in load("NodeAutoscaler").events}
    assert "find_orphans" in current and "observe_orphans" not in current


def patches_in(events: list[dict]) -> set[str]:
    out = set()
    for e in events:
        marker = e.get("markerRecordedEventAttributes")
        if marker and marker.get("markerName") == "core_patch":
            for payload in marker["details"]["patch-data"]["payloads"]:
                out.add(json.loads(base64.b64decode(payload["data"]))["id"])
    return out


@pytest.mark.parametrize("path", BEFORE_PATCHES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_a_history_kept_for_a_patch_predates_it_and_the_current_one_has_it(path: Path) -> None:
    """before/<patch id>/ holds runs recorded without that patch; the current recording of the
    same type went through it (so both branches of the patch are replayed), or, for a patch
    whose new branch a later patch replaced, a history kept for that later patch did."""
    old = json.loads(path.read_text())["events"]
    assert path.parent.name not in patches_in(old)
    later = [p for p in BEFORE_PATCHES if p.name == path.name and p != path]
    recordings = [HISTORIES / path.name, *later]  # the current recording has the same file name
    assert any(path.parent.name in patches_in(json.loads(r.read_text())["events"]) for r in recordings)
