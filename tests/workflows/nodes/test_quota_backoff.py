"""Quota → the pool backs off: a NodeRequest whose create reports `quota_exceeded` (what
HetznerProvider returns on `resource_limit_exceeded`) moves on, and the NodeAutoscaler stops
planning onto that pool for the backoff period. Stub activities, on the dev server: the loop
waits on a 0.2 s scan that the requests' reports cut short, and the time-skipping server stalls
such a loop for good when a timer fires while its task is with the worker (tests/conftest.py
dev_env; it failed so in a suite run of 8 pytest workers on 2 cores)."""

from __future__ import annotations

import uuid

from temporalio.service import RPCError
from temporalio.testing import WorkflowEnvironment

from scaling.kube.models import PodInfo, Resources
from scaling.nodes.contracts import ClusterObservation
from scaling.nodes.models import NodeGroup, PoolSpec
from scaling.nodes.scale_up.backoff import BACKOFF_INITIAL_S
from scaling.nodes.settings import AutoscalerSettings
from scaling.nodes.state import AutoscalerInput
from tests.workflows.nodes.stubs import World
from tests.workflows.polling import eventually
from tests.workflows.workers import new_worker
from workflows.nodes.autoscaler import NodeAutoscalerWorkflow

GIB = 1 << 30
GROUP = NodeGroup(
    name="general",
    pools=[
        PoolSpec(provider="kwok", serverType=["cx22"], priority=100),
        PoolSpec(provider="kwok", serverType=["cx32"], priority=50),
    ],
)


def pod(i: int) -> PodInfo:
    return PodInfo(
        namespace="default",
        name=f"web-{i}",
        uid=f"uid-{i}",
        requests=Resources(cpu_m=1500, memory=GIB, pods=1),  # one per cx22
        unschedulable=True,
        controller_kind="ReplicaSet",
    )


async def test_quota_exceeded_backs_the_pool_off_and_later_requests_skip_it(dev_env: WorkflowEnvironment) -> None:
    env = dev_env
    world = World(quota_pools={"kwok-cx22"}, ready_nodes_join_full=True)
    world.observation = ClusterObservation(unschedulable=[pod(1)], groups=[GROUP])
    tq = f"tq-{uuid.uuid4().hex[:6]}"
    cluster = f"c{uuid.uuid4().hex[:6]}"
    async with new_worker(env.client, tq, activities=world.activities()):
        handle = await env.client.start_workflow(
            NodeAutoscalerWorkflow.run,
            AutoscalerInput(
                # Scale-down off: these stubs do not observe for it (growth nodes join here).
                settings=AutoscalerSettings(
                    cluster=cluster,
                    scan_interval_s=0.2,
                    readiness_timeout_s=60,
                    machine_gc=False,
                    scale_down_enabled=False,
                )
            ),
            id=f"nodes/{cluster}",
            task_queue=tq,
        )
        try:
            # The pod stays unschedulable (its nodes join full), so the loop keeps planning nodes.
            status = await eventually(handle, lambda s: s.requests_by_phase.get("Ready", 0) >= 3)
            tried = [c.pool.name for c in world.created]
            assert tried[0] == "kwok-cx22"  # the preferred pool, until quota said no
            assert tried.count("kwok-cx22") == 1, tried  # backed off: never planned onto again
            assert status.attempts_by_pool["kwok-cx22"] == {"QuotaExceeded": 1}
            assert status.attempts_by_pool["kwok-cx32"]["Ready"] >= 3
            until = status.backoff_until["general/kwok-cx22"]
            quota_at = next(
                a.timestamp
                for r in [*status.recent, *status.in_flight]
                for a in r.attempts
                if a.result.value == "QuotaExceeded"
            )
            # Backed off for the first-failure period (not a doubled one), counted from when the
            # loop took the request's report: after the quota was hit, by as long as the signal
            # took to reach the loop (seconds on a loaded machine, so the bound is loose).
            since = until - BACKOFF_INITIAL_S - quota_at.timestamp()
            assert 0 <= since < BACKOFF_INITIAL_S / 5, since
        finally:
            await handle.terminate()
            for request_id in {c.request_id for c in world.created}:
                try:
                    await env.client.get_workflow_handle(request_id).terminate()
                except RPCError:
                    pass
