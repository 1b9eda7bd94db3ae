"""Demo scenarios: each sets up node groups and a workload, drives it, and returns a summary."""

from __future__ import annotations

from starters.scenarios.base import Scenario
from starters.scenarios.burst import BurstScenario

SCENARIOS: dict[str, type[Scenario]] = {"burst": BurstScenario}

__all__ = ["SCENARIOS", "Scenario"]
