"""Demo scenarios: each sets up node groups and a workload, drives it, and returns a summary."""

from __future__ import annotations

from starters.scenarios.base import Scenario
from starters.scenarios.burst import BurstScenario
from starters.scenarios.constraints import ConstraintsScenario
from starters.scenarios.scale_down import ScaleDownScenario
from starters.scenarios.storage import StorageScenario

# The fleet loop's scenario has no Kubernetes cluster: starters/fleet_demo.py runs it, not Demo.
FLEET = "fleet"
# The components loop's scenario runs no NodeAutoscaler: starters/components_demo.py runs it.
COMPONENTS = "components"

SCENARIOS: dict[str, type[Scenario]] = {
    "burst": BurstScenario,
    "constraints": ConstraintsScenario,
    "scale-down": ScaleDownScenario,
    "storage": StorageScenario,
}

__all__ = ["COMPONENTS", "FLEET", "SCENARIOS", "Scenario"]
