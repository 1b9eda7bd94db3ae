"""Plain Node and Pod objects for the filter tests (upstream's st.MakePod / MakeNode)."""

from __future__ import annotations

from typing import Any

from sim.kube.filters.cycle import NodeInfo
from sim.kube.filters.resources import allocatable, pod_requests

Obj = dict[str, Any]
READY = [{"type": "Ready", "status": "True"}]


def make_node(
    name: str,
    labels: dict[str, str] | None = None,
    *,
    taints: list[Obj] | None = None,
    alloc: dict[str, str] | None = None,
) -> Obj:
    allocatable = {"cpu": "4", "memory": "8Gi", "pods": "110", **(alloc or {})}
    return {
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {"taints": taints or []},
        "status": {"allocatable": allocatable, "conditions": READY},
    }


def term(key: str, op: str, topology_key: str, values: list[str] | None = None, **extra: Any) -> Obj:
    expr: Obj = {"key": key, "operator": op}
    if values is not None:
        expr["values"] = values
    return {"labelSelector": {"matchExpressions": [expr]}, "topologyKey": topology_key, **extra}


def make_pod(
    name: str = "p",
    labels: dict[str, str] | None = None,
    *,
    namespace: str = "default",
    node: str | None = None,
    affinity: list[Obj] | None = None,
    anti: list[Obj] | None = None,
    spread: list[Obj] | None = None,
    requests: dict[str, str] | None = None,
    ports: list[Obj] | None = None,
    node_affinity: Obj | None = None,
    terminating: bool = False,
    **spec: Any,
) -> Obj:
    container: Obj = {"name": "c", "image": "x", "resources": {"requests": requests or {}}}
    if ports:
        container["ports"] = ports
    body: Obj = {"containers": [container], **spec}
    aff: Obj = {}
    if affinity:
        aff["podAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": affinity}
    if anti:
        aff["podAntiAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": anti}
    if node_affinity:
        aff["nodeAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": node_affinity}
    if aff:
        body["affinity"] = aff
    if spread:
        body["topologySpreadConstraints"] = spread
    if node:
        body["nodeName"] = node
    meta: Obj = {"name": name, "namespace": namespace, "labels": labels or {}}
    if terminating:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"metadata": meta, "spec": body, "status": {"phase": "Running" if node else "Pending"}}


def spread_constraint(max_skew: int, key: str, selector: Obj | None, **extra: Any) -> Obj:
    return {
        "maxSkew": max_skew,
        "topologyKey": key,
        "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": selector,
        **extra,
    }


def exists(key: str) -> Obj:
    return {"matchExpressions": [{"key": key, "operator": "Exists"}]}


def infos(nodes: list[Obj], pods: list[Obj]) -> list[NodeInfo]:
    """NodeInfos with the pods bound to them (pods on nodes not listed are left out)."""
    out = {n["metadata"]["name"]: NodeInfo(n, allocatable(n), {}, []) for n in nodes}
    for pod in pods:
        if pod["spec"].get("nodeName") in out:
            out[pod["spec"]["nodeName"]].add(pod, pod_requests(pod))
    return list(out.values())
