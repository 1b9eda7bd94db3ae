"""`make demo SCENARIO=fleet`: the fleet loop on the local default.

Starts the Temporal dev server, the fake OCM (sim.clouds.ocm), the worker with the fleet
activities and the agent API, and the fake data-plane agents (sim.fleet.agent, one per cluster
whose fleetshard addon the fake OCM reports ready); starts FleetAutoscaler `fleet/aws/us-east-1`
with short timers and runs `run_fleet_burst`. Headless: the last line is its JSON summary.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import secrets
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import yaml
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter

from scaling.fleet import contracts
from scaling.fleet.config import load_fleet_config
from scaling.fleet.lifecycle import ClusterTimeouts
from scaling.fleet.region import FleetAutoscalerInput, FleetAutoscalerSettings
from scaling.fleet.summaries import region_summary
from sim.fleet.agent import AgentFleet
from starters import monitoring, prometheus
from starters.processes import Processes, free_port, port_open, say
from starters.scenarios.fleet import demo_fleet_config, demo_region_limit, run_fleet_burst
from workflows.fleet.autoscaler import FleetAutoscalerWorkflow

PROVIDER, REGION = "aws", "us-east-1"
TASK_QUEUE = "growth"

# No Kubernetes in this scenario; the worker still builds its default cluster client at start,
# so it gets one that is never called.
UNUSED_KUBECONFIG = {
    "apiVersion": "v1",
    "kind": "Config",
    "clusters": [{"name": "none", "cluster": {"server": "https://127.0.0.1:1"}}],
    "users": [{"name": "none", "user": {}}],
    "contexts": [{"name": "none", "context": {"cluster": "none", "user": "none"}}],
    "current-context": "none",
}


def secret_file(path: Path) -> str:
    path.write_text(secrets.token_hex(24) + "\n")
    path.chmod(0o600)
    return str(path)


class FleetDemo:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.workdir = Path(args.workdir).resolve()
        self.procs = Processes(self.workdir)
        self.agents: AgentFleet | None = None
        self.prometheus_url: str | None = None
        # The agents' scan asks the fake OCM every 0.5 s: one client (a new one per call loaded the
        # CA bundle each time, ~40 ms of CPU).
        self.ocm_http = httpx.Client(timeout=5)

    def start_processes(self) -> None:
        a = self.args
        self.temporal_port, self.ui_url = self.procs.demo_temporal(self.workdir, a.temporal_port, a.ui_port)

        ocm_token = secrets.token_hex(16)
        (self.workdir / "ocm-token").write_text(ocm_token + "\n")
        ocm_port = free_port()
        say(f"starting the fake OCM on 127.0.0.1:{ocm_port}")
        ocm = self.procs.start(
            "fake-ocm",
            [sys.executable, "-m", "sim.clouds.ocm", "--port", str(ocm_port), "--token", ocm_token,
             "--pending", "1", "--installing", "2", "--uninstalling", "1", "--addon-install", "1"],
        )  # fmt: skip
        ocm.wait_for_line(r"fake OCM API at", 30)
        self.ocm_url = f"http://127.0.0.1:{ocm_port}"

        kubeconfig = self.workdir / "unused.kubeconfig"
        kubeconfig.write_text(yaml.safe_dump(UNUSED_KUBECONFIG))
        self.agent_api = f"127.0.0.1:{free_port()}"
        metrics_address = f"127.0.0.1:{free_port()}"
        if prometheus.binary() is not None:  # it scrapes the worker: the dashboard's fleet queries run on it
            say("starting prometheus: it scrapes the worker every second, with growth's alert rules")
            config = prometheus.scrape_config(None, metrics_address, monitoring.RULES)
            self.prometheus_url = prometheus.start(self.procs, self.workdir, config)
        config: dict[str, Any] = {
            "kubernetes": {"kubeconfig": str(kubeconfig)},
            "temporal": {"address": f"127.0.0.1:{self.temporal_port}", "task_queue": TASK_QUEUE},
            "observability": {
                "metrics_address": metrics_address,
                "health_address": f"127.0.0.1:{free_port()}",
            },  # fmt: skip
            "fleet": {
                "ocm": {"base_url": self.ocm_url, "token_file": str(self.workdir / "ocm-token"), "timeout_s": 10},
                "identity_provider": {"client_secret_file": secret_file(self.workdir / "idp-secret")},
                "agent_api": {"bind": self.agent_api, "token_secret_file": secret_file(self.workdir / "agent-secret")},
            },
        }
        self.config_path = self.workdir / "growth-fleet.yaml"
        self.config_path.write_text(yaml.safe_dump(config))
        say(f"starting the growth worker (fleet activities; agent API on http://{self.agent_api})")
        self.procs.worker(self.config_path)
        host, port = self.agent_api.rsplit(":", 1)
        deadline = time.monotonic() + 30
        while not port_open(int(port), host):
            if time.monotonic() > deadline:
                raise TimeoutError(f"the agent API is not listening on {self.agent_api}")
            time.sleep(0.1)
        say("starting the fake data-plane agents (one per cluster with fleetshard ready)")
        self.agents = AgentFleet(self.installations, interval_s=1.0, scan_s=0.5).start()

    def installations(self) -> list[dict[str, Any]]:
        resp = self.ocm_http.get(f"{self.ocm_url}/sim/v1/addons")
        resp.raise_for_status()
        return list(resp.json()["addons"])

    async def ocm_live_clusters(self) -> int:
        async with httpx.AsyncClient(timeout=5) as http:
            resp = await http.get(f"{self.ocm_url}/sim/v1/stats")
            resp.raise_for_status()
            return int(resp.json()["clusters_live"])

    async def start_loop(self, client: Client) -> None:
        """FleetAutoscaler for the demo region, with short timers (also bench/chaos_fleet.py)."""
        fleet_config = self.workdir / "fleet.yaml"
        instances = self.args.instances
        fleet_config.write_text(demo_fleet_config(PROVIDER, REGION, limit=demo_region_limit(instances)))
        settings = FleetAutoscalerSettings(
            provider=PROVIDER,
            region=REGION,
            scan_interval_s=1.0,
            use_search_attributes=True,  # the dev server has them registered: the Web UI's views filter on them
            recheck_delay_s=2.0,
            failure_backoff_s=30.0,
            flap_window_s=120.0,
            max_instances=max(FleetAutoscalerSettings.model_fields["max_instances"].default, instances),
            cluster_timeouts=ClusterTimeouts(
                provisioning_s=120, step_s=60, agent_s=60, deletion_s=120, poll_s=0.5
            ),  # fmt: skip
        )
        await client.start_workflow(
            FleetAutoscalerWorkflow.run,
            FleetAutoscalerInput(settings=settings, config=load_fleet_config(str(fleet_config))),
            id=contracts.autoscaler_workflow_id(PROVIDER, REGION),
            task_queue=TASK_QUEUE,
            static_summary=region_summary(settings),  # the Web UI's workflow list
        )
        say(f"FleetAutoscaler {contracts.autoscaler_workflow_id(PROVIDER, REGION)} started (see {self.ui_url})")

    async def run(self) -> int:
        try:
            self.start_processes()
            client = await Client.connect(f"127.0.0.1:{self.temporal_port}", data_converter=pydantic_data_converter)
            await self.start_loop(client)
            summary = await run_fleet_burst(
                client,
                PROVIDER,
                REGION,
                instances=self.args.instances,
                ocm_live_clusters=self.ocm_live_clusters,
                timeout_s=self.args.timeout,
                say=say,
            )
            if self.prometheus_url is not None:  # every fleet and worker panel returns a series
                summary["monitoring"] = await asyncio.to_thread(
                    monitoring.check_live, self.prometheus_url, {"fleet", "worker"}
                )
        except Exception as err:  # noqa: BLE001 - the demo reports any failure as its result
            say(f"demo failed: {err}")
            if self.args.headless:
                print(json.dumps({"scenario": "fleet", "error": str(err)}), flush=True)
                return 1
            raise
        if self.args.headless:
            print(json.dumps(summary), flush=True)
            return 0
        say(json.dumps(summary))
        say(f"done. Explore the Web UI at {self.ui_url}; Ctrl-C stops everything the demo started.")
        while True:
            await asyncio.sleep(3600)

    def stop(self) -> None:
        if self.agents is not None:
            self.agents.stop()
        self.ocm_http.close()
        self.procs.stop_all()
