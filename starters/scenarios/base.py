"""What a node demo scenario is, and what it sees of the demo that runs it. The demo (starters/
demo.py) imports the scenarios; a scenario imports neither the demo nor the CLI: it reads the demo
through `Demo` below."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from kubernetes.client import ApiClient
    from temporalio.client import WorkflowHandle

    from scaling.nodes.status import AutoscalerStatus
    from starters.processes import Processes


class Demo(Protocol):
    """The running demo as a scenario reads it (starters.demo.Demo is one)."""

    api: ApiClient  # the simulated cluster
    gc_handle: WorkflowHandle  # the MachineGC workflow

    async def status(self) -> AutoscalerStatus: ...


class Scenario:
    name = "base"

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args

    def sim_args(self) -> list[str]:
        return ["--node-ready-delay", "2"]

    def start_extra(self, procs: Processes, workdir: Path, kube_url: str, kubeconfig: Path) -> dict[str, Any]:
        """Start anything else the scenario needs (a fake cloud); returns facts for providers()."""
        return {}

    def providers(self, workdir: Path, extra: dict[str, Any]) -> dict[str, dict[str, Any]]:
        raise NotImplementedError

    def node_groups(self) -> list[dict[str, Any]]:
        raise NotImplementedError

    async def run(self, demo: Demo) -> dict[str, Any]:
        raise NotImplementedError

    def stop(self) -> None:
        pass
