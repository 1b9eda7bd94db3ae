"""Headroom end to end: a node is added before any pod asks, and pods then run on it at once.

Temporal dev server + simulated cluster (its own scheduler binds pods) + the real worker."""

from __future__ import annotations

from kubernetes import client
from temporalio.client import WorkflowHandle

from scaling.nodes.headroom import headroom_uid
from scaling.nodes.models import LABEL_GROUP
from scaling.nodes.scale_up.requests import NodeRequestStatus
from scaling.nodes.settings import AutoscalerSettings
from scaling.nodes.state import AutoscalerInput
from scaling.nodes.status import AutoscalerStatus
from starters.kube import apply_node_group, deployment, node_group
from tests.e2e.conftest import LocalCluster
from tests.polling import until
from workflows.nodes.autoscaler import NodeAutoscalerWorkflow, autoscaler_id


async def start_autoscaler(lc: LocalCluster, cluster: str) -> WorkflowHandle:
    temporal = await lc.temporal.client()
    settings = AutoscalerSettings(
        cluster=cluster, scan_interval_s=1, readiness_timeout_s=60, readiness_poll_s=0.5, request_ttl_s=120
    )
    return await temporal.start_workflow(
        NodeAutoscalerWorkflow.run,
        AutoscalerInput(settings=settings),
        id=autoscaler_id(cluster),
        task_queue=lc.task_queue,
    )


def requests_of(s: AutoscalerStatus) -> list[NodeRequestStatus]:
    return [*s.recent, *s.in_flight]


async def test_headroom_node_is_added_ahead_of_pods_that_then_land_on_it(local_cluster) -> None:  # noqa: ANN001
    lc: LocalCluster = local_cluster()
    # One CPU and 1 GiB kept free on a cx22 (1930m allocatable).
    apply_node_group(
        lc.api,
        node_group(
            "warm",
            [{"provider": "kwok", "serverType": ["cx22"], "priority": 10}],
            headroom={"cpu": "1", "memory": "1Gi"},
        ),
    )
    handle = await start_autoscaler(lc, "warm")
    core = client.CoreV1Api(lc.api)

    async def prewarmed() -> AutoscalerStatus | None:
        s = await handle.query(NodeAutoscalerWorkflow.status)
        return s if s.nodes_created == 1 and not s.in_flight else None

    # No pod exists, yet a node is added for the headroom, and no second one while it stays free.
    first = await until(prewarmed, 45, "a node for the headroom")
    assert [r.pod_uids for r in requests_of(first)] == [[headroom_uid("warm")]]
    settled = await until(
        lambda: _status_after(handle, first.iterations + 3), 30, "three more loops with the headroom held"
    )
    assert len(requests_of(settled)) == 1
    [warm_node] = core.list_node(label_selector=f"{LABEL_GROUP}=warm").items
    assert settled.last_loop.unschedulable == 0 and settled.last_loop.headroom_problems == []

    # Three 500m pods arrive: the scheduler binds them to the prewarmed node, nobody waits for one.
    client.AppsV1Api(lc.api).create_namespaced_deployment("default", deployment("web", 3, cpu="500m", memory="256Mi"))

    async def web_running() -> list | None:
        pods = core.list_namespaced_pod("default", label_selector="app=web").items
        return pods if len(pods) == 3 and all(p.status.phase == "Running" for p in pods) else None

    pods = await until(web_running, 30, "the web pods running")
    assert {p.spec.node_name for p in pods} == {warm_node.metadata.name}

    # They used the headroom (430m left < 1 CPU): a new node restores it. Every request was for
    # the headroom; none for a web pod, and no scale-up event names one.
    async def restored() -> AutoscalerStatus | None:
        s = await handle.query(NodeAutoscalerWorkflow.status)
        return s if s.nodes_created == 2 and not s.in_flight else None

    status = await until(restored, 45, "a second node restoring the headroom")
    assert [r.pod_uids for r in requests_of(status)] == [[headroom_uid("warm")]] * 2
    web_uids = {p.metadata.uid for p in pods}
    events = core.list_event_for_all_namespaces().items
    assert not [e for e in events if e.involved_object.uid in web_uids and "ScaleUp" in (e.reason or "")]
    assert not [e for e in events if (e.involved_object.name or "").startswith("headroom/")]
    assert {p.spec.node_name for p in core.list_namespaced_pod("default", label_selector="app=web").items} == {
        warm_node.metadata.name
    }
    await handle.terminate()


async def _status_after(handle: WorkflowHandle, iterations: int) -> AutoscalerStatus | None:
    s = await handle.query(NodeAutoscalerWorkflow.status)
    return s if s.iterations >= iterations else None
