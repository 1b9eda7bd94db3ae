"""The activities through a real worker and the pydantic data converter: contract models cross
history intact, and a metrics failure reaches the workflow as ActivityError caused by a
non-retryable ApplicationError of type MetricsUnavailable (tried once)."""

from __future__ import annotations

import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import httpx
from kubernetes import client
from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.exceptions import ActivityError, ApplicationError
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from activities.components import build_activities
from activities.components.settings import ComponentsSettings
from activities.kube.client import ClusterClients
from activities.settings import Settings
from scaling.components import contracts
from sim.tidb.world import FakeTidb
from starters.processes import free_port
from tests.activities.components.conftest import NS, TAC, TC, G, V, running, tc_body
from tests.conftest import SERVER_STARTUP

OPTS = {"start_to_close_timeout": timedelta(seconds=20), "retry_policy": RetryPolicy(maximum_attempts=3)}


@workflow.defn(sandboxed=False)
class Probe:
    @workflow.run
    async def run(self, ns: str) -> list[str]:
        seen: list[str] = []
        refs = await workflow.execute_activity(
            contracts.LIST_AUTOSCALERS,
            contracts.ListAutoscalersInput(),
            result_type=list[contracts.AutoscalerRef],
            **OPTS,
        )
        obj = await workflow.execute_activity(
            contracts.GET_AUTOSCALER, refs[0], result_type=contracts.AutoscalerObject, **OPTS
        )
        seen.append(f"{refs[0].name} {obj.found} {obj.spec['cluster']['name']}")
        made = await workflow.execute_activity(
            contracts.CREATE_AUTO_CLUSTER,
            contracts.CreateAutoClusterInput(
                namespace=ns,
                base_cluster="basic",
                name="auto-bcdf",
                autoscaler="tas",
                component="tidb",
                group="auto-bcdf",
                replicas=1,
                cpu="2",
                memory="4Gi",
            ),
            result_type=contracts.CreateAutoClusterResult,
            **OPTS,
        )
        seen.append(f"created {made.created} {made.replicas}")
        metrics_input = contracts.MetricsInput(
            namespace=ns, base_cluster="basic", component="tidb", clusters={"basic": ""}
        )
        try:
            await workflow.execute_activity(
                contracts.QUERY_METRICS, metrics_input, result_type=contracts.ComponentMetrics, **OPTS
            )
        except ActivityError as err:
            assert isinstance(err.cause, ApplicationError)
            seen.append(f"{err.cause.type} non_retryable={err.cause.non_retryable}")
        return seen


async def test_activities_through_a_worker(
    temporal_test_server_path: str,
    world: FakeTidb,
    api: client.ApiClient,
    custom: client.CustomObjectsApi,
    control: httpx.Client,
) -> None:
    custom.create_namespaced_custom_object(G, V, NS, TC, tc_body("basic", tikv=1, tidb=1))
    custom.create_namespaced_custom_object(
        G,
        V,
        NS,
        TAC,
        {
            "apiVersion": f"{G}/{V}",
            "kind": "TidbClusterAutoScaler",
            "metadata": {"name": "tas"},
            "spec": {"cluster": {"name": "basic"}},
        },
    )
    running(control, 2)
    control.post("/sim/v1/faults", json={"prometheus": {"mode": "error"}})  # until cleared
    settings = Settings(components=ComponentsSettings(prometheus_url=world.prometheus_url))
    activities = build_activities(settings, ClusterClients(shared=api))
    async with await WorkflowEnvironment.start_time_skipping(
        port=free_port(),
        test_server_startup_timeout=SERVER_STARTUP,
        test_server_existing_path=temporal_test_server_path,
        data_converter=pydantic_data_converter,
    ) as env:
        with ThreadPoolExecutor(8) as pool:
            async with Worker(
                env.client,
                task_queue="q",
                workflows=[Probe],
                activities=activities,
                activity_executor=pool,
                workflow_runner=UnsandboxedWorkflowRunner(),
            ):
                seen = await env.client.execute_workflow(Probe.run, NS, id=f"probe-{uuid.uuid4()}", task_queue="q")
    assert seen == ["tas True basic", "created True 1", "MetricsUnavailable non_retryable=True"]
    assert control.get("/sim/v1/stats").json()["/api/v1/query"] == 1  # not retried
