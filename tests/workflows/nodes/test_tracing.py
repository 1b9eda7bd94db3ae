"""One trace follows a pod's scale-up (activities/tracing.py): the worker's client carries
Temporal's TracingInterceptor, spans go to an in-memory exporter, and the NodeAutoscaler (the real
workflow, stub activities under the real names, the real start_node_requests) plans a node for one
pending pod. The loop's activity that starts the request, the NodeRequest workflow and its
create_node and readiness activities are one trace, each span a descendant of the loop's."""

from __future__ import annotations

import uuid
from contextlib import suppress

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from temporalio.client import Client
from temporalio.service import RPCError
from temporalio.testing import WorkflowEnvironment

from activities.tracing import tracing_interceptor
from scaling.nodes import contracts
from scaling.nodes.contracts import ClusterObservation
from scaling.nodes.scale_up.requests import split_request_id
from scaling.nodes.settings import AutoscalerSettings
from scaling.nodes.state import AutoscalerInput
from tests.polling import until
from tests.workflows.nodes.stubs import World
from tests.workflows.nodes.test_node_autoscaler import GENERAL, pod
from tests.workflows.workers import new_worker
from workflows.nodes.autoscaler import NodeAutoscalerWorkflow


def ancestors(span: ReadableSpan, by_id: dict[int, ReadableSpan]) -> list[str]:
    names = []
    while span.parent is not None and span.parent.span_id in by_id:
        span = by_id[span.parent.span_id]
        names.append(span.name)
    return names


async def test_a_scale_up_is_one_trace_from_the_loops_activity_to_readiness(dev_env: WorkflowEnvironment) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    client = Client(**{**dev_env.client.config(), "interceptors": [tracing_interceptor(provider)]})
    world = World()
    world.observation = ClusterObservation(unschedulable=[pod(0)], groups=[GENERAL])
    tq, cluster = f"trace-{uuid.uuid4().hex[:6]}", f"c{uuid.uuid4().hex[:6]}"
    settings = AutoscalerSettings(cluster=cluster, scan_interval_s=0.2, readiness_timeout_s=60, machine_gc=False)
    async with new_worker(client, tq, activities=world.activities()):
        handle = await dev_env.client.start_workflow(  # an operator's start: no trace of its own
            NodeAutoscalerWorkflow.run, AutoscalerInput(settings=settings), id=f"nodes/{cluster}", task_queue=tq
        )
        try:
            ready = {f"RunActivity:{name}" for name in contracts.READINESS}
            await until(lambda: any(s.name in ready for s in exporter.get_finished_spans()), what="a readiness span")
        finally:
            await handle.terminate()
            for workflow_id in {split_request_id(c.request_id)[0] for c in world.created}:  # requests, batches
                with suppress(RPCError):  # already closed
                    await dev_env.client.get_workflow_handle(workflow_id).terminate()
    spans = exporter.get_finished_spans()
    by_id = {s.context.span_id: s for s in spans}
    # The loop's first start of requests (it plans again once the stub's pod stays pending).
    root = min(
        (s for s in spans if s.name == f"RunActivity:{contracts.START_NODE_REQUESTS}"), key=lambda s: s.start_time
    )
    assert root.parent is None  # the loop was started without a trace: the decision opens one
    trace = [s for s in spans if s.context.trace_id == root.context.trace_id]
    # One pod makes a batch of one (NodeRequestBatch, its readiness in wait_nodes_ready); a
    # NodeRequest names its own. Either way, every step below the loop's activity.
    steps = ["StartWorkflow:NodeRequest", "RunWorkflow:NodeRequest", f"StartActivity:{contracts.CREATE_NODE}",
             f"RunActivity:{contracts.CREATE_NODE}", "RunActivity:wait_node"]  # fmt: skip
    for step in steps:
        found = [s for s in trace if s.name.startswith(step)]
        assert found, (step, sorted({s.name for s in trace}))
        for span in found:
            assert root.name in ancestors(span, by_id), (span.name, ancestors(span, by_id))
    # The trace is the request's alone: one create, one readiness wait, one workflow.
    assert len([s for s in trace if s.name.startswith("RunWorkflow:")]) == 1
    assert len([s for s in trace if s.name == f"RunActivity:{contracts.CREATE_NODE}"]) == 1
