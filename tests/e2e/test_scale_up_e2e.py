"""Scale-up end to end: Temporal dev server + simulated cluster + the real worker process."""

from __future__ import annotations

import asyncio
import math
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from kubernetes import client
from temporalio.client import WorkflowHandle

from scaling.kube.models import LABEL_ZONE
from scaling.nodes.models import CRD_GROUP, CRD_VERSION, LABEL_REQUEST, RequestPhase
from scaling.nodes.settings import AutoscalerSettings
from scaling.nodes.state import AutoscalerInput
from scaling.nodes.status import AutoscalerStatus
from starters.kube import apply_node_group, deployment, node_group
from starters.metrics import fetch, value
from tests.e2e.conftest import LocalCluster
from tests.e2e.demo import demo_summary
from tests.polling import until
from workflows.nodes.autoscaler import NodeAutoscalerWorkflow, autoscaler_id

ROOT = Path(__file__).resolve().parents[2]
FALLBACK_POOLS = ("kwok-cx32", "kwok-cpx31")  # the burst demo's second pool (starters/scenarios/burst.py)


def test_demo_burst_headless_shows_fallback(tmp_path: Path) -> None:
    """`make demo HEADLESS=1` in small: every pod runs, and the preferred pool's exhaustion shows."""
    summary = demo_summary(tmp_path / "demo", "--pods", "24", "--timeout", "120", "--scan-interval", "1")
    assert summary["scenario"] == "burst"
    assert summary["pods_running"] == summary["pods"] == 24
    assert set(summary["requests"]) <= {"Ready", "Replanned"}
    assert summary["nodes_created"] == summary["requests"]["Ready"]
    preferred = summary["attempts"]["kwok-cx22"]
    assert preferred["Ready"] == 3 and preferred["InsufficientCapacity"] >= 1
    # Capacity memory: every request that found cx22 full handed its pods back, and they were
    # planned again packed for the bigger fallback type, not one half-empty cx32 per cx22-sized set.
    assert summary["requests"]["Replanned"] == preferred["InsufficientCapacity"]
    # The pods reach the loop in one decision or several (a busy machine splits them), and once
    # cx22 is known full, later pods are bought on the fallback type with no failure of their own:
    # so the fallback nodes are counted against the pods that run on them, not the failures. Packed
    # at the fallback type's size (7 pods a node) those pods need no fewer nodes than were bought.
    # One node per cx22-sized set (3 pods) buys at least 5 for the 15 pods cx22's 3 nodes leave
    # over, and 24 pods need no more than 4 packed, wherever the scheduler puts them.
    by_pool = summary["nodes_by_pool"]
    fallback_ready = sum(summary["attempts"].get(p, {}).get("Ready", 0) for p in FALLBACK_POOLS)
    fallback = [by_pool[p] for p in FALLBACK_POOLS if p in by_pool]
    assert sum(f["nodes"] for f in fallback) == fallback_ready >= 1
    on_fallback = sum(f["pods"] for f in fallback)
    packed = math.ceil(on_fallback / min(f["pods_per_node"] for f in fallback))
    assert packed < math.ceil(on_fallback / by_pool["kwok-cx22"]["pods_per_node"])  # the two can be told apart
    assert fallback_ready <= packed, by_pool
    # Every pod waited for its decision within the run (latencies measured on the same clock).
    assert summary["decision_latency_p99_s"] <= summary["seconds_to_all_running"]
    # The worker's Prometheus endpoint agrees with the cluster: one scale-up per node created, one
    # failed scale-up per attempt that did not end Ready (the preferred pool out of capacity).
    metrics = summary["metrics"]
    assert metrics["growth_scaled_up_nodes_total"] == summary["nodes_created"]
    failed = sum(n for results in summary["attempts"].values() for r, n in results.items() if r != "Ready")
    assert metrics["growth_failed_scale_ups_total"] == failed >= 1
    assert metrics["growth_node_request_duration_seconds_count"] == sum(summary["requests"].values())
    assert metrics["growth_loop_duration_seconds_count"] >= 1


