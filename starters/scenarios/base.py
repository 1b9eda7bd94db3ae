from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from starters.demo import Demo
    from starters.processes import Processes


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
