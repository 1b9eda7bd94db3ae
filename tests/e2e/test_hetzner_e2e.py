"""End to end on Hetzner: dev server + simulated cluster + real worker (separate processes) and the
fake Hetzner API. A burst on seed 004's pools: the preferred CAX11 has no room in the first
location and only two machines in the second, so requests fall back across locations, then
pools; CX31 was removed by Hetzner, so only its pool is unusable (and reported). A server that
never joined the cluster is found and deleted by MachineGC. Exactly one server per Ready
request, none left over. Then the burst goes: every node's server is deleted but the one whose
node says scale-down-disabled, which stays, reported Blocked.

The node loop's half of the dashboard (deploy/monitoring/): with `prometheus` on PATH a real one
scrapes this worker, and every nodes and worker panel and alert returns a series at the end (the
components and fleet halves: tests/e2e/test_components_e2e.py, test_fleet_e2e.py)."""

from __future__ import annotations

import argparse
import asyncio
import uuid
import warnings
from pathlib import Path
from typing import Any

from kubernetes import client
from temporalio.service import RPCError

from activities.nodes.providers.hetzner import HetznerProvider
from scaling.kube.drain import ANNOTATION_SCALE_DOWN_DISABLED, SCALE_DOWN_DISABLED
from scaling.kube.labels import request_key
from scaling.nodes.contracts import CreateNodeInput
from scaling.nodes.models import CRD_GROUP, CRD_VERSION, LABEL_GROUP, Pool
from scaling.nodes.settings import AutoscalerSettings
from scaling.nodes.state import AutoscalerInput
from sim.clouds.hetzner import FakeHetzner
from starters import monitoring, prometheus
from starters.kube import apply_node_group, deployment
from starters.processes import Processes
from starters.scenarios.hetzner import HetznerBurstScenario, kubeconfig_endpoint
from tests.e2e.conftest import TemporalServer, attach_worker
from tests.polling import until
from workflows.nodes.autoscaler import NodeAutoscalerWorkflow, autoscaler_id
from workflows.nodes.machine_gc import MachineGCWorkflow, machine_gc_id

API_TOKEN = "e2e-hcloud-token"
JOIN = "e2e000.0123456789abcdef"
PODS = 12
SCALE_DOWN = {"unneededTime": "1s", "delayAfterAdd": "1s"}  # quick: the timers have tests of their own


