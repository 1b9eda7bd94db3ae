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
    warn_missing_secrets(fleet)
    return OcmActivities(fleet).all()


def warn_missing_secrets(fleet: FleetSettings) -> None:
    """Say at start-up which secret is not there yet (it is read again on each use, so it may
    still arrive): otherwise the first cluster would find out at its identity-provider step."""
    import logging

    from activities.secrets import read_secret, secret_source

    needed = (
        ("OCM token", fleet.ocm.token_env, fleet.ocm.token_file),
        ("identity provider client secret", fleet.identity_provider.client_secret_env, fleet.identity_provider.client_secret_file),
        ("agent token secret", fleet.agent_api.token_secret_env, fleet.agent_api.token_secret_file),
    )  # fmt: skip
    for what, env, path in needed:
        if not read_secret(env, path):
            logging.getLogger("growth.fleet").warning("no %s in %s yet: the fleet steps that need it will fail", what, secret_source(env, path))  # fmt: skip
