"""Every node workflow type replays a history recorded from a real run (the headless
scale-down demo: dev server, sim, the real worker) on the current code. A change that would
break the runs in flight (a command added, removed or reordered without workflow.patched) fails
here. Re-record after an intended change: see README "Changing a workflow safely"."""

from __future__ import annotations

import json

import pytest
from temporalio.client import WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer

from tests.workflows.record_history import NODE_TYPES, node_history_file
from workflows.all import WORKFLOWS


def load(workflow_type: str) -> WorkflowHistory:
    path = node_history_file(workflow_type)
    data = json.loads(path.read_text())
    return WorkflowHistory.from_json(path.stem, data)


@pytest.mark.parametrize("workflow_type", NODE_TYPES)
async def test_recorded_history_replays(workflow_type: str) -> None:
    history = load(workflow_type)
    started = history.events[0].workflow_execution_started_event_attributes
    assert started.workflow_type.name == workflow_type
    # A history of just the start would replay against anything.
    assert len(history.events) > 10
    replayer = Replayer(workflows=WORKFLOWS, data_converter=pydantic_data_converter)
    result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
    assert result.replay_failure is None, f"{workflow_type}: {result.replay_failure}"