async def start_autoscaler(lc: LocalCluster, cluster: str, **settings):  # noqa: ANN201
    temporal = await lc.temporal.client()
    base = dict(cluster=cluster, scan_interval_s=1, readiness_timeout_s=60, readiness_poll_s=0.5, request_ttl_s=60)
    handle = await temporal.start_workflow(
        NodeAutoscalerWorkflow.run,
        AutoscalerInput(settings=AutoscalerSettings(**{**base, **settings})),
        id=autoscaler_id(cluster),
        task_queue=lc.task_queue,
    )
    return handle


def pods_running(api: client.ApiClient, app: str) -> int:
    pods = client.CoreV1Api(api).list_namespaced_pod("default", label_selector=f"app={app}").items
    return sum(1 for p in pods if p.status.phase == "Running")


async def all_running(
    lc: LocalCluster, handle: WorkflowHandle, app: str, count: int, what: str, timeout_s: float = 90
) -> AutoscalerStatus:
    """The loop's status once ``count`` pods of ``app`` run and no request is in flight."""

    async def settled() -> AutoscalerStatus | None:
        # Pods first (the truth), then the status: a status read before them may predate the
        # requests that made those pods' nodes (a loaded machine once answered from the first observation).
        if pods_running(lc.api, app) != count:
            return None
        s = await handle.query(NodeAutoscalerWorkflow.status)
        return None if s.in_flight else s

    return await until(settled, timeout_s, what)


def requested_and_used(api: client.ApiClient, app: str) -> tuple[set[str], set[str]]:
    """The nodes growth's requests made, and the nodes ``app``'s pods run on."""
    core = client.CoreV1Api(api)
    nodes = {n.metadata.name for n in core.list_node(label_selector=LABEL_REQUEST).items}
    used = {p.spec.node_name for p in core.list_namespaced_pod("default", label_selector=f"app={app}").items}
    return nodes, used


async def test_worker_killed_mid_provisioning_finishes_without_a_second_node(local_cluster) -> None:  # noqa: ANN001
    lc: LocalCluster = local_cluster({"kwok": {}}, ["--node-ready-delay", "6"])
    apply_node_group(lc.api, node_group("general", [{"provider": "kwok", "serverType": ["cx22"], "priority": 10}]))
    handle = await start_autoscaler(lc, "crash")
    apps = client.AppsV1Api(lc.api)
    apps.create_namespaced_deployment("default", deployment("web", 6, cpu="500m", memory="256Mi"))

    async def provisioning() -> AutoscalerStatus | None:
        s = await handle.query(NodeAutoscalerWorkflow.status)
        return s if any(r.phase == RequestPhase.PROVISIONING for r in s.in_flight) else None

    before = await until(provisioning, 60, "a NodeRequest in Provisioning")
    lc.worker.kill()  # SIGKILL mid-provisioning: no clean shutdown
    assert not lc.worker.alive()
    lc.restart_worker("worker-2")

    status = await all_running(lc, handle, "web", 6, "all pods running after the worker restart")
    nodes = client.CoreV1Api(lc.api).list_node(label_selector=LABEL_REQUEST).items
    per_request = Counter(n.metadata.labels[LABEL_REQUEST] for n in nodes)
    assert per_request and set(per_request.values()) == {1}, per_request  # one node per request
    assert len(nodes) == status.requests_by_phase.get("Ready") == status.nodes_created
    killed_ids = {r.id for r in before.in_flight}
    assert killed_ids <= {r.id for r in status.recent if r.phase == RequestPhase.READY}
    await handle.terminate()


