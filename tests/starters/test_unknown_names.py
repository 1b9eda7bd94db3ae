"""A name the settings do not serve is refused where it is given (exit 2, the name and what is
served in the message), before anything connects: a loop started for it would only fail on its
first activity (UnknownCluster)."""

from __future__ import annotations

from pathlib import Path

import pytest
from temporalio import workflow
from temporalio.client import WorkflowFailureError
from temporalio.exceptions import ApplicationError
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from activities.settings import Settings
from starters.cli import MISSING, CliError, invoke
from tests.cli import growth

TWO_CLUSTERS = """
temporal: {address: "127.0.0.1:1"}
clusters:
  alpha: {kubeconfig: /nonexistent/alpha}
  beta: {kubeconfig: /nonexistent/beta}
"""


@pytest.fixture
def config(tmp_path: Path) -> str:
    path = tmp_path / "growth.yaml"
    path.write_text(TWO_CLUSTERS)
    return str(path)


async def test_nodes_start_for_an_unserved_cluster_exits_2_naming_it(config: str) -> None:
    proc = await growth("--config", config, "nodes", "--cluster", "gamma", "start", expect=2)
    assert "--cluster 'gamma'" in proc.stderr and "alpha, beta" in proc.stderr


async def test_components_start_for_an_unserved_kube_cluster_exits_2(config: str) -> None:
    proc = await growth("--config", config, "components", "-n", "db", "tc", "start", "--kube-cluster", "gamma", expect=2)  # fmt: skip
    assert "--kube-cluster 'gamma'" in proc.stderr
    # no --kube-cluster: the default connection, which a worker with `clusters` does not have
    proc = await growth("--config", config, "components", "-n", "db", "tc", "start", expect=2)
    assert "--kube-cluster ''" in proc.stderr


# A fleet region the fleet configuration does not list: tests/workflows/fleet/test_cli.py
# (test_bad_fleet_config_is_refused_naming_the_field, "no gcp/us-east-1", exit 2).


@workflow.defn(name="NodeAutoscaler")
class FailingLoop:
    """Stands for a loop that failed on its first activity (what an unserved cluster did)."""

    @workflow.run
    async def run(self, _: object = None) -> None:
        raise ApplicationError("cluster 'gamma' is not in this worker's settings", type="UnknownCluster")


async def test_status_of_a_failed_or_ended_loop_says_so_with_how_it_ended(env: WorkflowEnvironment) -> None:
    # unsandboxed: this test module imports the CLI, which the sandbox refuses to validate
    async with Worker(env.client, task_queue="t", workflows=[FailingLoop], workflow_runner=UnsandboxedWorkflowRunner()):
        handle = await env.client.start_workflow("NodeAutoscaler", None, id="nodes/gamma", task_queue="t")
        with pytest.raises(WorkflowFailureError):
            await handle.result()
        with pytest.raises(CliError) as info:
            await invoke(env.client, Settings(), ["nodes", "--cluster", "gamma", "status"])
        assert info.value.code == MISSING
        assert str(info.value).startswith("nodes/gamma is not running: FAILED at ")
        assert "is not in this worker's settings" in str(info.value)

        await env.client.start_workflow("NodeAutoscaler", None, id="fleet/aws/r1", task_queue="nobody")
        await env.client.get_workflow_handle("fleet/aws/r1").terminate("by hand")
        with pytest.raises(CliError, match="fleet/aws/r1 is not running: TERMINATED at .*: Workflow terminated"):
            await invoke(env.client, Settings(), ["fleet", "--provider", "aws", "--region", "r1", "status"])
