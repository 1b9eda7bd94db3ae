"""Where the components loop's activities find each TiDB cluster's metrics, PD and its own limits.

URLs are templates: `{namespace}` and `{cluster}` are the base TidbCluster's (a TidbMonitor's
Prometheus and a cluster's PD are per cluster on a real deployment). Secrets are never here:
a bearer token for Prometheus comes from the file named by `prometheus_token_file`.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class ComponentsSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    # Prometheus HTTP API base URL; None: no Prometheus, only PD or external sources work.
    prometheus_url: str | None = "http://{cluster}-prometheus.{namespace}:9090"
    prometheus_token_file: str | None = None
    # 0: each autoscaler's round queries Prometheus for its own namespace, as PD does. > 0: one
    # Prometheus serves many clusters; each query runs once over every namespace and its answer
    # serves all autoscalers for this many seconds (keep it well under the scan interval).
    prometheus_batch_s: float = Field(default=0.0, ge=0)
    # 0: each round lists every pod and node for the free room it checks scale-outs against. > 0:
    # that listing serves every autoscaler of the Kubernetes cluster for this many seconds.
    capacity_max_age_s: float = Field(default=0.0, ge=0)
    # PD's client URL (tidb-operator's Service <cluster>-pd on port 2379).
    pd_url: str = "http://{cluster}-pd.{namespace}:2379"
    # The window of the CPU usage query (PD's MetricsTimeDuration): at least two scrape intervals.
    cpu_window_s: int = Field(default=60, ge=1)
    http_timeout_s: float = Field(default=5.0, gt=0)
    # How long a graceful scale-in waits for a heterogeneous cluster's pods to go, per call.
    drain_poll_s: float = Field(default=2.0, gt=0)


def render(template: str, namespace: str, cluster: str) -> str:
    return template.format(namespace=namespace, cluster=cluster).rstrip("/")
