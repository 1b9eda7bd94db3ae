"""`make demo SCENARIO=components`: the components loop on the local default (seed 002: TiKV and
TiDB scale out when CPU or storage use passes the rule's max, and back in when CPU falls under its
min).

Starts the Temporal dev server, the simulated cluster with the sim's TiDB world in one process
(`python -m sim.tidb.world`: the TidbCluster controller, a fake Prometheus and a fake PD), and
the worker with `components:` settings pointing at those fakes; adds three big fake nodes, then
runs `run_components_scenario` with short intervals: it creates TidbCluster `tidb/basic` and
its TidbClusterAutoScaler (plus an invalid one), starts `components/tidb/basic` and drives the
load. Headless: the last line is its JSON summary.

Metrics source (`--metrics-source`, or GROWTH_METRICS_SOURCE): `prometheus` starts a real
Prometheus (starters/prometheus.py) that scrapes the sim's TiKV/TiDB exposition and the worker, and
growth queries it; `sim` keeps the sim's own PromQL; `auto` (the default) is `prometheus` when the
binary is on PATH. The summary's `metrics_source` says which ("prometheus 2.42.0" or "sim").
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

import yaml
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter

from starters import monitoring, prometheus
from starters.kube import kube_client
from starters.metrics import fetch, totals
from starters.processes import Processes, free_port, fresh_sim_data_dir, say
from starters.scenarios.components import add_nodes, run_components_scenario

TASK_QUEUE = "growth"
# Short enough that the headless run ends in well under a minute, long enough that the
# scenario's independent interval check (Event timestamps, whole seconds) tells rounds apart.
SCALE_OUT_S = 4
SCALE_IN_S = 5
CPU_WINDOW_S = 5  # the loop's CPU window: seconds, as the intervals are (five scrapes a second apart)


def metrics_source_wanted(args: argparse.Namespace) -> str:
    """`prometheus` or `sim`: the flag, else GROWTH_METRICS_SOURCE, else auto."""
    wanted = getattr(args, "metrics_source", None) or os.environ.get("GROWTH_METRICS_SOURCE") or "auto"
    if wanted not in ("auto", "sim", "prometheus"):
        raise SystemExit(f"metrics source {wanted!r}: one of auto, sim, prometheus")
    if wanted == "auto":
        if prometheus.binary() is not None:
            return "prometheus"
        say(f"the real-Prometheus tier is skipped: {prometheus.INSTALL_HINT}; using the sim's PromQL")
        return "sim"
    if wanted == "prometheus" and prometheus.binary() is None:
        raise SystemExit(prometheus.INSTALL_HINT)
    return wanted


class ComponentsDemo:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.workdir = Path(args.workdir).resolve()
        self.procs = Processes(self.workdir)
        self.prometheus_url: str | None = None  # the real Prometheus, when one runs
        self.metrics_source = "sim"
        self.source_url = ""  # the PromQL endpoint growth reads: the sim's or the real Prometheus

    def start_processes(self) -> None:
        a = self.args
        self.temporal_port, self.ui_url = self.procs.demo_temporal(self.workdir, a.temporal_port, a.ui_port)

        self.kubeconfig = self.workdir / "kubeconfig"
        say("starting the simulated cluster with the TiDB world (operator, fake Prometheus, fake PD)")
        world = self.procs.start(
            "sim-tidb-world",
            [sys.executable, "-m", "sim.tidb.world", "--kubeconfig", str(self.kubeconfig),
             "--node-ready-delay", "0.5", "--data-dir", str(fresh_sim_data_dir(self.workdir))],
        )  # fmt: skip
        self.world: dict[str, str] = json.loads(world.wait_for_line(r"sim tidb world ready: (\{.*\})", 30).group(1))
        self.control_url = self.world["control_url"].removesuffix("/sim/v1")

        self.metrics_address = f"127.0.0.1:{a.metrics_port or free_port()}"
        prometheus_url = self.world["prometheus_url"]
        source = metrics_source_wanted(a)
        binary = prometheus.binary()
        if binary is not None:  # it scrapes the worker for the dashboard's queries whichever source growth reads
            version = prometheus.version(binary)
            interval = getattr(a, "scrape_interval", None) or prometheus.SCRAPE_INTERVAL
            # The TiDB world's pods only when growth reads them there: a bench's thousand pods a
            # second would take the sim's core for series nobody queries.
            tidb_url = self.control_url if source == "prometheus" else None
            scraped = "the TiDB world's pods and the worker" if tidb_url else "the worker"
            say(f"starting {version}: it scrapes {scraped} every {interval}")
            config = prometheus.scrape_config(tidb_url, self.metrics_address, monitoring.RULES, interval)
            self.prometheus_url = prometheus.start(self.procs, self.workdir, config)
            if source == "prometheus":
                self.metrics_source, prometheus_url = version, self.prometheus_url
        self.source_url = prometheus_url
        config: dict[str, Any] = {
            "kubernetes": {"kubeconfig": str(self.kubeconfig)},
            "temporal": {"address": f"127.0.0.1:{self.temporal_port}", "task_queue": TASK_QUEUE},
            "observability": {"metrics_address": self.metrics_address, "health_address": f"127.0.0.1:{free_port()}"},
            "components": {
                "prometheus_url": prometheus_url,
                "pd_url": self.world["pd_url_template"],
                "cpu_window_s": CPU_WINDOW_S,
                "http_timeout_s": 5,
                "drain_poll_s": 0.5,
                **getattr(a, "components_settings", {}),  # bench.components_scale's overrides
            },
        }
        self.config_path = self.workdir / "growth-components.yaml"
        self.config_path.write_text(yaml.safe_dump(config))
        say(f"starting the growth worker (Prometheus {prometheus_url}, metrics http://{self.metrics_address}/metrics)")
        self.procs.worker(self.config_path)

    async def run(self) -> int:
        api = None
        try:
            self.start_processes()
            api = kube_client(self.kubeconfig)
            say("adding three 32-core fake nodes for the database")
            await asyncio.to_thread(add_nodes, api, 3, "32", "128Gi")
            client = await Client.connect(f"127.0.0.1:{self.temporal_port}", data_converter=pydantic_data_converter)
            say(
                "creating TidbCluster tidb/basic and TidbClusterAutoScalers tidb/basic and tidb/broken; "
                f"starting ComponentAutoscaler components/tidb/basic (see {self.ui_url})"
            )
            summary = await asyncio.wait_for(
                run_components_scenario(
                    client,
                    TASK_QUEUE,
                    api,
                    self.control_url,
                    scan_interval_s=self.args.scan_interval,
                    scale_out_s=SCALE_OUT_S,
                    scale_in_s=SCALE_IN_S,
                    phase_timeout_s=min(120.0, self.args.timeout),
                    progress=say,
                    source_url=self.source_url,
                    cpu_window_s=CPU_WINDOW_S,
                ),
                self.args.timeout,
            )
            url = f"http://{self.metrics_address}/metrics"
            summary["metrics"] = await asyncio.to_thread(lambda: totals(fetch(url)))
            summary["metrics_source"] = self.metrics_source
            if self.prometheus_url is not None:  # the dashboard's and alerts' queries, on what it scraped
                summary["monitoring"] = await asyncio.to_thread(
                    monitoring.check_live, self.prometheus_url, {"components", "worker"}
                )
        except Exception as err:  # noqa: BLE001 - the demo reports any failure as its result
            say(f"demo failed: {err!r}")
            if self.args.headless:
                print(json.dumps({"scenario": "components", "error": str(err) or repr(err)}), flush=True)
                return 1
            raise
        finally:
            if api is not None and self.args.headless:
                api.close()
        if self.args.headless:
            print(json.dumps(summary), flush=True)
            return 0
        say(json.dumps(summary))
        say(
            f"done. Explore the Web UI at {self.ui_url}; KUBECONFIG={self.kubeconfig} kubectl get "
            "tidbclusters,tidbclusterautoscalers -n tidb; Ctrl-C stops everything the demo started."
        )
        while True:
            await asyncio.sleep(3600)

    def stop(self) -> None:
        self.procs.stop_all()
