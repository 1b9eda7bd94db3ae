"""The demo stacks `make chaos` runs its faults on: start, stop and the restarts the faults need.

One home for what bench/chaos.py (node and Hetzner bursts), bench/chaos_fleet.py and
bench/chaos_components.py do to their processes: the Temporal dev server killed and started
again on its database and port, a killed worker replaced by a new one on the same config, the
workers' logs read for non-determinism, and a demo's processes started (its chatter kept off
stdout, which carries the JSON lines) and stopped whatever happens.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, Protocol

from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter

from starters.processes import Proc, Processes


def restart_dev_server(procs: Processes, db: Path, port: int) -> None:
    """SIGKILL the dev server and start it again on the same database file and port."""
    proc = next(p for p in reversed(procs.procs) if p.name == "temporal")
    proc.kill()
    procs.procs.remove(proc)
    procs.temporal(db, port=port, ui=False)


def worker_logs(procs: Processes) -> str:
    """Every worker's log so far, the dead ones' included."""
    return "\n".join(p.log_path.read_text() for p in procs.procs if p.name.startswith("worker"))


class _Demo(Protocol):
    procs: Processes
    workdir: Path
    temporal_port: int
    config_path: Path

    def start_processes(self) -> None: ...
    def stop(self) -> None: ...


class DemoRestarts:
    """For a demo's stack (FleetDemo, ComponentsDemo): one worker, replaced when a fault kills it."""

    procs: Processes
    workdir: Path
    temporal_port: int
    config_path: Path

    def worker(self) -> Proc:
        return next(p for p in reversed(self.procs.procs) if p.name.startswith("worker") and p.alive())

    def worker_by_pid(self, pid: int) -> str | None:
        return "worker" if self.worker().popen.pid == pid else None

    def replace_worker(self, name: str = "worker") -> None:
        """A Deployment would start a new pod for the dead one (same config, same ports)."""
        self.procs.worker(self.config_path, name=f"{name}-{len(self.procs.procs)}")

    def restart_temporal(self) -> None:
        restart_dev_server(self.procs, self.workdir / "temporal.db", self.temporal_port)

    def worker_logs(self) -> str:
        return worker_logs(self.procs)


@contextlib.asynccontextmanager
async def running(stack: _Demo) -> AsyncIterator[Client]:
    """The demo's processes started (their chatter on stderr), a client on its dev server; all
    stopped on the way out."""
    try:
        with contextlib.redirect_stdout(sys.stderr):
            await asyncio.to_thread(stack.start_processes)
        yield await Client.connect(f"127.0.0.1:{stack.temporal_port}", data_converter=pydantic_data_converter)
    finally:
        stack.stop()


def demo_args(workdir: Path, timeout: float, **more: Any) -> Any:
    """A demo's argparse namespace for a headless run on free ports in `workdir`."""
    return argparse.Namespace(
        workdir=str(workdir),
        temporal_port=None,
        ui_port=None,
        metrics_port=None,
        timeout=timeout,
        headless=True,
        **more,
    )
