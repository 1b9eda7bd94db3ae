"""The fleet contract: the stubs the workflow tests use register exactly the contract's
activity names, and the workflows call no name outside it."""

from __future__ import annotations

import ast
from pathlib import Path

from scaling.fleet import contracts
from tests.workflows.fleet.stubs import FleetWorld
from tests.workflows.source import parse

WORKFLOWS_DIR = Path(__file__).parents[3] / "workflows" / "fleet"


def test_stubs_register_exactly_the_contract() -> None:
    names = {a.__temporal_activity_definition.name for a in FleetWorld().activities()}
    assert names == contracts.ACTIVITY_NAMES | contracts.DECISION_NAMES


def test_workflows_call_activities_only_by_contract_constants() -> None:
    used: set[str] = set()
    for path in WORKFLOWS_DIR.glob("*.py"):
        for node in ast.walk(parse(path.read_text())):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "contracts":
                used.add(node.attr)
            assert not (isinstance(node, ast.ImportFrom) and (node.module or "").startswith("activities")), path
    activity_constants = {n for n in used if getattr(contracts, n) in contracts.ACTIVITY_NAMES}
    assert {getattr(contracts, n) for n in activity_constants} == contracts.ACTIVITY_NAMES
