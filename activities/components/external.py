"""An external recommender, as tidb-operator queries it (pkg/autoscaler/autoscaler/query/
external.go): `GET <scheme>://<host>:<port><path>?name=&namespace=&type=` answering {name,
namespace, type, recommendedReplicas}. An answer about another cluster or component is refused
(tidb-operator checks the same). Failures raise RecommenderUnavailable.

With the endpoint's `tlsSecret` the scheme is https, and the Secret's `ca.crt` is the only root
trusted and `tls.crt`/`tls.key` the client certificate, as tidb-operator's
LoadTlsConfigFromSecret reads them. The Secret is read through the Kubernetes API inside the
activity; its bytes never enter workflow inputs, results or logs.
"""

from __future__ import annotations

import base64
import os
import ssl
import tempfile
from pathlib import Path
from typing import Any

import httpx

from activities.answers import MAX_RESULT_ANSWER_BYTES, BoundedTransport, quoted

SECRET_KEYS = ("ca.crt", "tls.crt", "tls.key")


class RecommenderUnavailable(Exception):
    pass


def endpoint_url(endpoint: dict[str, Any]) -> str:
    """TidbClusterAutoScaler spec.<component>.external.endpoint {host, port, path, tlsSecret?}
    as a URL: https when a tlsSecret is named, as tidb-operator does."""
    host, port, path = endpoint.get("host"), endpoint.get("port"), endpoint.get("path") or ""
    if not host or not port:
        raise RecommenderUnavailable(f"external endpoint needs host and port, got {endpoint!r}")
    scheme = "https" if endpoint.get("tlsSecret") else "http"
    return f"{scheme}://{host}:{int(port)}{path if path.startswith('/') or not path else '/' + path}"


def tls_context(secret_data: dict[str, str] | None, where: str) -> ssl.SSLContext:
    """An SSL context from a Secret's `data` (base64 values): ca.crt as the only trusted root,
    tls.crt + tls.key as the client certificate. Missing keys or bad PEM name the Secret."""
    if secret_data is None:
        raise RecommenderUnavailable(f"Secret {where} not found (the endpoint's tlsSecret)")
    data = secret_data
    missing = [k for k in SECRET_KEYS if not data.get(k)]
    if missing:
        raise RecommenderUnavailable(f"Secret {where} lacks {', '.join(missing)} (needs {', '.join(SECRET_KEYS)})")
    try:
        ca, cert, key = (base64.b64decode(data[k]) for k in SECRET_KEYS)
        ctx = ssl.create_default_context(cadata=ca.decode())
        # load_cert_chain reads files only: a private directory that lives just long enough.
        with tempfile.TemporaryDirectory(prefix="growth-rec-") as tmp:
            os.chmod(tmp, 0o700)
            cert_file, key_file = Path(tmp) / "tls.crt", Path(tmp) / "tls.key"
            cert_file.write_bytes(cert)
            key_file.write_bytes(key)
            ctx.load_cert_chain(cert_file, key_file)
    except (ValueError, ssl.SSLError, UnicodeDecodeError) as exc:
        raise RecommenderUnavailable(f"Secret {where}: unusable TLS material: {type(exc).__name__}") from None
    return ctx


def recommended_replicas(
    url: str,
    namespace: str,
    name: str,
    component: str,
    *,
    timeout_s: float = 5.0,
    transport: httpx.BaseTransport | None = None,
    verify: ssl.SSLContext | bool = True,
) -> int:
    params = {"name": name, "namespace": namespace, "type": component}
    try:
        bounded = BoundedTransport(transport, MAX_RESULT_ANSWER_BYTES, verify=verify)
        with httpx.Client(timeout=timeout_s, transport=bounded) as http:
            resp = http.get(url, params=params)
    except httpx.HTTPError as exc:
        raise RecommenderUnavailable(f"{url}: {type(exc).__name__}: {exc}") from None
    if resp.status_code != 200:
        raise RecommenderUnavailable(f"{url}: HTTP {resp.status_code}: {quoted(resp.text)}")
    try:
        body = resp.json()
        echoed = (body["name"], body["namespace"], body["type"])
        replicas = body["recommendedReplicas"]
        if type(replicas) is not int:  # tidb-operator's recommender answers a Go int32
            raise TypeError(f"recommendedReplicas: expected an integer, got {quoted(replicas)}")
    except (ValueError, KeyError, TypeError) as exc:
        raise RecommenderUnavailable(f"{url}: malformed answer {quoted(resp.text)!r}: {quoted(exc)}") from None
    if echoed != (name, namespace, component):
        raise RecommenderUnavailable(f"{url} answered for {quoted(echoed)}, expected {(name, namespace, component)}")
    if replicas < 0:
        raise RecommenderUnavailable(f"{url}: negative recommendedReplicas {replicas}")
    return replicas