async def test_a_node_ready_before_its_not_ready_taint_goes_is_bought_once(local_cluster) -> None:  # noqa: ANN001
    """The kubelet reports Ready; the node lifecycle controller lifts node.kubernetes.io/not-ready a
    while later (4 s here) and only then does the scheduler place pods there. Counted Ready in that
    window, a request left the in-flight count while its pods still waited, and the loop bought for
    them again (with a 1 s window the sim's e2e scale-ups bought up to twice the nodes)."""
    lc: LocalCluster = local_cluster({"kwok": {}}, ["--node-ready-delay", "1", "--node-taint-lag", "4"])
    apply_node_group(lc.api, node_group("general", [{"provider": "kwok", "serverType": ["cx22"], "priority": 10}]))
    handle = await start_autoscaler(lc, "lag")
    client.AppsV1Api(lc.api).create_namespaced_deployment("default", deployment("web", 6, cpu="500m", memory="256Mi"))

    status = await all_running(lc, handle, "web", 6, "all pods running")
    nodes, used = requested_and_used(lc.api, "web")
    # A cx22 holds three of these pods (1930m allocatable): two nodes, each holding some.
    assert len(nodes) == status.nodes_created == 2 and used == nodes, (nodes, used)
    await handle.terminate()


CA_STARTUP_TAINT = "startup-taint.cluster-autoscaler.kubernetes.io/cni"  # Cluster Autoscaler's prefix
CILIUM_TAINT = "node.cilium.io/agent-not-ready"  # any key, declared in the group's startupTaints


async def lift_startup_taint_after(api: client.ApiClient, key: str, delay_s: float, stop: asyncio.Event) -> None:
    """What a CNI's agent does: lift the node's startup taint ``key`` once it runs there, here
    ``delay_s`` after the node turned Ready."""
    core = client.CoreV1Api(api)
    ready_at: dict[str, float] = {}
    loop = asyncio.get_running_loop()
    while not stop.is_set():
        for n in (await asyncio.to_thread(core.list_node)).items:
            taints = n.spec.taints or []
            if not any(t.key == key for t in taints):
                continue
            if not any(c.type == "Ready" and c.status == "True" for c in n.status.conditions or []):
                continue
            if loop.time() - ready_at.setdefault(n.metadata.name, loop.time()) < delay_s:
                continue
            kept = [{"key": t.key, "value": t.value, "effect": t.effect} for t in taints if t.key != key]
            body = {"metadata": {"resourceVersion": n.metadata.resource_version}, "spec": {"taints": kept}}
            try:
                await asyncio.to_thread(core.patch_node, n.metadata.name, body)
            except client.ApiException as e:
                if e.status != 409:  # a conflict: the next round reads it again
                    raise
        await asyncio.sleep(0.2)


@pytest.mark.parametrize(
    ("key", "spec_field"),
    [(CA_STARTUP_TAINT, "taints"), (CILIUM_TAINT, "startupTaints")],
    ids=["prefix", "startupTaints"],
)
async def test_a_node_with_a_startup_taint_is_bought_once_and_planned_without_it(
    local_cluster, key, spec_field
) -> None:  # noqa: ANN001
    """The group registers its nodes with a CNI's startup taint, which the CNI lifts 4 s after a node is
    Ready: under Cluster Autoscaler's prefix among its taints, or under any key in its startupTaints
    (Karpenter's field). The pods do not tolerate it, yet the group serves them (its planned nodes are
    read without it), and a node still carrying it is not Ready: its request stays in flight and
    nothing is bought twice."""
    lc: LocalCluster = local_cluster({"kwok": {}}, ["--node-ready-delay", "1"])
    pools = [{"provider": "kwok", "serverType": ["cx22"], "priority": 10}]
    startup = [{"key": key, "value": "true", "effect": "NoSchedule"}]
    apply_node_group(lc.api, node_group("general", pools, **{spec_field: startup}))
    stop = asyncio.Event()
    agent = asyncio.create_task(lift_startup_taint_after(lc.api, key, 4.0, stop))
    handle = await start_autoscaler(lc, "startup")
    client.AppsV1Api(lc.api).create_namespaced_deployment("default", deployment("web", 6, cpu="500m", memory="256Mi"))

    try:
        status = await all_running(lc, handle, "web", 6, "all pods running")
    finally:
        stop.set()
        await agent
    nodes, used = requested_and_used(lc.api, "web")
    assert len(nodes) == status.nodes_created == 2 and used == nodes, (nodes, used)
    await handle.terminate()


