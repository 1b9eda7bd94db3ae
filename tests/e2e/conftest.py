"""End-to-end fixtures: the real Temporal dev server, the simulated cluster and the real worker,
each a separate process on 127.0.0.1 started exactly as the demo starts them."""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest
import yaml
from kubernetes import client

from starters.kube import apply_crds, kube_client
from starters.processes import Proc, Processes, free_port
from tests.conftest import TemporalServer

T = TypeVar("T")


@dataclass
class LocalCluster:
    """A simulated cluster with a growth worker attached to the shared dev server."""

    procs: Processes
    workdir: Path
    temporal: TemporalServer
    kubeconfig: Path
    config_path: Path
    task_queue: str
    api: client.ApiClient
    worker: Proc
    metrics_url: str  # the worker's Prometheus endpoint
    health_url: str  # the worker's probes: {health_url}/healthz, /readyz

    def restart_worker(self, name: str) -> Proc:
        self.worker = self.procs.worker(self.config_path, name=name)
        return self.worker

    async def start_autoscaler(self, prefix: str, **settings: Any) -> Any:
        """A NodeAutoscaler for this cluster (a name of ``prefix`` and the workdir's, unique per test),
        scanning every second; ``settings``: more of AutoscalerSettings. Its WorkflowHandle."""
        from scaling.nodes.settings import AutoscalerSettings
        from scaling.nodes.state import AutoscalerInput
        from workflows.nodes.autoscaler import NodeAutoscalerWorkflow, autoscaler_id

        cluster = f"{prefix}{self.workdir.name[-6:]}".lower().replace("_", "")
        temporal = await self.temporal.client()
        return await temporal.start_workflow(
            NodeAutoscalerWorkflow.run,
            AutoscalerInput(settings=AutoscalerSettings(cluster=cluster, scan_interval_s=1, **settings)),
            id=autoscaler_id(cluster),
            task_queue=self.task_queue,
        )


def attach_worker(
    procs: Processes, workdir: Path, temporal: TemporalServer, kubeconfig: Path, providers: dict[str, Any]
) -> LocalCluster:
    """Write the worker's settings for a running simulated cluster, start the worker, install the CRDs."""
    task_queue = f"growth-{workdir.name}"
    config_path = workdir / "growth.yaml"
    for attempt in range(1, 4):
        # Free ports: several workers (and other test runs on this machine) must not share 9464/9465.
        metrics, health = f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}"
        config_path.write_text(
            yaml.safe_dump(
                {
                    "kubernetes": {"kubeconfig": str(kubeconfig)},
                    "temporal": {"address": temporal.address, "task_queue": task_queue},
                    "observability": {"metrics_address": metrics, "health_address": health},
                    "providers": providers,
                }
            )
        )
        try:
            worker = procs.worker(config_path)
            break
        except RuntimeError:
            # It exited at start. A port probed free can be taken before the worker binds it
            # (other test runs share the machine): then pick again; any other exit is the test's.
            if attempt == 3 or not any(_taken(addr) for addr in (metrics, health)):
                raise
    api = kube_client(kubeconfig)
    apply_crds(api)
    return LocalCluster(
        procs,
        workdir,
        temporal,
        kubeconfig,
        config_path,
        task_queue,
        api,
        worker,
        metrics_url=f"http://{metrics}/metrics",
        health_url=f"http://{health}",
    )


def _taken(address: str) -> bool:
    host, port = address.rsplit(":", 1)
    with socket.socket() as s:
        try:
            s.bind((host, int(port)))
        except OSError:
            return True
    return False


def start_local_cluster(
    temporal: TemporalServer,
    workdir: Path,
    providers: dict[str, Any],
    sim_args: list[str] | None = None,
    sim_data_dir: Path | None = None,
) -> LocalCluster:
    procs = Processes(workdir)
    kubeconfig = workdir / "kubeconfig"
    try:
        procs.sim_cluster(kubeconfig, sim_args or ["--node-ready-delay", "1"], data_dir=sim_data_dir)
        return attach_worker(procs, workdir, temporal, kubeconfig, providers)
    except BaseException:
        procs.stop_all()  # the fixture stops only clusters that started: a failed start leaked its sim
        raise


@pytest.fixture
def local_cluster(temporal_server: TemporalServer, tmp_path: Path) -> Iterator[Callable[..., LocalCluster]]:
    started: list[LocalCluster] = []

    def _start(
        providers: dict[str, Any] | None = None, sim_args: list[str] | None = None, sim_data_dir: Path | None = None
    ) -> LocalCluster:
        lc = start_local_cluster(temporal_server, tmp_path, providers or {"kwok": {}}, sim_args, sim_data_dir)
        started.append(lc)
        return lc

    yield _start
    for lc in started:
        lc.procs.stop_all()