async def test_hetzner_burst_falls_back_and_leaves_no_leaks(temporal_server: TemporalServer, tmp_path: Path) -> None:
    procs = Processes(tmp_path)
    cluster = f"hz{uuid.uuid4().hex[:6]}"
    hz: FakeHetzner | None = None
    handles: list[Any] = []
    temporal = await temporal_server.client()
    try:
        kubeconfig = tmp_path / "kubeconfig"
        procs.sim_cluster(kubeconfig, ["--node-ready-delay", "0.5"])
        server, kube_token = kubeconfig_endpoint(kubeconfig)
        hz = FakeHetzner(API_TOKEN, kube_url=server, kube_token=kube_token, join_token=JOIN, boot_delay_s=0.2).start()
        hz.set_capacity("cax11", "fsn1", 0)
        hz.set_capacity("cax11", "nbg1", 2)
        hz.set_capacity("cax11", "hel1", 0)
        hz.remove_server_type("cx31")

        secrets = tmp_path / "secrets"
        secrets.mkdir()
        (secrets / "hcloud-token").write_text(API_TOKEN)
        (secrets / "join-token").write_text(JOIN)
        (secrets / "wrong-join-token").write_text("bad000.0000000000000000")
        scenario = HetznerBurstScenario(argparse.Namespace(pods=PODS))
        extra = {
            "endpoint": hz.url,
            "token_file": str(secrets / "hcloud-token"),
            "join_token_file": str(secrets / "join-token"),
            "join_endpoint": server,
        }
        providers = scenario.providers(tmp_path, extra)
        lc = attach_worker(procs, tmp_path, temporal_server, kubeconfig, providers)
        api, task_queue = lc.api, lc.task_queue
        prometheus_url = None
        if prometheus.binary() is None:
            warnings.warn(f"the node loop's live dashboard check is skipped: {prometheus.INSTALL_HINT}", stacklevel=1)
        else:  # it scrapes the worker from the start, every second, with growth's alert rules
            worker_address = lc.metrics_url.removeprefix("http://").removesuffix("/metrics")
            config = prometheus.scrape_config(None, worker_address, monitoring.RULES)
            prometheus_url = prometheus.start(procs, tmp_path, config)
        for group in scenario.node_groups():
            apply_node_group(api, group)

        # A server growth created but lost track of: its join token is wrong, so it never
        # becomes a Node, and no NodeRequest of this cluster has its id.
        ghost_request = f"{autoscaler_id(cluster)}/request/ghost"
        rogue = HetznerProvider.from_settings(
            {**providers["hetzner"], "join_token_file": str(secrets / "wrong-join-token")}
        )
        ghost = await rogue.create_node(
            CreateNodeInput(
                cluster=cluster,
                request_id=ghost_request,
                attempt=0,
                pool=Pool(group="general", name="hetzner-cx33", provider="hetzner", server_type="cx33", priority=10),
            )
        )
        assert ghost.outcome == "created"

        handles.append(
            await temporal.start_workflow(
                NodeAutoscalerWorkflow.run,
                AutoscalerInput(
                    settings=AutoscalerSettings(
                        cluster=cluster,
                        scan_interval_s=1.0,
                        readiness_timeout_s=30,
                        readiness_poll_s=0.25,
                        request_ttl_s=60,
                        machine_gc_interval_s=1.0,
                        machine_gc_grace_s=3.0,
                    )
                ),
                id=autoscaler_id(cluster),
                task_queue=task_queue,
            )
        )
        gc = temporal.get_workflow_handle(machine_gc_id(cluster))  # the autoscaler's MachineGC child
        handles.append(gc)
        auto = handles[0]

        apps = client.AppsV1Api(api)
        core = client.CoreV1Api(api)
        await asyncio.to_thread(
            apps.create_namespaced_deployment, "default", deployment("burst", PODS, cpu="500m", memory="512Mi")
        )

        async def all_running() -> Any:
            pods = await asyncio.to_thread(core.list_namespaced_pod, "default", label_selector="app=burst")
            # Pods first (the truth), then the status: a status read before them may be stale.
            if sum(1 for p in pods.items if p.status.phase == "Running") != PODS:
                return None
            status = await auto.query(NodeAutoscalerWorkflow.status)
            return None if status.in_flight else status

        status = await until(all_running, 60, "every burst pod Running and no request in flight")

        async def ghost_collected() -> Any:
            s = await gc.query(MachineGCWorkflow.status)
            return s if s.state.collected_total >= 1 else None

        gc_status = await until(ghost_collected, 60, "the ghost server collected")

        # Fallback: CAX11 got its two nbg1 machines (fsn1 had none), then requests moved on.
        attempts = status.attempts_by_pool
        assert attempts["hetzner-cax11"]["Ready"] == 2
        assert attempts["hetzner-cax11"]["InsufficientCapacity"] >= 1
        assert "hetzner-cx31" not in attempts  # removed type: never planned onto
        others = sum(v.get("Ready", 0) for k, v in attempts.items() if k != "hetzner-cax11")
        assert others >= 1
        servers = hz.servers()
        by_type: dict[str, set[str]] = {}
        for s in servers:
            by_type.setdefault(s["server_type"]["name"], set()).add(s["location"]["name"])
        assert by_type["cax11"] == {"nbg1"}

        # Exactly one server per Ready request, each backing its request's Node; nothing leaked.
        ready = [r for r in status.recent if r.phase.value == "Ready"]
        assert set(status.requests_by_phase) <= {"Ready", "Replanned"}
        assert status.requests_by_phase["Ready"] == len(ready)
        # A request that found no capacity handed its pods back without creating a server.
        for r in status.recent:
            if r.phase.value == "Replanned":
                assert r.attempts[-1].result.value == "InsufficientCapacity" and not r.provider_id
        assert sorted(f"hcloud://{s['id']}" for s in servers) == sorted(r.provider_id for r in ready)
        nodes = await asyncio.to_thread(core.list_node)
        node_ids = {n.spec.provider_id for n in nodes.items}
        assert {f"hcloud://{s['id']}" for s in servers} <= node_ids
        assert hz.stats()["created_total"] == len(ready) + 1  # + the ghost, now deleted

        [collected] = gc_status.state.collected
        assert collected.provider_id == ghost.provider_id
        assert collected.request == request_key(ghost_request)

        # The Event is reported by an activity after the status counts the deletion: await it.
        async def leak_event() -> Any:
            events = await asyncio.to_thread(core.list_namespaced_event, "default")
            return any(e.reason == "LeakedMachineDeleted" and ghost.provider_id in e.message for e in events.items)

        await until(leak_event, 60, "a LeakedMachineDeleted Event naming the ghost")

        # The removed type is reported on the group's status; the autoscaler kept working.
        group = await asyncio.to_thread(
            client.CustomObjectsApi(api).get_cluster_custom_object,
            CRD_GROUP,
            CRD_VERSION,
            "nodegroupswithpriority",
            "general",
        )
        unusable = {p["pool"]: p["reason"] for p in group["status"]["unusablePools"]}
        assert set(unusable) == {"hetzner-cx31"}

        # The burst goes. The group now scales down at once and is billed by the second (Hetzner's
        # default holds a node until its paid hour ends); one node says scale-down-disabled.
        kept = ready[0].node_name
        await asyncio.to_thread(
            core.patch_node, kept, {"metadata": {"annotations": {ANNOTATION_SCALE_DOWN_DISABLED: "true"}}}
        )
        pools = [{**p, "billing": {"period": "0"}} for p in group["spec"]["pools"]]
        await asyncio.to_thread(
            client.CustomObjectsApi(api).patch_cluster_custom_object,
            CRD_GROUP,
            CRD_VERSION,
            "nodegroupswithpriority",
            "general",
            {"spec": {"pools": pools, "scaleDown": SCALE_DOWN}},
        )
        await asyncio.to_thread(apps.delete_namespaced_deployment, "burst", "default")

        async def only_the_kept_node_left() -> Any:
            managed = await asyncio.to_thread(core.list_node, label_selector=LABEL_GROUP)
            if [n.metadata.name for n in managed.items] != [kept]:
                return None
            s = await auto.query(NodeAutoscalerWorkflow.status)
            held = [c for c in s.candidates if c.node == kept and c.state == "Blocked"]
            return s if held and not s.scale_downs else None

        down = await until(only_the_kept_node_left, 90, f"every node but {kept} removed, {kept} reported Blocked")
        assert [c.reason for c in down.candidates if c.node == kept] == [SCALE_DOWN_DISABLED]
        assert down.scale_down_by_phase["Removed"] == len(ready) - 1
        # Each removed node's server deleted once; the kept node's server stays.
        assert [f"hcloud://{s['id']}" for s in hz.servers()] == [r.provider_id for r in ready if r.node_name == kept]

        if prometheus_url is not None:
            # A real Prometheus scraped the worker through the burst, its fallbacks and the scale-down:
            # every nodes and worker panel and alert of deploy/monitoring/ returns a series.
            check = await asyncio.to_thread(monitoring.check_live, prometheus_url, {"nodes", "worker"})
            assert check["empty"] == [] and check["checked"] == len(monitoring.of({"nodes", "worker"})), check
            assert check["rules_loaded"] == len(monitoring.alerts()) and check["rules_unhealthy"] == [], check
    finally:
        for h in handles:
            try:
                await h.terminate()
            except RPCError:
                pass
        try:
            async for wf in temporal.list_workflows(
                f'WorkflowId STARTS_WITH "{autoscaler_id(cluster)}/request/" AND ExecutionStatus="Running"'
            ):
                await temporal.get_workflow_handle(wf.id).terminate()
        except RPCError:
            pass
        procs.stop_all()
        if hz is not None:
            hz.stop()
