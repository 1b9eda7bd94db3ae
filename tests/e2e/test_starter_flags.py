"""`growth-autoscaler start` flags are generated from AutoscalerSettings: every field is settable,
from the settings file's `autoscaler:` section and then the command line. No server needed."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Literal

import pytest
import yaml
from pydantic import BaseModel

from activities.settings import load_settings
from scaling.nodes.settings import AutoscalerSettings
from starters.autoscaler import CliError, parse_args, start_settings
from starters.settings_flags import add_model_flags, flag_for, given


def settings_from(tmp_path: Path, data: dict) -> object:
    path = tmp_path / "growth.yaml"
    path.write_text(yaml.safe_dump(data))
    return load_settings(str(path))


def test_every_field_is_a_flag_in_start_help(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        parse_args(["start", "--help"])
    assert done.value.code == 0
    text = capsys.readouterr().out
    for name in AutoscalerSettings.model_fields:
        if name != "cluster":  # the global --cluster
            assert flag_for(name) in text, name
    assert "--no-scale-down-enabled" in text and "--search-attributes" in text  # bools both ways; old name kept


def test_flags_override_the_settings_file_which_overrides_defaults(tmp_path: Path) -> None:
    settings = settings_from(tmp_path, {"autoscaler": {"scan_interval_s": 3, "max_attempts": 2, "pdb_retry_s": 30}})
    args = parse_args(
        [
            "--cluster",
            "prod",
            "start",
            "--max-attempts",
            "7",
            "--max-nodes",
            "40",
            "--no-scale-down-enabled",
            "--search-attributes",
            "--drain-timeout",
            "90.5",
        ]
    )
    auto = start_settings(settings, args)
    assert auto.cluster == "prod"
    assert auto.max_attempts == 7 and auto.max_nodes_total == 40  # flags
    assert auto.scan_interval_s == 3 and auto.pdb_retry_s == 30  # the file
    assert auto.scale_down_enabled is False and auto.use_search_attributes is True
    assert auto.drain_timeout_s == 90.5
    assert auto.readiness_timeout_s == AutoscalerSettings.model_fields["readiness_timeout_s"].default
    assert start_settings(settings, parse_args(["start", "--max-nodes", "none"])).max_nodes_total is None


def test_bad_values_name_the_flag_or_the_setting(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        parse_args(["start", "--max-attempts", "many"])
    assert done.value.code == 2 and "--max-attempts" in capsys.readouterr().err
    with pytest.raises(CliError, match="autoscaler.scan_intervl_s"):
        start_settings(settings_from(tmp_path, {"autoscaler": {"scan_intervl_s": 3}}), parse_args(["start"]))
    with pytest.raises(CliError, match="settings autoscaler.max_attempts"):
        start_settings(settings_from(tmp_path, {"autoscaler": {"max_attempts": "x"}}), parse_args(["start"]))


def test_a_new_field_of_any_type_becomes_a_flag() -> None:
    class Inner(BaseModel):
        a: int = 1

    class Future(BaseModel):
        pools: list[str] = []
        inner: Inner = Inner()
        window_s: float = 5.0
        dry_run: bool = False
        planner: Literal["growth", "pd"] = "growth"

    parser = argparse.ArgumentParser()
    fields = add_model_flags(parser, Future)
    args = parser.parse_args(
        ["--pools", '["a", "b"]', "--inner", '{"a": 4}', "--window", "2", "--dry-run", "--planner", "pd"]
    )
    values = Future.model_validate(given(args, fields))
    assert values == Future(pools=["a", "b"], inner=Inner(a=4), window_s=2.0, dry_run=True, planner="pd")
    assert given(parser.parse_args([]), fields) == {}  # flags not given leave the defaults alone
    assert "--planner growth|pd" in parser.format_help()  # a Literal shows its values
