"""`make demo`: the whole local default in one command.

Starts the Temporal dev server (Web UI on :8233, state in .growth/temporal.db), the simulated
cluster, and the worker; starts the NodeAutoscaler for cluster `demo`; runs a scenario and shows
its progress. Interactive: keeps everything running until Ctrl-C, then stops what it started.
--headless: exits 0 when the scenario is done, printing one JSON summary as its last line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import signal
import sys
import threading
from pathlib import Path
from typing import Any

import click
import yaml
from temporalio.client import Client, WorkflowHandle
from temporalio.contrib.pydantic import pydantic_data_converter

from activities.updates import query
from scaling.nodes.settings import AutoscalerSettings
from scaling.nodes.state import AutoscalerInput
from scaling.nodes.status import AutoscalerStatus
from scaling.nodes.summaries import autoscaler_summary
from starters.components_demo import ComponentsDemo
from starters.fleet_demo import FleetDemo
from starters.kube import apply_crds, apply_node_group, kube_client
from starters.metrics import fetch, totals
from starters.processes import Processes, free_port, fresh_sim_data_dir, say
from starters.scenarios import COMPONENTS, FLEET, SCENARIOS, Scenario
from workflows.nodes.autoscaler import NodeAutoscalerWorkflow, autoscaler_id
from workflows.nodes.machine_gc import machine_gc_id

CLUSTER = "demo"
TASK_QUEUE = "growth"


class Demo:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.workdir = Path(args.workdir).resolve()
        self.procs = Processes(self.workdir)
        self.scenario: Scenario = scenario_for(args)
        self.client: Client | None = None
        self.handle: WorkflowHandle | None = None

    # -- set-up ---------------------------------------------------------------------------
    def start_processes(self) -> None:
        a = self.args
        self.temporal_port, self.ui_url = self.procs.demo_temporal(self.workdir, a.temporal_port, a.ui_port)
        kubeconfig = self.workdir / "kubeconfig"
        say("starting the simulated cluster")
        # On disk (kill-safe, no fsync): a restart is the same cluster, and its Events outlive the run.
        _, self.kube_url = self.procs.sim_cluster(
            kubeconfig, [*self.scenario.sim_args(), "--no-fsync"], data_dir=fresh_sim_data_dir(self.workdir)
        )
        self.kubeconfig = kubeconfig
        self.extra = self.scenario.start_extra(self.procs, self.workdir, self.kube_url, kubeconfig)
        self.metrics_address = f"127.0.0.1:{a.metrics_port or free_port()}"
        config = {
            "kubernetes": {"kubeconfig": str(kubeconfig)},
            "temporal": {"address": f"127.0.0.1:{self.temporal_port}", "task_queue": TASK_QUEUE},
            "observability": {"metrics_address": self.metrics_address, "health_address": f"127.0.0.1:{free_port()}"},
            "providers": self.scenario.providers(self.workdir, self.extra),
        }
        self.config_path = self.workdir / "growth.yaml"
        self.config_path.write_text(yaml.safe_dump(config))
        say(f"starting the growth worker (metrics: http://{self.metrics_address}/metrics)")
        self.procs.worker(self.config_path)

    async def start_autoscaler(self) -> None:
        self.api = kube_client(self.kubeconfig)
        apply_crds(self.api)
        for group in self.scenario.node_groups():
            apply_node_group(self.api, group)
        self.client = await Client.connect(f"127.0.0.1:{self.temporal_port}", data_converter=pydantic_data_converter)
        settings = AutoscalerSettings(
            cluster=CLUSTER,
            scan_interval_s=self.args.scan_interval,
            readiness_timeout_s=60,
            readiness_poll_s=0.5,
            request_ttl_s=600,
            use_search_attributes=True,
            machine_gc_interval_s=10,
            machine_gc_grace_s=90,
        )
        self.handle = await self.client.start_workflow(
            NodeAutoscalerWorkflow.run,
            AutoscalerInput(settings=settings),
            id=autoscaler_id(CLUSTER),
            task_queue=TASK_QUEUE,
            static_summary=autoscaler_summary(settings),  # the Web UI's workflow list
        )
        say(f"NodeAutoscaler started: workflow {autoscaler_id(CLUSTER)} (see {self.ui_url})")
        # The loop starts MachineGC (machines no Node or NodeRequest accounts for) as its child.
        self.gc_handle = self.client.get_workflow_handle(machine_gc_id(CLUSTER))

    async def status(self) -> AutoscalerStatus:
        assert self.handle is not None
        return await query(self.handle, NodeAutoscalerWorkflow.status)

    # -- run --------------------------------------------------------------------------------
    async def run(self) -> int:
        try:
            self.start_processes()
            await self.start_autoscaler()
            summary = await self.scenario.run(self)
            summary["metrics"] = await asyncio.to_thread(self.metrics)
        except Exception as err:  # noqa: BLE001 - the demo reports any failure as its result
            say(f"demo failed: {err}")
            if self.args.headless:
                print(json.dumps({"scenario": self.args.scenario, "error": str(err)}))
                return 1
            raise
        ok = summary.pop("_ok", True)
        if self.args.headless:
            print(json.dumps(summary), flush=True)
            return 0 if ok else 1
        say(json.dumps(summary))
        say(f"done. Explore the Web UI at {self.ui_url}; Ctrl-C stops everything the demo started.")
        while True:
            await asyncio.sleep(3600)

    def metrics(self) -> dict[str, float]:
        """growth's metrics as the worker's Prometheus endpoint shows them now, summed per name."""
        return totals(fetch(f"http://{self.metrics_address}/metrics"))

    def stop(self) -> None:
        self.scenario.stop()
        self.procs.stop_all()


def scenario_for(args: argparse.Namespace) -> Scenario:
    if args.provider == "hetzner" and args.scenario == "burst":
        from starters.scenarios.hetzner import HetznerBurstScenario

        return HetznerBurstScenario(args)
    return SCENARIOS[args.scenario](args)


EXAMPLES = """\b
Examples:
  growth demo --scenario burst --headless
  growth demo --scenario fleet --instances 60
  growth demo --provider hetzner --temporal-port 0 --ui-port 0

