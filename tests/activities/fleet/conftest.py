"""Fixtures: a fake OCM whose states move only when a test advances its clock, and the fleet
settings the worker would read (tokens in files, never in the settings themselves)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from activities.fleet.ocm import OcmActivities
from activities.fleet.settings import AgentApiSettings, FleetSettings, IdentityProviderSettings, OcmSettings
from sim.clouds.ocm import FakeOcm, Timings

OCM_TOKEN = "ocm-secret-token-value"
IDP_SECRET = "idp-secret-value"
AGENT_SECRET = "agent-hmac-secret"


@pytest.fixture
def ocm() -> Iterator[FakeOcm]:
    timings = Timings(pending_s=100, installing_s=100, uninstalling_s=100, addon_install_s=100)
    with FakeOcm(OCM_TOKEN, timings=timings) as sim:
        yield sim


@pytest.fixture
def fleet_settings(ocm: FakeOcm, tmp_path: Path) -> FleetSettings:
    (tmp_path / "ocm-token").write_text(OCM_TOKEN + "\n")
    (tmp_path / "idp-secret").write_text(IDP_SECRET)
    (tmp_path / "agent-secret").write_text(AGENT_SECRET)
    return FleetSettings(
        ocm=OcmSettings(base_url=ocm.url, token_file=str(tmp_path / "ocm-token"), timeout_s=5),
        identity_provider=IdentityProviderSettings(client_secret_file=str(tmp_path / "idp-secret")),
        agent_api=AgentApiSettings(
            public_url="http://127.0.0.1:9999", token_secret_file=str(tmp_path / "agent-secret")
        ),
    )


@pytest.fixture
async def acts(fleet_settings: FleetSettings) -> AsyncIterator[OcmActivities]:
    built = OcmActivities(fleet_settings)
    yield built
    await built.ocm.aclose()


@pytest.fixture
def settings(tmp_path: Path) -> AgentApiSettings:
    secret = tmp_path / "agent-secret"
    secret.write_text("test-secret\n")
    return AgentApiSettings(token_secret_file=str(secret))
