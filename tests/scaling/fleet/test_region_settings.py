"""The region's settings keep reading inputs from before `interval_s` was renamed
`scan_interval_s` (regions running across the upgrade carry the old name in their input)."""

from __future__ import annotations

from scaling.fleet.region import FleetAutoscalerInput, FleetAutoscalerSettings


def test_the_old_name_sets_the_scan_interval() -> None:
    old = FleetAutoscalerSettings.model_validate({"provider": "aws", "region": "r", "interval_s": 5})
    assert old.scan_interval_s == 5.0
    new = FleetAutoscalerSettings(provider="aws", region="r", scan_interval_s=4)
    assert new.scan_interval_s == 4.0 and new.model_dump()["scan_interval_s"] == 4.0


def test_an_input_with_the_old_name_keeps_its_interval() -> None:
    raw = {"settings": {"provider": "aws", "region": "r", "interval_s": 2.0}, "config": {}}
    inp = FleetAutoscalerInput.model_validate(raw)
    default = FleetAutoscalerSettings.model_fields["scan_interval_s"].default
    assert inp.settings.scan_interval_s == 2.0 != default
