"""Recovery with two workers on one task queue (as deploy/base/worker.yaml runs them): a worker
SIGKILLed in the middle of an activity has it retried on the other within seconds, and a worker
stopped with SIGTERM hands its work over and exits, losing nothing and doubling nothing.

Each test prints its recovery figure (pytest -s); they assert only generous bounds (before
heartbeats, a create caught in a killed worker waited out its 2-minute limit)."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections import Counter

import yaml
from kubernetes import client
from temporalio.api.enums.v1 import PendingActivityState
from temporalio.client import Client, WorkflowHandle
from temporalio.service import RPCError, RPCStatusCode

import worker as growth_worker
from activities.nodes.providers.kwok import capacity_lease_name
from scaling.nodes import contracts
from scaling.nodes.contracts import READINESS  # a NodeRequest's readiness wait, or a batch's round
from scaling.nodes.models import LABEL_REQUEST, RequestPhase
from scaling.nodes.scale_up.requests import split_request_id
from scaling.nodes.status import AutoscalerStatus
from starters.kube import apply_node_group, deployment, node_group
from starters.processes import Proc, free_port
from tests.e2e.conftest import LocalCluster
from tests.e2e.test_scale_up_e2e import pods_running, start_autoscaler
from tests.polling import until
from workflows.nodes.autoscaler import NodeAutoscalerWorkflow

POOL = "kwok-cx22"
LEASE_NAMESPACE = "kube-system"


def second_worker(lc: LocalCluster) -> Proc:
    """Another worker on the same task queue, with ports of its own."""
    settings = yaml.safe_load(lc.config_path.read_text())
    settings["observability"] = {
        "metrics_address": f"127.0.0.1:{free_port()}",
        "health_address": f"127.0.0.1:{free_port()}",
    }
    path = lc.workdir / "growth-b.yaml"
    path.write_text(yaml.safe_dump(settings))
    return lc.procs.worker(path, name="worker-b")


def identity(proc: Proc) -> str:
    return f"{proc.popen.pid}@"  # the SDK's default worker identity is "<pid>@<host>"


async def running_activity(temporal: Client, workflow_id: str, name: str | tuple[str, ...]):  # noqa: ANN201
    """The workflow's pending activity `name` once a worker has started it, else None (also
    before the workflow exists: the loop records a request in flight before an activity starts it)."""
    try:
        desc = await temporal.get_workflow_handle(workflow_id).describe()
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            return None
        raise
    for pending in desc.raw_description.pending_activities:
        names = (name,) if isinstance(name, str) else name
        if pending.activity_type.name in names and pending.state == PendingActivityState.PENDING_ACTIVITY_STATE_STARTED:
            return pending
    return None


async def request_in(handle: WorkflowHandle, phase: RequestPhase) -> str | None:
    """The workflow of an in-flight request in `phase`: a NodeRequest, or a batch member's batch."""
    s: AutoscalerStatus = await handle.query(NodeAutoscalerWorkflow.status)
    return next((split_request_id(r.id)[0] for r in s.in_flight if r.phase == phase), None)


async def loop_task_workers(handle: WorkflowHandle) -> list[str]:
    """Which worker ran each of the workflow's tasks so far, in order."""
    return [
        ev.workflow_task_started_event_attributes.identity
        async for ev in handle.fetch_history_events()
        if ev.HasField("workflow_task_started_event_attributes")
    ]


def one_node_per_request(lc: LocalCluster) -> list[client.V1Node]:
    nodes = client.CoreV1Api(lc.api).list_node(label_selector=LABEL_REQUEST).items
    per_request = Counter(n.metadata.labels[LABEL_REQUEST] for n in nodes)
    assert per_request and set(per_request.values()) == {1}, per_request
    return nodes


async def all_done(handle: WorkflowHandle, lc: LocalCluster, pods: int) -> AutoscalerStatus | None:
    s: AutoscalerStatus = await handle.query(NodeAutoscalerWorkflow.status)
    return s if pods_running(lc.api, "web") == pods and not s.in_flight else None