async def test_never_satisfiable_pod_is_reported_and_others_served(local_cluster) -> None:  # noqa: ANN001
    lc: LocalCluster = local_cluster()
    apply_node_group(
        lc.api, node_group("general", [{"provider": "kwok", "serverType": ["cx22", "cx32"], "priority": 10}])
    )
    # A broken group is refused with the field named on its status; the good group keeps working.
    apply_node_group(lc.api, node_group("broken", [{"provider": "kwok", "serverType": ["cx22"], "priority": -1}]))
    handle = await start_autoscaler(lc, "huge")
    apps = client.AppsV1Api(lc.api)
    apps.create_namespaced_deployment("default", deployment("huge", 1, cpu="500", memory="1Gi"))
    apps.create_namespaced_deployment("default", deployment("small", 3, cpu="200m", memory="128Mi"))

    async def settled() -> AutoscalerStatus | None:
        # Pods first (the truth), then the status: a status read before them may be stale.
        if pods_running(lc.api, "small") != 3:
            return None
        s = await handle.query(NodeAutoscalerWorkflow.status)
        return s if s.never_satisfiable and not s.in_flight else None

    status = await until(settled, 60, "small pods running and the huge pod reported")
    core = client.CoreV1Api(lc.api)
    huge = core.list_namespaced_pod("default", label_selector="app=huge").items[0]
    assert huge.status.phase == "Pending"
    assert [p.uid for p in status.never_satisfiable] == [huge.metadata.uid]
    events = core.list_namespaced_event("default", field_selector=f"involvedObject.name={huge.metadata.name}").items
    assert [e.reason for e in events if e.reason == "NotTriggerScaleUp"] == ["NotTriggerScaleUp"]
    # It is not retried every loop: a few more loops add no request.
    requests_then = sum(status.requests_by_phase.values())
    iterations_then = status.iterations

    async def later() -> AutoscalerStatus | None:
        s = await handle.query(NodeAutoscalerWorkflow.status)
        return s if s.iterations >= iterations_then + 3 else None

    status = await until(later, 60, "three more loops")
    assert sum(status.requests_by_phase.values()) == requests_then
    broken = client.CustomObjectsApi(lc.api).get_cluster_custom_object(
        CRD_GROUP, CRD_VERSION, "nodegroupswithpriority", "broken"
    )
    assert broken["status"]["valid"] is False and "priority" in broken["status"]["field"]
    assert [p.name for p in status.invalid_groups] == ["broken"]
    # The worker's Prometheus endpoint tells the same story (labelled by cluster), next to the SDK's metrics.
    samples = await asyncio.to_thread(fetch, lc.metrics_url)
    assert value(samples, "growth_scaled_up_nodes_total", cluster="huge") == status.nodes_created >= 1
    assert value(samples, "growth_nodes_count", cluster="huge") == status.nodes_created
    assert value(samples, "growth_unschedulable_pods_count", cluster="huge") == 1  # the huge pod
    assert value(samples, "growth_loop_duration_seconds_count", cluster="huge") >= 3  # the loops waited for above
    assert any(name.startswith("temporal_") for name, _, _ in samples)
    await handle.terminate()


