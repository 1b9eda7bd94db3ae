"""The region's settings keep reading inputs from before `interval_s` was renamed
`scan_interval_s` (recorded histories, regions running across the upgrade)."""

from __future__ import annotations

import base64
import json
from pathlib import Path

from scaling.fleet.region import FleetAutoscalerInput, FleetAutoscalerSettings

HISTORY = Path(__file__).parents[2] / "workflows" / "fleet" / "histories" / "fleet_autoscaler.json"


def test_the_old_name_sets_the_scan_interval() -> None:
    old = FleetAutoscalerSettings.model_validate({"provider": "aws", "region": "r", "interval_s": 5})
    assert old.scan_interval_s == 5.0
    new = FleetAutoscalerSettings(provider="aws", region="r", scan_interval_s=4)
    assert new.scan_interval_s == 4.0 and new.model_dump()["scan_interval_s"] == 4.0


def test_a_recorded_input_keeps_its_interval() -> None:
    started = json.loads(HISTORY.read_text())["events"][0]["workflowExecutionStartedEventAttributes"]
    raw = json.loads(base64.b64decode(started["input"]["payloads"][0]["data"]))
    assert "interval_s" in raw["settings"] and "scan_interval_s" not in raw["settings"]  # recorded before
    inp = FleetAutoscalerInput.model_validate(raw)
    default = FleetAutoscalerSettings.model_fields["scan_interval_s"].default
    assert inp.settings.scan_interval_s == raw["settings"]["interval_s"] != default