async def test_worker_killed_mid_create_is_retried_on_the_other_worker_within_seconds(local_cluster) -> None:  # noqa: ANN001
    lc: LocalCluster = local_cluster({"kwok": {"capacity": {POOL: 5}}})
    workers = {identity(p): p for p in (lc.worker, second_worker(lc))}
    # Hold the pool's capacity Lease from outside, as a worker stuck in its count-and-create
    # would: the create waits inside the activity, where the kill catches it.
    coord = client.CoordinationV1Api(lc.api)
    coord.create_namespaced_lease(
        LEASE_NAMESPACE,
        {
            "metadata": {"name": capacity_lease_name(POOL)},
            "spec": {"holderIdentity": "test", "leaseDurationSeconds": 3600},
        },
    )
    apply_node_group(lc.api, node_group("general", [{"provider": "kwok", "serverType": ["cx22"], "priority": 10}]))
    handle = await start_autoscaler(lc, "killed")
    temporal = await lc.temporal.client()
    client.AppsV1Api(lc.api).create_namespaced_deployment("default", deployment("web", 2, cpu="500m", memory="256Mi"))

    request_id = await until(lambda: request_in(handle, RequestPhase.PENDING), 60, "a NodeRequest")
    creating = await until(
        lambda: running_activity(temporal, request_id, contracts.CREATE_NODE), 60, "create_node running"
    )
    victim = next(p for who, p in workers.items() if creating.last_worker_identity.startswith(who))
    survivor = next(p for p in workers.values() if p is not victim)
    loop_events = len(await loop_task_workers(handle))
    victim.kill()
    killed_at = time.monotonic()
    lease = coord.read_namespaced_lease(capacity_lease_name(POOL), LEASE_NAMESPACE)
    lease.spec.holder_identity = ""  # the stuck holder lets go: only the kill is left to recover from
    coord.replace_namespaced_lease(capacity_lease_name(POOL), LEASE_NAMESPACE, lease)

    # Read through describe and history only: a query to a workflow whose last task ran on the
    # dead worker waits for its sticky queue to time out, and would hold up the measurement.
    async def retried() -> float | None:
        desc = await temporal.get_workflow_handle(request_id).describe()
        pending = [a for a in desc.raw_description.pending_activities if a.activity_type.name == contracts.CREATE_NODE]
        if not pending:  # completed between two looks: only the survivor can have run it
            return time.monotonic() - killed_at
        a = pending[0]
        on_survivor = a.last_worker_identity.startswith(identity(survivor))
        started = a.state == PendingActivityState.PENDING_ACTIVITY_STATE_STARTED
        return time.monotonic() - killed_at if a.attempt >= 2 and started and on_survivor else None

    async def loop_moved() -> float | None:
        later = (await loop_task_workers(handle))[loop_events:]
        return time.monotonic() - killed_at if any(w.startswith(identity(survivor)) for w in later) else None

    recovery, loop_recovery = await asyncio.gather(
        until(retried, 60, "create_node retried on the surviving worker", every=0.1),
        until(loop_moved, 60, "the loop running on the surviving worker", every=0.1),
    )
    print(
        f"\nrecovery after SIGKILL: create_node ran again on the other worker after {recovery:.1f} s;"
        f" the loop's next workflow task ran there after {loop_recovery:.1f} s"
    )
    assert recovery < 45  # before heartbeats: its whole 2-minute start-to-close limit

    status = await until(lambda: all_done(handle, lc, 2), 90, "every pod running")
    nodes = one_node_per_request(lc)
    assert len(nodes) == status.nodes_created == status.requests_by_phase.get("Ready")
    assert survivor.alive()
    await handle.terminate()


async def test_sigterm_hands_a_wait_to_the_other_worker_and_exits(local_cluster) -> None:  # noqa: ANN001
    lc: LocalCluster = local_cluster({"kwok": {}}, ["--node-ready-delay", "20"])
    workers = {identity(p): p for p in (lc.worker, second_worker(lc))}
    apply_node_group(lc.api, node_group("general", [{"provider": "kwok", "serverType": ["cx22"], "priority": 10}]))
    handle = await start_autoscaler(lc, "rolling")
    temporal = await lc.temporal.client()
    client.AppsV1Api(lc.api).create_namespaced_deployment("default", deployment("web", 2, cpu="500m", memory="256Mi"))

    request_id = await until(lambda: request_in(handle, RequestPhase.PROVISIONING), 60, "a NodeRequest provisioning")
    waiting = await until(lambda: running_activity(temporal, request_id, READINESS), 60, "a readiness wait running")
    victim = next(p for who, p in workers.items() if waiting.last_worker_identity.startswith(who))
    survivor = next(p for p in workers.values() if p is not victim)
    loop_events = len(await loop_task_workers(handle))
    os.killpg(victim.popen.pid, signal.SIGTERM)
    stopped_at = time.monotonic()

    async def handed_over() -> float | None:
        pending = await running_activity(temporal, request_id, READINESS)
        on_survivor = pending is not None and pending.last_worker_identity.startswith(identity(survivor))
        return time.monotonic() - stopped_at if on_survivor else None

    async def loop_moved() -> float | None:
        later = (await loop_task_workers(handle))[loop_events:]
        return time.monotonic() - stopped_at if any(w.startswith(identity(survivor)) for w in later) else None

    handover, loop_handover = await asyncio.gather(
        until(handed_over, 60, "the readiness wait resumed on the other worker", every=0.1),
        until(loop_moved, 60, "the loop running on the other worker", every=0.1),
    )
    # The worker exits by itself, well within the Deployment's terminationGracePeriodSeconds.
    grace = growth_worker.GRACEFUL_SHUTDOWN.total_seconds() + 15
    assert victim.popen.wait(timeout=grace) == 0, victim.lines[-20:]
    exited = time.monotonic() - stopped_at
    print(
        f"\nSIGTERM: the wait resumed on the other worker after {handover:.1f} s, the loop's next workflow"
        f" task ran there after {loop_handover:.1f} s; the worker exited after {exited:.1f} s"
    )
    # The handed-back wait kept its deadline: the node was not waited for anew (nor given up on).
    status = await until(lambda: all_done(handle, lc, 2), 90, "every pod running")
    nodes = one_node_per_request(lc)
    assert len(nodes) == status.nodes_created == status.requests_by_phase.get("Ready")
    assert not [r for r in status.recent if r.phase != RequestPhase.READY]
    assert survivor.alive()
    await handle.terminate()
