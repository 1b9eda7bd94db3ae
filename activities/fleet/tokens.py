"""Per-cluster agent tokens: derived, verified in constant time, never stored or logged.

A cluster's token is HMAC-SHA256(secret, cluster id), so the fleetshard addon of a cluster
growth just created can be given its token without a store, and a token proves one cluster
only: the agent API checks that the token matches the cluster in the path.

Revocation is a list of cluster ids (settings.revoked_clusters_file); rotation accepts tokens
of the previous secret until settings.previous_secret_until (the overlap window)."""

from __future__ import annotations

import hashlib
import hmac
from datetime import UTC, datetime

import yaml

from activities.fleet.settings import AgentApiSettings
from activities.secrets import read_secret, secret_source

TOKEN_PREFIX = "gat_"  # recognisable in a leaked-secret scan


class AgentTokenError(RuntimeError):
    """No secret configured: no token can be made or checked."""


class AgentTokens:
    def __init__(self, settings: AgentApiSettings) -> None:
        self.settings = settings

    def _secret(self) -> bytes:
        s = self.settings
        secret = read_secret(s.token_secret_env, s.token_secret_file)
        if not secret:
            raise AgentTokenError(f"no agent token secret: set {secret_source(s.token_secret_env, s.token_secret_file)}")  # fmt: skip
        return secret.encode()

    def _previous_secret(self) -> bytes | None:
        """The rotated-out secret while its overlap window lasts, else None."""
        s = self.settings
        until = s.previous_secret_until
        if until is None:
            return None
        if (until if until.tzinfo else until.replace(tzinfo=UTC)) <= datetime.now(UTC):
            return None
        return read_secret(s.previous_token_secret_env, s.previous_token_secret_file).encode() or None

    def revoked(self, cluster_id: str) -> bool:
        """True when the cluster's tokens are revoked (listed in revoked_clusters_file)."""
        if not self.settings.revoked_clusters_file:
            return False
        try:
            with open(self.settings.revoked_clusters_file) as f:
                listed = yaml.safe_load(f) or []
        except FileNotFoundError:
            return False
        return cluster_id in {str(c) for c in listed}

    def _fixed(self) -> dict[str, str]:
        if not self.settings.tokens_file:
            return {}
        with open(self.settings.tokens_file) as f:
            data = yaml.safe_load(f) or {}
        return {str(k): str(v) for k, v in data.items()}

    def token_for(self, cluster_id: str) -> str:
        fixed = self._fixed().get(cluster_id)
        if fixed:
            return fixed
        return _derived(self._secret(), cluster_id)

    def verify(self, cluster_id: str, token: str) -> bool:
        """True when `token` is this cluster's token (and no other's), made with the current
        secret or, within the overlap window, the previous one. Revocation is checked apart."""
        if not token:
            return False
        try:
            expected = [self.token_for(cluster_id)]
        except AgentTokenError:
            return False
        previous = self._previous_secret()
        if previous:
            expected.append(_derived(previous, cluster_id))
        # every candidate compared, so the time taken says nothing about which one matched
        return any([hmac.compare_digest(e.encode(), token.encode()) for e in expected])


def _derived(secret: bytes, cluster_id: str) -> str:
    return TOKEN_PREFIX + hmac.new(secret, cluster_id.encode(), hashlib.sha256).hexdigest()
