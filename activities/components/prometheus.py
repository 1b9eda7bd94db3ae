"""Prometheus over httpx: per-instance CPU usage and quota, and TiKV store sizes.

The queries are PD's autoscaling queries with a namespace matcher added (one Prometheus may
scrape several clusters): CPU used over the window from `tikv_thread_cpu_seconds_total` or
`process_cpu_seconds_total{component="tidb"}`, quota from `tikv_server_cpu_cores_quota` /
`tidb_server_maxprocs`, storage from `tikv_store_size_bytes{type="capacity"|"available"}`.
Every value is keyed by the `instance` label, which tidb-operator's monitoring sets to the
pod name.

Any failure (connection, timeout, HTTP error, `status: error`, a malformed body) raises
MetricsUnavailable: the caller treats it as "no data", never as "no load".
"""

from __future__ import annotations

import math
from typing import Any

import httpx

USAGE_QUERY = {
    "tikv": "sum(increase(tikv_thread_cpu_seconds_total{{{match}}}[{window}s])) by (instance, kubernetes_namespace)",
    "tidb": 'sum(increase(process_cpu_seconds_total{{component="tidb",{match}}}[{window}s])) '
    "by (instance, kubernetes_namespace)",
}
QUOTA_QUERY = {
    "tikv": "sum(tikv_server_cpu_cores_quota{{{match}}}) by (instance)",
    "tidb": "sum(tidb_server_maxprocs{{{match}}}) by (instance)",
}
STORE_SIZE_QUERY = 'sum(tikv_store_size_bytes{{type="{kind}",{match}}}) by (instance)'


class MetricsUnavailable(Exception):
    """The metrics source could not answer; the message says why."""


def _label_value(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


class PrometheusClient:
    def __init__(
        self,
        base_url: str,
        *,
        timeout_s: float = 5.0,
        token: str | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.base_url = base_url.rstrip("/")
        self.http = httpx.Client(base_url=self.base_url, timeout=timeout_s, headers=headers, transport=transport)

    def close(self) -> None:
        self.http.close()

    def query(self, promql: str) -> dict[str, float]:
        """An instant query's vector as {instance: value}; samples without `instance` are dropped."""
        try:
            resp = self.http.get("/api/v1/query", params={"query": promql})
        except httpx.HTTPError as exc:
            raise MetricsUnavailable(f"Prometheus {self.base_url}: {type(exc).__name__}: {exc}") from None
        try:
            body: Any = resp.json()
        except ValueError:
            body = None
        if resp.status_code != 200 or not isinstance(body, dict) or body.get("status") != "success":
            detail = body.get("error") if isinstance(body, dict) else resp.text[:200]
            raise MetricsUnavailable(f"Prometheus {self.base_url}: HTTP {resp.status_code}: {detail}")
        data = body.get("data") or {}
        if data.get("resultType") != "vector":
            raise MetricsUnavailable(f"Prometheus answered {data.get('resultType')!r}, expected a vector")
        out: dict[str, float] = {}
        try:
            for sample in data.get("result") or []:
                instance = (sample.get("metric") or {}).get("instance")
                value = float(sample["value"][1])
                if instance and math.isfinite(value):
                    out[instance] = out.get(instance, 0.0) + value
        except (KeyError, IndexError, TypeError, ValueError) as exc:
            raise MetricsUnavailable(f"Prometheus answered a malformed sample: {exc!r}") from None
        return out

    def cpu_usage(self, namespace: str, component: str, window_s: int) -> dict[str, float]:
        """Cores in use per instance, averaged over the window."""
        match = f'kubernetes_namespace="{_label_value(namespace)}"'
        used = self.query(USAGE_QUERY[component].format(match=match, window=window_s))
        return {instance: seconds / window_s for instance, seconds in used.items()}

    def cpu_quota(self, namespace: str, component: str) -> dict[str, float]:
        """CPU quota per instance, in cores."""
        match = f'kubernetes_namespace="{_label_value(namespace)}"'
        return self.query(QUOTA_QUERY[component].format(match=match))

    def store_sizes(self, namespace: str) -> dict[str, tuple[float, float]]:
        """(capacity, used) bytes per TiKV instance; used = capacity - available."""
        match = f'kubernetes_namespace="{_label_value(namespace)}"'
        capacity = self.query(STORE_SIZE_QUERY.format(kind="capacity", match=match))
        available = self.query(STORE_SIZE_QUERY.format(kind="available", match=match))
        return {i: (capacity[i], max(0.0, capacity[i] - available[i])) for i in capacity if i in available}
