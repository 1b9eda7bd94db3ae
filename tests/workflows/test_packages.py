"""What importing a loop's workflow package costs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from workflows.all import WORKFLOWS
from workflows.nodes.request import NodeRequestWorkflow

ROOT = Path(__file__).resolve().parents[2]


def test_a_loop_package_imports_none_of_its_workflow_modules() -> None:
    """The worker's sandbox runs a workflow's package again for every new instance: a NodeRequest
    (hundreds start in a burst) must not also pay for the loop's, scale-down's and GC's modules."""
    code = (
        "import sys, workflows.nodes, workflows.fleet, workflows.components\n"
        "print(sorted(m for m in sys.modules if m.startswith('workflows.')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "['workflows.components', 'workflows.fleet', 'workflows.nodes']"
    assert NodeRequestWorkflow in WORKFLOWS  # the registries still list every workflow