async def test_zone_spread_gets_its_nodes_in_every_zone(local_cluster) -> None:  # noqa: ANN001
    """A Deployment spread over zones (DoNotSchedule, maxSkew 1): growth plans its nodes zone by
    zone, so the scheduler can place every pod; all in one zone would leave half pending."""
    lc: LocalCluster = local_cluster()
    pools = [{"provider": "kwok", "serverType": ["cx22"], "priority": 10, "config": {"zone": z}} for z in ("za", "zb")]
    apply_node_group(lc.api, node_group("zoned", pools))
    handle = await start_autoscaler(lc, "zones")
    spread = {
        "maxSkew": 1,
        "topologyKey": LABEL_ZONE,
        "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchLabels": {"app": "spread"}},
    }
    # 1.5 cores: one pod per cx22 node.
    web = deployment("spread", 4, cpu="1500m", memory="256Mi", topologySpreadConstraints=[spread])
    client.AppsV1Api(lc.api).create_namespaced_deployment("default", web)

    status = await all_running(lc, handle, "spread", 4, "every spread pod running", timeout_s=120)
    core = client.CoreV1Api(lc.api)
    zone_of = {
        n.metadata.name: n.metadata.labels[LABEL_ZONE] for n in core.list_node(label_selector=LABEL_REQUEST).items
    }
    pods = core.list_namespaced_pod("default", label_selector="app=spread").items
    assert Counter(zone_of[p.spec.node_name] for p in pods) == {"za": 2, "zb": 2}
    if not status.nodes_created == len(zone_of) == 4:
        # Seen once under CI load (7 nodes for 4 pods) and not reproduced in about 45 runs at load up
        # to 21: print what the next failure needs, whole (pytest cuts a long assertion message).
        for r in status.recent:
            print(r.id, r.current_pool, r.pods, r.phase.value, r.node_name, r.started_at, r.finished_at)
        print(await loop_digest(handle))
    assert status.nodes_created == len(zone_of) == 4
    assert {r.current_pool for r in status.recent} == {"kwok-cx22-za", "kwok-cx22-zb"}
    await handle.terminate()


async def loop_digest(handle: WorkflowHandle) -> str:
    """The loop's history as one line per event that decides scale-up: its observations (pods
    pending and nodes, cut), the batches it started and the reports it took, with their times."""
    lines = []
    async for e in handle.fetch_history_events():
        at = e.event_time.ToDatetime().time()
        if e.HasField("workflow_execution_signaled_event_attributes"):
            a = e.workflow_execution_signaled_event_attributes
            lines.append(f"{at} signal {a.signal_name} {[p.data.decode()[:800] for p in a.input.payloads]}")
        elif e.HasField("activity_task_scheduled_event_attributes"):
            a = e.activity_task_scheduled_event_attributes
            lines.append(f"{at} scheduled {a.activity_type.name} {[p.data.decode()[:800] for p in a.input.payloads]}")
        elif e.HasField("activity_task_completed_event_attributes"):
            a = e.activity_task_completed_event_attributes
            lines.append(f"{at} completed {[p.data.decode()[:1500] for p in a.result.payloads]}")
    return "\n".join(lines)


def test_interactive_demo_stops_what_it_started_on_ctrl_c(tmp_path: Path) -> None:
    import signal
    import time

    workdir = tmp_path / "interactive"

    def ours() -> list[str]:
        out = subprocess.run(["pgrep", "-f", str(workdir)], capture_output=True, text=True).stdout
        return out.split()

    demo = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "starters.demo",
            "--temporal-port",
            "0",
            "--ui-port",
            "0",
            "--workdir",
            str(workdir),
            "--pods",
            "3",
            "--scan-interval",
            "1",
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert demo.stdout is not None
        lines = []
        deadline = time.monotonic() + 120
        # Ctrl-C in the middle of the scenario, once the loop runs: the demo stops everything it
        # started while the loop is busy (the headless tests run scenarios to their end).
        for line in demo.stdout:
            lines.append(line)
            if "NodeAutoscaler started" in line or time.monotonic() > deadline:
                break
        assert "NodeAutoscaler started" in lines[-1], "".join(lines[-20:])
        assert "Web UI" in "".join(lines)
        started = set(ours()) - {str(demo.pid)}
        assert len(started) == 3  # dev server, simulated cluster, worker
        demo.send_signal(signal.SIGINT)
        assert demo.wait(30) == 0
        assert not set(ours()) & started
    finally:
        if demo.poll() is None:
            demo.kill()
