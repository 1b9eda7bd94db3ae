"""An external recommender, as tidb-operator queries it: `GET <endpoint>?name=&namespace=&type=`
answering {name, namespace, type, recommendedReplicas}. An answer about another cluster or
component is refused (tidb-operator checks the same). Failures raise RecommenderUnavailable.
"""

from __future__ import annotations

from typing import Any

import httpx


class RecommenderUnavailable(Exception):
    pass


def endpoint_url(endpoint: dict[str, Any]) -> str:
    """TidbClusterAutoScaler spec.<component>.external.endpoint {host, port, path} as a URL."""
    host, port, path = endpoint.get("host"), endpoint.get("port"), endpoint.get("path") or ""
    if not host or not port:
        raise RecommenderUnavailable(f"external endpoint needs host and port, got {endpoint!r}")
    if endpoint.get("tlsSecret"):
        # Client certificates from a Secret are not supported yet: refuse rather than go plain.
        raise RecommenderUnavailable("external endpoint tlsSecret is not supported by growth yet")
    return f"http://{host}:{int(port)}{path if path.startswith('/') or not path else '/' + path}"


def recommended_replicas(
    url: str,
    namespace: str,
    name: str,
    component: str,
    *,
    timeout_s: float = 5.0,
    transport: httpx.BaseTransport | None = None,
) -> int:
    params = {"name": name, "namespace": namespace, "type": component}
    try:
        with httpx.Client(timeout=timeout_s, transport=transport) as http:
            resp = http.get(url, params=params)
    except httpx.HTTPError as exc:
        raise RecommenderUnavailable(f"{url}: {type(exc).__name__}: {exc}") from None
    if resp.status_code != 200:
        raise RecommenderUnavailable(f"{url}: HTTP {resp.status_code}: {resp.text[:200]}")
    try:
        body = resp.json()
        echoed = (body["name"], body["namespace"], body["type"])
        replicas = int(body["recommendedReplicas"])
    except (ValueError, KeyError, TypeError) as exc:
        raise RecommenderUnavailable(f"{url}: malformed answer {resp.text[:200]!r}: {exc!r}") from None
    if echoed != (name, namespace, component):
        raise RecommenderUnavailable(f"{url} answered for {echoed}, expected {(name, namespace, component)}")
    if replicas < 0:
        raise RecommenderUnavailable(f"{url}: negative recommendedReplicas {replicas}")
    return replicas