Exit codes: 0 done (or stopped with Ctrl-C), 1 the demo failed or timed out, 2 refused.
"""
PORT = click.IntRange(min=0)


@click.command("demo", epilog=EXAMPLES, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--scenario",
    type=click.Choice(sorted([*SCENARIOS, FLEET, COMPONENTS])),
    default="burst",
    show_default=True,
    help="what the demo runs",
)
@click.option("--provider", type=click.Choice(["kwok", "hetzner"]), default="kwok", show_default=True)
@click.option("--headless", is_flag=True, help="exit when done; the last line is a JSON summary")
@click.option("--pods", type=click.IntRange(min=1), default=40, show_default=True)
@click.option("--instances", type=click.IntRange(min=1), default=30, show_default=True, help="fleet: managed instances")
@click.option(
    "--timeout", type=click.FloatRange(min=0, min_open=True), default=240.0, show_default=True,
    help="headless: give up after this many seconds",
)  # fmt: skip
@click.option("--scan-interval", type=click.FloatRange(min=0, min_open=True), default=2.0, show_default=True)
@click.option("--temporal-port", type=PORT, default=7233, show_default=True, help="0 = any free port")
@click.option("--ui-port", type=PORT, default=8233, show_default=True, help="0 = any free port")
@click.option("--metrics-port", type=PORT, default=0, show_default=True, help="the worker's Prometheus port (0 = any)")
@click.option(
    "--metrics-source",
    type=click.Choice(["auto", "sim", "prometheus"]),
    default=None,
    help="components: a real Prometheus or the sim's PromQL (default GROWTH_METRICS_SOURCE, else auto)",
)
@click.option("--workdir", type=click.Path(file_okay=False), default=".growth", show_default=True)
def demo_command(**options: Any) -> None:
    """Run a demo on the local default: the Temporal dev server, the simulated world and the
    worker, then a scenario with its progress (interactive until Ctrl-C, or --headless)."""
    run(namespace(options))


def namespace(options: dict[str, Any]) -> argparse.Namespace:
    """The options as the demos and scenarios read them (a port of 0: any free one)."""
    args = argparse.Namespace(**options)
    args.temporal_port = args.temporal_port or None
    args.ui_port = args.ui_port or None
    return args


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    with demo_command.make_context("demo", list(argv or [])) as ctx:
        return namespace(ctx.params)


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def run(args: argparse.Namespace) -> None:
    # Ctrl-C and a plain `kill` both stop everything the demo started, even when the demo was
    # launched from a shell that ignores SIGINT for background jobs.
    if threading.current_thread() is threading.main_thread():  # (a test runs `growth demo` on a thread)
        signal.signal(signal.SIGINT, _interrupt)
        signal.signal(signal.SIGTERM, _interrupt)
    if shutil.which("temporal", path=str(Path(sys.executable).parent)) is None:
        raise SystemExit("the temporal CLI is missing from the virtualenv: run `make demo` (it installs it)")
    demo: Demo | FleetDemo | ComponentsDemo
    if args.scenario == FLEET:
        demo = FleetDemo(args)
    elif args.scenario == COMPONENTS:
        demo = ComponentsDemo(args)
    else:
        demo = Demo(args)
    code = 1
    try:
        code = asyncio.run(demo.run())
    except KeyboardInterrupt:
        say("stopping the processes the demo started")
        code = 0
    finally:
        demo.stop()
    sys.exit(code)


def main(argv: list[str] | None = None) -> None:
    """`python -m starters.demo` (make demo): `growth demo` without the rest of the CLI."""
    demo_command.main(argv, prog_name="growth demo")


if __name__ == "__main__":
    main()
