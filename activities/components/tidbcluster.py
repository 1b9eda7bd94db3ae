"""The body of a heterogeneous TidbCluster, made from its base cluster as tidb-operator makes it.

The spec is the base cluster's, reduced to one component (every other component removed),
joined to the base with spec.cluster, with the group's replicas, CPU and memory (requests and
limits) and, for TiKV, storage. The group's labels become the component's server labels (TiKV:
config.server.labels, TiDB: config.labels), which is how PD sees which group an instance is in.
Object labels are tidb-operator's: auto-instance (the autoscaler), auto-component,
autoscaling-group and base-tc.

No ownerReference to the autoscaler: deleting a TidbClusterAutoScaler must not take TiKV
stores away at once; groups are removed by the graceful scale-in only.
"""

from __future__ import annotations

import copy
from typing import Any

LABEL_AUTO_INSTANCE = "tidb.pingcap.com/auto-instance"
LABEL_AUTO_COMPONENT = "tidb.pingcap.com/auto-component"
LABEL_AUTOSCALING_GROUP = "tidb.pingcap.com/autoscaling-group"
LABEL_BASE_TC = "tidb.pingcap.com/base-tc"
# Component sections of a TidbCluster spec; a heterogeneous cluster keeps only its own.
COMPONENT_KEYS = ("pd", "pdms", "tikv", "tidb", "tiflash", "ticdc", "pump", "tiproxy", "helper", "discovery")

Obj = dict[str, Any]


def _with_server_labels(config: Any, component: str, labels: dict[str, str]) -> Any:
    if not labels:
        return config
    if config is None or isinstance(config, dict):
        merged = copy.deepcopy(config) if isinstance(config, dict) else {}
        node = merged.setdefault("server", {}) if component == "tikv" else merged
        node.setdefault("labels", {}).update(labels)
        return merged
    if isinstance(config, str):  # newer operators keep config as TOML text
        table = "[server.labels]" if component == "tikv" else "[labels]"
        if table in config:
            raise ValueError(f"the base cluster's {component} config already has {table}; cannot add group labels")
        lines = "\n".join(f'"{k}" = "{v}"' for k, v in sorted(labels.items()))
        return f"{config.rstrip()}\n\n{table}\n{lines}\n"
    raise ValueError(f"unexpected {component} config type {type(config).__name__}")


def auto_cluster_body(
    base: Obj,
    *,
    name: str,
    autoscaler: str,
    component: str,
    group: str,
    replicas: int,
    cpu: str,
    memory: str,
    storage: str | None = None,
    labels: dict[str, str] | None = None,
) -> Obj:
    """A new TidbCluster named `name` holding `replicas` instances of `component` for a group."""
    meta, spec = base["metadata"], copy.deepcopy(base.get("spec") or {})
    cspec = spec.get(component)
    if not isinstance(cspec, dict):
        raise ValueError(f"base cluster {meta['namespace']}/{meta['name']} has no spec.{component} to copy")
    for key in COMPONENT_KEYS:
        if key != component:
            spec.pop(key, None)
    spec["cluster"] = {"name": meta["name"], "namespace": meta["namespace"]}
    requests: Obj = {"cpu": cpu, "memory": memory}
    if component == "tikv":
        base_storage = (cspec.get("requests") or {}).get("storage")
        if storage or base_storage:
            requests["storage"] = storage or base_storage
    cspec["replicas"] = int(replicas)
    cspec["requests"] = requests
    cspec["limits"] = {"cpu": cpu, "memory": memory}
    config = _with_server_labels(cspec.get("config"), component, labels or {})
    if config is not None:
        cspec["config"] = config
    return {
        "apiVersion": base.get("apiVersion", "pingcap.com/v1alpha1"),
        "kind": "TidbCluster",
        "metadata": {
            "name": name,
            "namespace": meta["namespace"],
            "labels": {
                LABEL_AUTO_INSTANCE: autoscaler,
                LABEL_AUTO_COMPONENT: component,
                LABEL_AUTOSCALING_GROUP: group,
                LABEL_BASE_TC: meta["name"],
            },
        },
        "spec": spec,
    }


def owned_by(obj: Obj, autoscaler: str, component: str) -> bool:
    """Whether an existing TidbCluster is this autoscaler's group for this component."""
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return labels.get(LABEL_AUTO_INSTANCE) == autoscaler and labels.get(LABEL_AUTO_COMPONENT) == component
