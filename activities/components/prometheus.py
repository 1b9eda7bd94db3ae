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

from activities.answers import MAX_RESULT_ANSWER_BYTES, BoundedTransport, quoted
from activities.components.shared import SharedAnswers

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
        self.http = httpx.Client(
            base_url=self.base_url,
            timeout=timeout_s,
            headers=headers,
            transport=BoundedTransport(transport, MAX_RESULT_ANSWER_BYTES),
        )

    def close(self) -> None:
        self.http.close()

    def query(self, promql: str) -> dict[str, float]:
        """An instant query's vector as {instance: value}; samples without `instance` are dropped."""
        return {key[0]: value for key, value in self.query_by(promql, ("instance",)).items()}

    def query_by(self, promql: str, labels: tuple[str, ...]) -> dict[tuple[str, ...], float]:
        """An instant query's vector keyed by `labels`' values; samples missing one are dropped."""
        try:
            resp = self.http.get("/api/v1/query", params={"query": promql})
        except httpx.HTTPError as exc:
            raise MetricsUnavailable(f"Prometheus {self.base_url}: {type(exc).__name__}: {exc}") from None
        try:
            body: Any = resp.json()
        except ValueError:
            body = None
        if resp.status_code != 200 or not isinstance(body, dict) or body.get("status") != "success":
            detail = body.get("error") if isinstance(body, dict) else resp.text
            raise MetricsUnavailable(f"Prometheus {self.base_url}: HTTP {resp.status_code}: {quoted(detail)}")
        data = body.get("data")
        if not isinstance(data, dict) or data.get("resultType") != "vector":
            kind = data.get("resultType") if isinstance(data, dict) else data
            raise MetricsUnavailable(f"Prometheus answered {quoted(repr(kind))}, expected a vector")
        out: dict[tuple[str, ...], float] = {}
        try:
            for sample in data.get("result") or []:
                metric = sample.get("metric") or {}
                key = tuple(metric.get(label) or "" for label in labels)
                value = float(sample["value"][1])
                if all(key) and math.isfinite(value):
                    out[key] = out.get(key, 0.0) + value
        except (AttributeError, KeyError, IndexError, TypeError, ValueError) as exc:
            raise MetricsUnavailable(f"Prometheus answered a malformed sample: {quoted(repr(exc))}") from None
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


# Batched: one query per kind for every namespace, grouped by namespace and instance.
ALL_NAMESPACES = 'kubernetes_namespace!=""'
BY_NAMESPACE = ("kubernetes_namespace", "instance")
BATCH_QUOTA_QUERY = {
    k: q.replace("by (instance)", "by (instance, kubernetes_namespace)") for k, q in QUOTA_QUERY.items()
}
BATCH_STORE_SIZE_QUERY = STORE_SIZE_QUERY.replace("by (instance)", "by (instance, kubernetes_namespace)")


class BatchedPrometheus:
    """PrometheusClient's reads for many autoscalers sharing one Prometheus: each query runs once
    over every namespace and its answer serves every caller for `max_age_s` (concurrent callers
    wait for the one request in flight), so a round of N autoscalers costs a few queries, not 4 N.

    PD and tidb-operator query per cluster (one Prometheus per TidbMonitor); this is growth's own,
    for one worker serving a fleet. Answers are at most `max_age_s` old; failures are not kept."""

    def __init__(self, prom: PrometheusClient, max_age_s: float) -> None:
        self.prom = prom
        self.answers: SharedAnswers[dict[str, dict[str, float]]] = SharedAnswers(max_age_s)

    def close(self) -> None:
        self.prom.close()

    def _by_namespace(self, promql: str) -> dict[str, dict[str, float]]:
        # Grouped once per answer: each of the many callers then takes its own namespace's part
        # rather than walking every namespace's samples.
        grouped: dict[str, dict[str, float]] = {}
        for (ns, instance), value in self.prom.query_by(promql, BY_NAMESPACE).items():
            grouped.setdefault(ns, {})[instance] = value
        return grouped

    def _of(self, namespace: str, promql: str) -> dict[str, float]:
        return dict(self.answers.get(promql, lambda: self._by_namespace(promql)).get(namespace, {}))

    def cpu_usage(self, namespace: str, component: str, window_s: int) -> dict[str, float]:
        used = self._of(namespace, USAGE_QUERY[component].format(match=ALL_NAMESPACES, window=window_s))
        return {instance: seconds / window_s for instance, seconds in used.items()}

    def cpu_quota(self, namespace: str, component: str) -> dict[str, float]:
        return self._of(namespace, BATCH_QUOTA_QUERY[component].format(match=ALL_NAMESPACES))

    def store_sizes(self, namespace: str) -> dict[str, tuple[float, float]]:
        capacity = self._of(namespace, BATCH_STORE_SIZE_QUERY.format(kind="capacity", match=ALL_NAMESPACES))
        available = self._of(namespace, BATCH_STORE_SIZE_QUERY.format(kind="available", match=ALL_NAMESPACES))
        return {i: (capacity[i], max(0.0, capacity[i] - available[i])) for i in capacity if i in available}
