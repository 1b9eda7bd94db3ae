"""The sandbox's pass-through list (workflows/sandbox.py) is every module of the workflows
package that defines no workflow: a new helper is not re-imported for each run by omission, and
a module that defines a workflow is never passed through (its runs would share its state and skip
the sandbox's checks)."""

from __future__ import annotations

import pkgutil

import workflows
from workflows.all import WORKFLOWS
from workflows.sandbox import HELPERS, workflow_runner


def test_every_helper_module_and_no_workflow_module_passes_through() -> None:
    modules = {m.name for m in pkgutil.walk_packages(workflows.__path__, "workflows.") if not m.ispkg}
    defining = {cls.__module__ for cls in WORKFLOWS}
    lists = {m for m in modules if m == "workflows.all" or m.endswith(".registry")}  # never in a sandbox
    assert set(HELPERS) == modules - defining - lists - {"workflows.sandbox"}
    restrictions = workflow_runner().restrictions
    assert not restrictions.passthrough_all_modules
    assert not defining & restrictions.passthrough_modules
