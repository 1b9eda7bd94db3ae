"""The node loop across an API server crash and a hang: the simulated cluster runs on a data
directory, is SIGKILLed and started again (same store, CA, token, URL), and later stopped with
SIGSTOP for a while and continued. growth must neither lose nor double a node."""

from __future__ import annotations

import asyncio
import signal
from collections import Counter
from pathlib import Path

from kubernetes import client

from scaling.nodes.models import LABEL_REQUEST, RequestPhase
from scaling.nodes.status import AutoscalerStatus
from starters.kube import apply_node_group, deployment, node_group
from tests.e2e.conftest import LocalCluster
from tests.e2e.test_scale_up_e2e import pods_running, start_autoscaler
from tests.polling import until
from workflows.nodes.autoscaler import NodeAutoscalerWorkflow

PAUSE_S = 8  # the fault itself: how long the API server hangs (not a wait for anything)


async def test_node_loop_survives_apiserver_kill_and_pause(local_cluster, tmp_path: Path) -> None:  # noqa: ANN001
    lc: LocalCluster = local_cluster({"kwok": {}}, ["--node-ready-delay", "3"], sim_data_dir=tmp_path / "sim-data")
    apply_node_group(lc.api, node_group("general", [{"provider": "kwok", "serverType": ["cx22"], "priority": 10}]))
    handle = await start_autoscaler(lc, "apisrv")
    apps = client.AppsV1Api(lc.api)
    apps.create_namespaced_deployment("default", deployment("web", 6, cpu="500m", memory="256Mi"))

    async def provisioning() -> AutoscalerStatus | None:
        s = await handle.query(NodeAutoscalerWorkflow.status)
        return s if any(r.phase == RequestPhase.PROVISIONING for r in s.in_flight) else None

    async def settled(replicas: int) -> AutoscalerStatus | None:
        s = await handle.query(NodeAutoscalerWorkflow.status)
        return s if pods_running(lc.api, "web") == replicas and not s.in_flight else None

    await until(provisioning, 60, "a NodeRequest in Provisioning")
    uids = {n.metadata.name: n.metadata.uid for n in client.CoreV1Api(lc.api).list_node().items}
    _, url = lc.procs.restart_sim_cluster(signal.SIGKILL)  # crash mid-provisioning
    assert url.endswith(str(lc.api.configuration.host.rsplit(":", 1)[1]))  # same address
    survived = {n.metadata.name: n.metadata.uid for n in client.CoreV1Api(lc.api).list_node().items}
    assert {n: survived.get(n) for n in uids} == uids  # same nodes, same uids
    await until(lambda: settled(6), 120, "all 6 pods running after the API server restart")

    apps.patch_namespaced_deployment_scale("web", "default", {"spec": {"replicas": 12}})
    await until(provisioning, 60, "a NodeRequest in Provisioning for the second wave")
    assert lc.procs.sim is not None
    lc.procs.sim.pause()  # the API server hangs: connections stay open, nothing answers
    try:
        await asyncio.sleep(PAUSE_S)
    finally:
        lc.procs.sim.resume()
    status = await until(lambda: settled(12), 120, "all 12 pods running after the API server hang")

    nodes = client.CoreV1Api(lc.api).list_node(label_selector=LABEL_REQUEST).items
    per_request = Counter(n.metadata.labels[LABEL_REQUEST] for n in nodes)
    assert per_request and set(per_request.values()) == {1}, per_request  # no request made two nodes
    assert len(nodes) == status.requests_by_phase.get("Ready") == status.nodes_created  # none lost
