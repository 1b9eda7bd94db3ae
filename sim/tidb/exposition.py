"""The TiDB world's instances as a real Prometheus sees them: scrape targets and exposition text.

A real TidbMonitor discovers pods (kubernetes_sd, role pod) and relabels: the pod name becomes
`instance`, its namespace `kubernetes_namespace`, its `app.kubernetes.io/component` label
`component`, its `app.kubernetes.io/instance` label `cluster`. Nothing of that is in the exposition
itself: TiKV's /metrics carries per-thread `tikv_thread_cpu_seconds_total{name, tid}`, TiDB's the
Go client's `process_cpu_seconds_total`. So the sim answers both halves the same way:

- `targets(...)` is Prometheus's HTTP service discovery document (`http_sd_configs`): one target
  per running instance with the `__meta_kubernetes_*` labels kubernetes_sd would give and
  `__metrics_path__` naming the pod; `SCRAPE_RELABEL` is TidbMonitor's relabeling of them;
- `exposition(inst)` is that pod's /metrics in the text format (version 0.0.4).

Counters are the load model's cumulative CPU seconds, split over TiKV's threads in fixed shares,
so `sum(increase(tikv_thread_cpu_seconds_total[w])) by (instance)` is the instance's CPU seconds.
"""

from __future__ import annotations

import zlib
from typing import Any

from sim.tidb.load import Instance
from sim.tidb.pd import reported_quota

# TiKV's busiest thread pools and their share of its CPU (the names TiKV gives its threads).
TIKV_THREADS = (("grpc-server-0", 0.3), ("raftstore-0", 0.2), ("apply-0", 0.2), ("unified-read-po", 0.3))
METRICS_PATH = "/metrics"

# What TidbMonitor's generated scrape config does with kubernetes_sd's labels (pingcap/tidb-operator
# pkg/monitor/monitor/util.go and charts/tidb-cluster/templates/config/_prometheus-config.tpl).
SCRAPE_RELABEL: list[dict[str, Any]] = [
    {"source_labels": ["__meta_kubernetes_namespace"], "target_label": "kubernetes_namespace"},
    {"source_labels": ["__meta_kubernetes_pod_name"], "target_label": "instance"},
    {"source_labels": ["__meta_kubernetes_pod_name"], "target_label": "kubernetes_pod_name"},
    {"source_labels": ["__meta_kubernetes_pod_label_app_kubernetes_io_component"], "target_label": "component"},
    {"source_labels": ["__meta_kubernetes_pod_label_app_kubernetes_io_instance"], "target_label": "cluster"},
]


def metrics_path(inst: Instance) -> str:
    return f"{METRICS_PATH}/{inst.namespace}/{inst.pod}"


def targets(instances: list[Instance], address: str) -> list[dict[str, Any]]:
    """The HTTP SD document: one target group per instance, all served at `address`."""
    return [
        {
            "targets": [address],
            "labels": {
                "__metrics_path__": metrics_path(inst),
                "__meta_kubernetes_namespace": inst.namespace,
                "__meta_kubernetes_pod_name": inst.pod,
                "__meta_kubernetes_pod_label_app_kubernetes_io_component": inst.component,
                "__meta_kubernetes_pod_label_app_kubernetes_io_instance": inst.cluster,
            },
        }
        for inst in instances
    ]


def _number(value: float) -> str:
    return repr(float(value))


def exposition(inst: Instance) -> str:
    """One pod's /metrics."""
    lines = [
        "# HELP process_cpu_seconds_total Total user and system CPU time spent in seconds.",
        "# TYPE process_cpu_seconds_total counter",
        f"process_cpu_seconds_total {_number(inst.cpu_seconds)}",
    ]
    if inst.component == "tikv":
        base = zlib.crc32(inst.uid.encode()) % 100_000
        lines += ["# HELP tikv_thread_cpu_seconds_total Total user and system CPU time spent in seconds by threads.",
                  "# TYPE tikv_thread_cpu_seconds_total counter"]  # fmt: skip
        for i, (name, share) in enumerate(TIKV_THREADS):
            lines.append(
                f'tikv_thread_cpu_seconds_total{{name="{name}",tid="{base + i}"}} {_number(inst.cpu_seconds * share)}'
            )
        lines += [
            "# HELP tikv_server_cpu_cores_quota Total CPU cores quota for TiKV server",
            "# TYPE tikv_server_cpu_cores_quota gauge",
            f"tikv_server_cpu_cores_quota {_number(reported_quota(inst))}",
            "# HELP tikv_store_size_bytes Size of storage.",
            "# TYPE tikv_store_size_bytes gauge",
            f'tikv_store_size_bytes{{type="available"}} {_number(inst.capacity - inst.used)}',
            f'tikv_store_size_bytes{{type="capacity"}} {_number(inst.capacity)}',
            f'tikv_store_size_bytes{{type="used"}} {_number(inst.used)}',
        ]
    else:
        lines += [
            "# HELP tidb_server_maxprocs The value of GOMAXPROCS.",
            "# TYPE tidb_server_maxprocs gauge",
            f"tidb_server_maxprocs {_number(reported_quota(inst))}",
        ]
    return "\n".join(lines) + "\n"
