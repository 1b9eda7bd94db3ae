"""Where the fleet loop's activities and agent API find OCM, the identity provider and the
agents' tokens. Secrets are never here: only the names of environment variables or files that
hold them, read when they are needed (so a rotated secret is picked up).

    fleet:
      ocm: {base_url: https://api.openshift.com, token_file: /etc/growth/ocm-token}
      identity_provider: {client_id: kafka-sre, client_secret_file: /etc/growth/idp-secret, issuer: https://sso...}
      agent_api: {bind: 127.0.0.1:8000, public_url: https://growth.example.com, token_secret_file: /etc/growth/agent-secret}
"""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field


class OcmSettings(BaseModel):
    """The cluster provider: OCM's clusters_mgmt API and the bearer token for it."""

    model_config = ConfigDict(extra="forbid")

    base_url: str = "https://api.openshift.com"  # the client appends /api/clusters_mgmt/v1/...
    token_env: str = "OCM_TOKEN"
    token_file: str | None = None  # wins over token_env when set
    timeout_s: float = Field(default=30.0, gt=0)


class IdentityProviderSettings(BaseModel):
    """The OpenID identity provider growth adds to each cluster (its SRE login)."""

    model_config = ConfigDict(extra="forbid")

    client_id: str = "kafka-sre"
    client_secret_env: str = "GROWTH_IDP_CLIENT_SECRET"
    client_secret_file: str | None = None
    issuer: str = "https://sso.redhat.com/auth/realms/redhat-external"


class AgentApiSettings(BaseModel):
    """growth's agent API (what each data-plane cluster's agent reports to).

    Each cluster's agent token is HMAC-SHA256(secret, cluster id): growth can hand a new
    cluster's token to its fleetshard addon without storing it, and a token is good for its own
    cluster only. `tokens_file` (YAML map cluster id -> token) adds fixed tokens for clusters
    growth did not create.

    Revoking: `revoked_clusters_file` (YAML list of cluster ids, read on each request) refuses
    every token of those clusters (403). Rotating the secret: put the new one where
    token_secret_* points and the old one where previous_token_secret_* points, with
    `previous_secret_until` (UTC) ending the overlap: until then a token made with either is
    good, so agents can be given their new token meanwhile (docs/operations.md)."""

    model_config = ConfigDict(extra="forbid")

    bind: str = "127.0.0.1:8000"
    public_url: str = ""  # the URL agents are given; "" = http://<bind>
    token_secret_env: str = "GROWTH_AGENT_TOKEN_SECRET"
    token_secret_file: str | None = None
    tokens_file: str | None = None
    revoked_clusters_file: str | None = None
    previous_token_secret_env: str = "GROWTH_AGENT_TOKEN_SECRET_PREVIOUS"
    previous_token_secret_file: str | None = None
    previous_secret_until: datetime | None = None  # None: the previous secret is not accepted
    temporal_timeout_s: float = Field(default=10.0, gt=0)  # one update or query

    def url(self) -> str:
        return (self.public_url or f"http://{self.bind}").rstrip("/")


class FleetSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    ocm: OcmSettings = Field(default_factory=OcmSettings)
    identity_provider: IdentityProviderSettings = Field(default_factory=IdentityProviderSettings)
    agent_api: AgentApiSettings = Field(default_factory=AgentApiSettings)
