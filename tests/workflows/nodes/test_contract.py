"""The node loop's contract: every activity the node workflows call is named by a constant in
scaling.nodes.contracts.ACTIVITY_NAMES, the worker's build_activities registers exactly those
names, and the workflow tests' stubs register under them. A workflow calling a name the worker
does not register fails here, not in production as an activity task no worker polls."""

from __future__ import annotations

import ast
from pathlib import Path

from temporalio import activity

from activities.nodes import build_activities
from activities.settings import Settings
from scaling.nodes import contracts
from tests.workflows.nodes.stubs import World
from tests.workflows.nodes.test_machine_gc import Cloud
from tests.workflows.source import parse

WORKFLOWS_DIR = Path(__file__).parents[3] / "workflows" / "nodes"
# Calls whose first argument is an activity name: the SDK's and the workflows' own helpers.
ACTIVITY_CALLS = {"execute_activity", "start_activity", "execute_local_activity", "_kube", "_best_effort"}


def names_called(source: str, path: str) -> set[str]:
    """Activity names the source passes to ACTIVITY_CALLS; a literal or an unknown constant is
    an error (a helper's own parameter, passed through, is checked at its callers)."""
    called: set[str] = set()
    for node in ast.walk(parse(source)):
        if not (isinstance(node, ast.Call) and node.args):
            continue
        func = node.func
        fname = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        if fname not in ACTIVITY_CALLS:
            continue
        arg = node.args[0]
        if isinstance(arg, ast.Attribute) and isinstance(arg.value, ast.Name) and arg.value.id == "contracts":
            value = getattr(contracts, arg.attr, None)
            assert value in contracts.ACTIVITY_NAMES, (
                f"{path}:{node.lineno}: contracts.{arg.attr} is not in ACTIVITY_NAMES"
            )
            called.add(value)
        else:
            assert isinstance(arg, ast.Name), (
                f"{path}:{node.lineno}: activity named by {ast.unparse(arg)}, not a contracts constant"
            )
    return called


def workflow_activity_names() -> set[str]:
    called: set[str] = set()
    for path in sorted(WORKFLOWS_DIR.glob("*.py")):
        source = path.read_text()
        tree = parse(source)
        for node in ast.walk(tree):  # workflows import contracts, never activity modules
            if isinstance(node, ast.ImportFrom):
                assert not (node.module or "").startswith("activities"), f"{path}: imports {node.module}"
        called |= names_called(source, str(path))
    return called


def test_node_workflows_call_exactly_the_contract_names() -> None:
    assert workflow_activity_names() == contracts.ACTIVITY_NAMES


def test_a_literal_or_unknown_name_is_caught() -> None:
    bad = 'async def f():\n    await workflow.execute_activity("launch_rocket", 1)\n'
    try:
        names_called(bad, "bad.py")
    except AssertionError as err:
        assert "launch_rocket" in str(err)
    else:
        raise AssertionError("a literal activity name was not caught")
    unknown = "async def f():\n    await workflow.execute_activity(contracts.LAUNCH_ROCKET, 1)\n"
    try:
        names_called(unknown, "bad.py")
    except AssertionError as err:
        assert "LAUNCH_ROCKET" in str(err)
    else:
        raise AssertionError("a name outside ACTIVITY_NAMES was not caught")


def test_worker_registers_exactly_the_contract_names(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    # Never contacted: building the activities only reads the file.
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        "clusters: [{name: c, cluster: {server: 'https://127.0.0.1:1', insecure-skip-tls-verify: true}}]\n"
        "contexts: [{name: c, context: {cluster: c, user: u}}]\nusers: [{name: u, user: {token: t}}]\n"
    )
    settings = Settings.model_validate({"kubernetes": {"kubeconfig": str(kubeconfig)}})
    names = [activity._Definition.must_from_callable(fn).name for fn in build_activities(settings)]
    assert len(names) == len(set(names))
    assert set(names) == contracts.ACTIVITY_NAMES


def test_stubs_register_under_contract_names() -> None:
    stubs = [*World().activities(), *Cloud().activities()]
    names = {activity._Definition.must_from_callable(fn).name for fn in stubs}
    assert names <= contracts.ACTIVITY_NAMES, names - contracts.ACTIVITY_NAMES
