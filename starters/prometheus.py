"""A real Prometheus for the demos, the e2e tests and the benches, when its binary is on PATH.

The demo writes the scrape config: the sim's TiDB world through HTTP service discovery with
TidbMonitor's relabeling (sim/tidb/exposition.py), and the growth worker's /metrics, every second
on 127.0.0.1, with growth's alert rules (deploy/monitoring/) loaded. Without the binary the
caller says INSTALL_HINT and stays on the sim's own PromQL.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx
import yaml

from sim.tidb.exposition import SCRAPE_RELABEL
from starters.processes import Processes, free_port

INSTALL_HINT = "no `prometheus` on PATH: `apt-get install prometheus` (Debian/Ubuntu) installs it and promtool"
SCRAPE_INTERVAL = "1s"  # the demo's windows are seconds (cpu_window_s 5), not TidbMonitor's 15 s


def binary() -> str | None:
    return shutil.which("prometheus")


def version(path: str) -> str:
    """`prometheus 2.42.0` from `prometheus --version` (Debian adds `+ds`)."""
    out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30)
    m = re.search(r"version (\d+\.\d+\.\d+)", out.stdout + out.stderr)
    return f"prometheus {m.group(1)}" if m else "prometheus"


def scrape_config(
    tidb_url: str | None, worker_address: str | None, rules: Path | None = None, interval: str = SCRAPE_INTERVAL
) -> dict[str, Any]:
    jobs: list[dict[str, Any]] = []
    if tidb_url is not None:
        jobs.append(
            {
                "job_name": "tidb-cluster",
                "honor_labels": True,
                "http_sd_configs": [{"url": f"{tidb_url}/sim/v1/targets", "refresh_interval": interval}],
                "relabel_configs": SCRAPE_RELABEL,
            }
        )
    if worker_address is not None:
        jobs.append({"job_name": "growth", "static_configs": [{"targets": [worker_address]}]})
    config: dict[str, Any] = {
        "global": {"scrape_interval": interval, "evaluation_interval": interval},
        "scrape_configs": jobs,
    }
    if rules is not None:
        config["rule_files"] = [str(rules)]
    return config


def start(procs: Processes, workdir: Path, config: dict[str, Any], timeout_s: float = 60.0) -> str:
    """Start `prometheus` on a free loopback port with `config`; its URL once /-/ready answers."""
    path = binary()
    if path is None:
        raise RuntimeError(INSTALL_HINT)
    config_file = workdir / "prometheus.yml"
    config_file.write_text(yaml.safe_dump(config))
    data = workdir / "prometheus-data"
    shutil.rmtree(data, ignore_errors=True)
    for attempt in range(3):  # a parallel test may take the port between our probe and its bind
        port = free_port()
        proc = procs.start(
            f"prometheus-{attempt}" if attempt else "prometheus",
            [path, f"--config.file={config_file}", f"--storage.tsdb.path={data}",
             f"--web.listen-address=127.0.0.1:{port}", "--storage.tsdb.retention.time=1d", "--log.level=warn"],
        )  # fmt: skip
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + timeout_s
        with httpx.Client() as http:  # one for the wait: each new client loads the CA bundle (~40 ms of CPU)
            while proc.alive() and time.monotonic() < deadline:
                try:
                    if http.get(f"{url}/-/ready", timeout=2).status_code == 200:
                        return url
                except httpx.HTTPError:
                    pass
                time.sleep(0.1)
        if proc.alive():
            proc.stop()
            raise TimeoutError(f"prometheus not ready on {url}; see {proc.log_path}")
    raise RuntimeError(f"prometheus exited at start three times; see {workdir / 'logs'}")


def queries_served(url: str) -> int:
    """Instant and range queries this Prometheus has answered (its own http_requests_total)."""
    text = httpx.get(f"{url}/metrics", timeout=5).text
    total = 0.0
    for line in text.splitlines():
        m = re.match(r'prometheus_http_requests_total\{[^}]*handler="/api/v1/query(?:_range)?"[^}]*\} (\S+)', line)
        if m:
            total += float(m.group(1))
    return int(total)
