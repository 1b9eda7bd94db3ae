"""Per-cluster agent tokens: derived, verified in constant time, never stored or logged.

A cluster's token is HMAC-SHA256(secret, cluster id), so the fleetshard addon of a cluster
growth just created can be given its token without a store, and a token proves one cluster
only: the agent API checks that the token matches the cluster in the path."""

from __future__ import annotations

import hashlib
import hmac

import yaml

from activities.fleet.settings import AgentApiSettings, read_secret, secret_source

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
        return TOKEN_PREFIX + hmac.new(self._secret(), cluster_id.encode(), hashlib.sha256).hexdigest()

    def verify(self, cluster_id: str, token: str) -> bool:
        """True when `token` is this cluster's token (and no other's)."""
        if not token:
            return False
        try:
            expected = self.token_for(cluster_id)
        except AgentTokenError:
            return False
        return hmac.compare_digest(expected.encode(), token.encode())
