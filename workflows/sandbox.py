"""The sandbox every worker runs growth's workflows in.

The SDK's sandbox imports a workflow's module afresh for each new run, and with it every module
of ours that the workflow imports outside `imports_passed_through`. Our helper modules (activity
options, approvals, children, details, metrics, the request machine, ...) hold no state a run
could leave behind and define no workflow, yet re-importing them cost NodeAutoscaler 5 of its
11 ms of CPU per new run (each continue-as-new, scale-down and replacement starts one; the
NodeRequests and ComponentAutoscalers run unsandboxed already) and the suite's in-process workflow tests a third of
their CPU (tests/workflows/nodes: 77 CPU-s -> 50). They pass
through; the modules that define workflows are still imported afresh for each run, under the
sandbox's checks. tests/workflows/test_sandbox.py keeps this list equal to what is in the package.
"""

from __future__ import annotations

from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

HELPERS = (
    "workflows.activity_options",
    "workflows.approvals",
    "workflows.arguments",
    "workflows.children",
    "workflows.details",
    "workflows.search",
    "workflows.components.activity_options",
    "workflows.components.metrics",
    "workflows.fleet.activity_options",
    "workflows.fleet.metrics",
    "workflows.nodes.activity_options",
    "workflows.nodes.metrics",
    "workflows.nodes.request_machine",
    "workflows.nodes.scale_down_step",
)


def workflow_runner() -> SandboxedWorkflowRunner:
    return SandboxedWorkflowRunner(restrictions=SandboxRestrictions.default.with_passthrough_modules(*HELPERS))
