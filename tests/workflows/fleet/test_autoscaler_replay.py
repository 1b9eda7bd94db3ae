"""The committed FleetAutoscaler history (the fleet demo's, recorded for the what-if tests) still
replays: re-record with tests.workflows.fleet.record_history --autoscaler-from-db after an
intended change."""

from __future__ import annotations

import json

from temporalio.client import WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer

from tests.workflows.fleet.record_history import AUTOSCALER_HISTORY
from workflows.fleet.autoscaler import FleetAutoscalerWorkflow


async def test_recorded_fleet_autoscaler_replays() -> None:
    history = WorkflowHistory.from_json("fleet-autoscaler", json.loads(AUTOSCALER_HISTORY.read_text()))
    replayer = Replayer(workflows=[FleetAutoscalerWorkflow], data_converter=pydantic_data_converter)
    await replayer.replay_workflow(history)
