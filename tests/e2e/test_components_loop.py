"""The components scenario end to end: the real dev server, the ComponentAutoscaler with the
real components activities, a simulated Kubernetes cluster and the sim's TiDB world (operator
stand-in, fake Prometheus and PD) over HTTP on 127.0.0.1. Real time: intervals of 8 s / 12 s."""

from __future__ import annotations

import json
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from kubernetes import client
from temporalio.worker import Worker

from activities.components import build_activities
from activities.components.settings import ComponentsSettings
from activities.kube.client import api_client
from activities.settings import KubeSettings, Settings
from sim.cluster import SimCluster
from sim.tidb.world import TidbWorld
from starters.scenarios.components import change_events, run_components_scenario
from tests.e2e.conftest import TemporalServer
from tests.sim.conftest import node_body, ready_nodes
from workflows.components import WORKFLOWS


async def test_components_scenario(temporal_server: TemporalServer, tmp_path: Path) -> None:
    with SimCluster(node_ready_delay=0.1, pod_start_delay=0.05, scheduler_interval=0.05) as sim:
        kubeconfig = sim.write_kubeconfig(tmp_path / "kubeconfig")
        api = api_client(KubeSettings(kubeconfig=str(kubeconfig)))
        core = client.CoreV1Api(api)
        for i in range(3):
            core.create_node(node_body(f"db-{i}", cpu="32", memory="128Gi"))
        ready_nodes(core, "db-0", "db-1", "db-2")
        with TidbWorld(sim.store, operator_interval=0.05) as world:
            settings = Settings(
                kubernetes=KubeSettings(kubeconfig=str(kubeconfig)),
                components=ComponentsSettings(
                    prometheus_url=world.prometheus_url, pd_url=world.pd_url_template, cpu_window_s=10, http_timeout_s=5
                ),
            )
            temporal = await temporal_server.client()
            tq = f"components-{uuid.uuid4().hex[:6]}"
            with ThreadPoolExecutor(max_workers=8) as executor:
                async with Worker(
                    temporal,
                    task_queue=tq,
                    workflows=WORKFLOWS,
                    activities=build_activities(settings),
                    activity_executor=executor,
                ):
                    summary = await run_components_scenario(temporal, tq, api, world.server.url)
                    # The violation count is over real Events: several change rounds were written.
                    assert len(change_events(core, "basic")) >= 4
                    custom = client.CustomObjectsApi(api)
                    broken = custom.get_namespaced_custom_object(
                        "pingcap.com", "v1alpha1", "tidb", "tidbclusterautoscalers", "broken"
                    )
                    (cond,) = broken["status"]["conditions"]
                    assert cond["status"] == "False" and "spec.tikv.rules.cpu.min_threshold" in cond["message"]
                    basic = custom.get_namespaced_custom_object(
                        "pingcap.com", "v1alpha1", "tidb", "tidbclusterautoscalers", "basic"
                    )
                    assert basic["status"]["conditions"][0]["status"] == "True"
                    assert basic["status"]["tikv"]["basic"]["lastAutoScalingTimestamp"]
                    for name in ("basic", "broken"):
                        await temporal.get_workflow_handle(f"components/tidb/{name}").terminate()
        api.close()
    print(json.dumps(summary))  # the demo's headless last line
    assert summary["scenario"] == "components"
    assert summary["homogeneous_scale_outs"] >= 1 and summary["storage_scale_outs"] >= 1
    assert summary["heterogeneous_created"] and all(n.startswith("auto-") for n in summary["heterogeneous_created"])
    assert summary["scale_ins"] >= 1
    assert summary["interval_violations"] == 0
    assert summary["invalid_specs_reported"] == 1


def test_interval_violations_counts_rounds_closer_than_the_interval() -> None:
    from datetime import UTC, datetime, timedelta

    from starters.scenarios.components import interval_violations

    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    ok = [
        (t0, "tikv", "ScaledOut"),
        (t0 + timedelta(seconds=1), "tikv", "ScaledIn"),  # one round
        (t0 + timedelta(seconds=9), "tikv", "ScaledOut"),
        (t0 + timedelta(seconds=22), "tikv", "ScaledIn"),
        (t0 + timedelta(seconds=5), "tidb", "ScaledOut"),
    ]
    assert interval_violations(ok, 8, 12) == 0
    bad = [(t0, "tikv", "ScaledOut"), (t0 + timedelta(seconds=4), "tikv", "ScaledIn")]
    assert interval_violations(bad, 8, 12) == 1
