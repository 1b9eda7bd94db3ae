"""The docs keep up with the code: every start option and every command of a loop is on that
loop's page, the README keeps its two commands and links every page, and each page has the
sections a reader looks for."""

from __future__ import annotations

import re
from pathlib import Path

import click
import pytest
from pydantic import BaseModel

from scaling.components.state import ComponentAutoscalerSettings
from scaling.fleet.region import FleetAutoscalerSettings
from scaling.nodes.settings import AutoscalerSettings
from starters.cli import growth
from starters.settings_flags import flag_for

ROOT = Path(__file__).resolve().parents[1]
LOOPS: dict[str, tuple[type[BaseModel], frozenset[str]]] = {
    "nodes": (AutoscalerSettings, frozenset({"cluster"})),
    "fleet": (FleetAutoscalerSettings, frozenset({"provider", "region"})),
    "components": (ComponentAutoscalerSettings, frozenset({"namespace", "name"})),
}
SECTIONS = ["## How it works", "## Settings", "## CLI: `growth {loop}`", "## Web UI", "## Metrics", "## Compatibility"]


@pytest.mark.parametrize("loop", list(LOOPS))
def test_each_loop_page_lists_its_options_and_commands(loop: str) -> None:
    page = (ROOT / "docs" / f"{loop}.md").read_text()
    for section in SECTIONS:
        assert section.format(loop=loop) in page, f"docs/{loop}.md: no {section.format(loop=loop)!r}"
    model, fixed = LOOPS[loop]
    for field in model.model_fields:
        if field not in fixed:
            assert f"`{flag_for(field)}" in page, f"docs/{loop}.md: start option {flag_for(field)} ({field})"
    group = growth.get_command(click.Context(growth), loop)
    assert isinstance(group, click.Group)
    for command in group.list_commands(click.Context(group)):
        assert re.search(rf"\b{re.escape(command)}\b", page), f"docs/{loop}.md: command growth {loop} {command}"


def test_readme_keeps_two_commands_and_links_every_page() -> None:
    readme = (ROOT / "README.md").read_text()
    assert "make demo" in readme and "make test" in readme and "## A short tour" in readme
    for page in sorted((ROOT / "docs").glob("*.md")):
        assert f"(docs/{page.name})" in readme, page.name
    assert "growth-autoscaler" not in readme  # the old names are aliases, documented in docs/operations.md
