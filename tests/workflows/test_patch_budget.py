"""The repo's budget of live workflow.patched ids (docs/development.md, "Changing a workflow safely":
8). Main carried 9 on 30 Nov before anyone counted; counted here, a ninth id fails this test."""

from __future__ import annotations

import ast
from pathlib import Path

WORKFLOWS = Path(__file__).resolve().parents[2] / "workflows"
BUDGET = 8


def patched_ids() -> set[str]:
    """Every id asked with workflow.patched(...) in workflows/: a string, or the name of a module-level
    string constant."""
    ids: set[str] = set()
    for path in WORKFLOWS.rglob("*.py"):
        tree = ast.parse(path.read_text())
        consts = {
            t.id: node.value.value
            for node in tree.body
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant)
            for t in node.targets
            if isinstance(t, ast.Name) and isinstance(node.value.value, str)
        }
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "patched"
                and node.args
            ):
                arg = node.args[0]
                if isinstance(arg, ast.Constant):
                    ids.add(str(arg.value))
                elif isinstance(arg, ast.Name):
                    ids.add(consts.get(arg.id, arg.id))
    return ids


def test_the_live_patch_ids_keep_within_the_budget() -> None:
    ids = patched_ids()
    # The ones main has (30 Nov): read the scan, so a change to how they are written breaks this first.
    assert {"wake-kept-during-round", "cancel-ends-machine-gc", "lazy-index-shards"} <= ids, ids
    assert len(ids) <= BUDGET, sorted(ids)
