"""Pods and nodes for the filter tests, built as the API's JSON (like upstream's st.MakePod)."""

from __future__ import annotations

from typing import Any

from scaling.kube.models import NodeInfo, PodInfo, Resources
from scaling.kube.nodes import node_info
from scaling.kube.pods import pod_info
from scaling.kube.scheduling.cluster import Cluster
from scaling.kube.scheduling.volumes import Volumes


def pod(
    name: str = "p",
    *,
    namespace: str = "",
    labels: dict[str, str] | None = None,
    node: str = "",
    affinity: list[dict] | None = None,
    anti: list[dict] | None = None,
    spread: list[dict] | None = None,
    containers: list[dict] | None = None,
    affinity_nodes: list[str] | None = None,
    affinity_key: str = "node",
    deleting: bool = False,
    **spec: Any,
) -> dict[str, Any]:
    s: dict[str, Any] = {"containers": containers or [{"name": "c"}], **spec}
    if affinity_nodes:  # st.NodeAffinityIn(affinity_key, affinity_nodes)
        s["affinity"] = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": affinity_key, "operator": "In", "values": affinity_nodes}]}
                    ]
                }
            }
        }
    if node:
        s["nodeName"] = node
    aff: dict[str, Any] = dict(s.get("affinity") or {})
    if affinity:
        aff["podAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": affinity}
    if anti:
        aff["podAntiAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": anti}
    if aff:
        s["affinity"] = aff
    if spread:
        s["topologySpreadConstraints"] = spread
    meta: dict[str, Any] = {"name": name, "namespace": namespace or "default", "labels": labels or {}, "uid": name}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {
        "metadata": meta,
        "spec": s,
        "status": {"phase": "Running" if node else "Pending"},
    }


def term(key: str, op: str, values: list[str] | None, topology: str, **extra: Any) -> dict[str, Any]:
    """One required term, as st.PodAffinityIn/NotIn/Exists build it."""
    expr: dict[str, Any] = {"key": key, "operator": op}
    if values is not None:
        expr["values"] = values
    return {"labelSelector": {"matchExpressions": [expr]}, "topologyKey": topology, **extra}


def node(name: str, labels: dict[str, str] | None = None, taints: bool = False, **status: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {"taints": [{"key": "dedicated", "value": "x", "effect": "NoSchedule"}]} if taints else {},
        "status": {"allocatable": {"cpu": "100", "memory": "100Gi", "pods": "110"}, **status},
    }


def cluster(
    nodes: list[dict],
    pods: list[dict] = (),
    namespaces: dict[str, dict[str, str]] | None = None,
    volumes: Volumes | None = None,
) -> Cluster:
    """Nodes with the pods bound to them (pods on a node not listed count nowhere, as upstream's
    snapshot keeps them on a NodeInfo without a Node)."""
    by_node: dict[str, list[dict]] = {}
    for p in pods:
        by_node.setdefault(p["spec"].get("nodeName", ""), []).append(p)
    infos = [node_info(n, by_node.get(n["metadata"]["name"], [])) for n in nodes]
    return Cluster(
        nodes=infos,
        pods={k: [pod_info(p) for p in v] for k, v in by_node.items() if k},
        namespaces=namespaces or {},
        volumes=volumes or Volumes(),
    )


def info(p: dict) -> PodInfo:
    return pod_info(p)


def free_node(name: str = "n", labels: dict[str, str] | None = None, allocatable: Resources | None = None) -> NodeInfo:
    return NodeInfo(
        name=name,
        labels=labels or {},
        allocatable=allocatable or Resources(cpu_m=10_000, memory=2**36, pods=110),
        ready=True,
    )
