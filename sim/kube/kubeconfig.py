"""Where a cluster is and how to trust it, read from a kubeconfig: for the sim's own actors
(the Longhorn stand-in) that talk to the API server over HTTPS without the official client."""

from __future__ import annotations

import base64
import ssl
from dataclasses import dataclass
from pathlib import Path

import yaml


@dataclass(frozen=True)
class Endpoint:
    url: str
    token: str
    ca_pem: bytes | None = None  # None: the system's trust store

    def ssl_context(self) -> ssl.SSLContext:
        if self.ca_pem is None:
            return ssl.create_default_context()
        return ssl.create_default_context(cadata=self.ca_pem.decode())

    @classmethod
    def from_kubeconfig(cls, path: str | Path) -> Endpoint:
        """The current context's server, bearer token and CA."""
        cfg = yaml.safe_load(Path(path).read_text())
        ctx_name = cfg.get("current-context")
        contexts = {c["name"]: c["context"] for c in cfg.get("contexts") or []}
        ctx = contexts.get(ctx_name) or next(iter(contexts.values()), {})
        clusters = {c["name"]: c["cluster"] for c in cfg.get("clusters") or []}
        users = {u["name"]: u["user"] for u in cfg.get("users") or []}
        cluster = clusters.get(ctx.get("cluster")) or cfg["clusters"][0]["cluster"]
        user = users.get(ctx.get("user")) or cfg["users"][0]["user"]
        ca = cluster.get("certificate-authority-data")
        if ca:
            ca_pem: bytes | None = base64.b64decode(ca)
        elif cluster.get("certificate-authority"):
            ca_pem = Path(cluster["certificate-authority"]).read_bytes()
        else:
            ca_pem = None
        return cls(str(cluster["server"]), str(user.get("token", "")), ca_pem)
