"""The fleet loop's activities: OCM (clusters, machine pools, ingress DNS, identity provider,
cluster resources, addons) and the clean-up after a cluster is gone.

`build_activities(settings)` is all the worker needs from this package; the agent API that the
data-plane agents report to is served by `activities.fleet.agent_api`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # activities.settings imports this package's settings module: no cycle at runtime
    from activities.fleet.settings import FleetSettings
    from activities.settings import Settings


def build_activities(settings: Settings | FleetSettings) -> list[Any]:
    """Every fleet-loop activity, registered under the names in scaling/fleet/contracts.py."""
    from activities.fleet.ocm import OcmActivities
    from activities.fleet.settings import FleetSettings

    fleet = settings if isinstance(settings, FleetSettings) else getattr(settings, "fleet", None) or FleetSettings()
    return OcmActivities(fleet).all()
