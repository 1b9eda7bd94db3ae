"""The committed FleetAutoscaler history (the fleet demo's, recorded for the what-if tests) still
replays: re-record with tests.workflows.fleet.record_history --autoscaler-from-db after an
intended change."""

from __future__ import annotations

import json

from temporalio.client import WorkflowHistory

from tests.workflows.fleet.record_history import AUTOSCALER_HISTORY
from tests.workflows.replayer import new_replayer
from workflows.fleet.autoscaler import FleetAutoscalerWorkflow


async def test_recorded_fleet_autoscaler_replays() -> None:
    history = WorkflowHistory.from_json("fleet-autoscaler", json.loads(AUTOSCALER_HISTORY.read_text()))
    replayer = new_replayer([FleetAutoscalerWorkflow])
    await replayer.replay_workflow(history)
