"""`growth nodes start` options are generated from AutoscalerSettings: every field is settable,
from the settings file's `autoscaler:` section and then the command line. No server needed: a
recording client stands in for Temporal and keeps what the command would start."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import click
import pytest
import yaml
from click.testing import CliRunner
from pydantic import BaseModel

from activities.settings import Settings, load_settings
from scaling.nodes.settings import AutoscalerSettings
from scaling.nodes.state import AutoscalerInput
from starters.cli import REFUSED, CliError, growth, invoke
from starters.settings_flags import flag_for, given, model_options


class RecordingClient:
    """Keeps the input of the workflow a command starts (the start is all `start` does)."""

    def __init__(self) -> None:
        self.started: list[tuple[Any, dict[str, Any]]] = []

    async def start_workflow(self, run: Any, arg: Any, **kwargs: Any) -> Any:
        self.started.append((arg, kwargs))
        return type("Handle", (), {"result_run_id": "run-1"})()


def settings_from(tmp_path: Path, data: dict) -> Settings:
    path = tmp_path / "growth.yaml"
    path.write_text(yaml.safe_dump(data))
    return load_settings(str(path))


async def started(settings: Settings, *argv: str) -> AutoscalerSettings:
    client = RecordingClient()
    await invoke(client, settings, ["nodes", *argv])  # type: ignore[arg-type]
    (inp, _), *_ = client.started
    assert isinstance(inp, AutoscalerInput)
    return inp.settings


def test_every_field_is_an_option_in_start_help() -> None:
    result = CliRunner().invoke(growth, ["nodes", "start", "--help"], terminal_width=200)
    assert result.exit_code == 0
    for name in AutoscalerSettings.model_fields:
        if name != "cluster":  # the group's --cluster
            assert flag_for(name) in result.output, name
    assert "--no-scale-down-enabled" in result.output and "--search-attributes" in result.output  # old name kept


async def test_options_override_the_settings_file_which_overrides_defaults(tmp_path: Path) -> None:
    settings = settings_from(tmp_path, {"autoscaler": {"scan_interval_s": 3, "max_attempts": 2, "pdb_retry_s": 30}})
    auto = await started(
        settings,
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
    )
    assert auto.cluster == "prod"
    assert auto.max_attempts == 7 and auto.max_nodes_total == 40  # options
    assert auto.scan_interval_s == 3 and auto.pdb_retry_s == 30  # the file
    assert auto.scale_down_enabled is False and auto.use_search_attributes is True
    assert auto.drain_timeout_s == 90.5
    assert auto.readiness_timeout_s == AutoscalerSettings.model_fields["readiness_timeout_s"].default
    assert (await started(settings, "start", "--max-nodes", "none")).max_nodes_total is None


async def test_bad_values_name_the_option_or_the_setting(tmp_path: Path) -> None:
    result = CliRunner().invoke(growth, ["nodes", "start", "--max-attempts", "many"])
    assert result.exit_code == REFUSED and "--max-attempts" in result.output
    with pytest.raises(CliError, match="autoscaler.scan_intervl_s") as err:
        await started(settings_from(tmp_path, {"autoscaler": {"scan_intervl_s": 3}}), "start")
    assert err.value.code == REFUSED
    with pytest.raises(CliError, match="settings autoscaler.max_attempts"):
        await started(settings_from(tmp_path, {"autoscaler": {"max_attempts": "x"}}), "start")
    with pytest.raises(CliError, match="--max-requests-in-flight: Input should be greater than") as err:
        await started(Settings(), "start", "--max-requests-in-flight", "0")
    assert err.value.code == REFUSED


def test_a_new_field_of_any_type_becomes_an_option() -> None:
    class Inner(BaseModel):
        a: int = 1

    class Future(BaseModel):
        pools: list[str] = []
        inner: Inner = Inner()
        window_s: float = 5.0
        dry_run: bool = False
        planner: Literal["growth", "pd"] = "growth"

    seen: list[dict] = []

    @click.command()
    @model_options(Future)
    @click.pass_context
    def cmd(ctx: click.Context, **_: object) -> None:
        seen.append(given(ctx, list(Future.model_fields)))

    runner = CliRunner()
    argv = ["--pools", '["a", "b"]', "--inner", '{"a": 4}', "--window", "2", "--dry-run", "--planner", "pd"]
    assert runner.invoke(cmd, argv).exit_code == 0
    assert Future.model_validate(seen[-1]) == Future(
        pools=["a", "b"], inner=Inner(a=4), window_s=2.0, dry_run=True, planner="pd"
    )
    assert runner.invoke(cmd, []).exit_code == 0 and seen[-1] == {}  # options not given leave the defaults alone
    assert "--planner growth|pd" in runner.invoke(cmd, ["--help"]).output  # a Literal shows its values
    refused = runner.invoke(cmd, ["--planner", "karpenter"])
    assert refused.exit_code == REFUSED and "--planner" in refused.output
