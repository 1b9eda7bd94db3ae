"""Nodes as growth sees them, from the API's JSON (camelCase dicts)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from scaling.kube.models import NodeInfo, Resources, Taint
from scaling.kube.pods import TERMINAL_PHASES, pod_demand
from scaling.kube.quantity import cpu_millis, memory_bytes
from scaling.kube.scheduling.terms import host_ports

_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


def _resources(q: dict[str, Any]) -> Resources:
    """A node's allocatable: cpu, memory, pods and every other resource it lists (zero amounts
    left out: a node offering 0 of a resource offers none)."""
    extended = tuple(
        sorted((k, n) for k, v in q.items() if k not in ("cpu", "memory", "pods") and (n := memory_bytes(v)) > 0)
    )
    return Resources(
        cpu_m=cpu_millis(q["cpu"]) if "cpu" in q else 0,
        memory=memory_bytes(q["memory"]) if "memory" in q else 0,
        pods=memory_bytes(q["pods"]) if "pods" in q else 0,
        extended=extended,
    )


def _ready(status: dict[str, Any]) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or [])


def node_is_ready(node: dict[str, Any]) -> bool:
    """The Node's Ready condition is True."""
    return _ready(node.get("status") or {})


def _timestamp(v: Any) -> datetime | None:
    if not v:
        return None
    if isinstance(v, datetime):
        return v
    return datetime.fromisoformat(str(v).replace("Z", "+00:00"))


def node_info(node: dict[str, Any], pods_on_node: list[dict[str, Any]]) -> NodeInfo:
    """`pods_on_node` are the pods bound to this node; terminal ones free their room.

    DaemonSet and mirror pods are counted here: they never ask for a node, but they do
    occupy the one they run on.
    """
    meta = node.get("metadata") or {}
    spec = node.get("spec") or {}
    status = node.get("status") or {}
    alloc = status.get("allocatable") or status.get("capacity") or {}
    live = [p for p in pods_on_node if (p.get("status") or {}).get("phase") not in TERMINAL_PHASES]
    requested = Resources.total(pod_demand(p) for p in live)
    ports = [hp for p in live for hp in host_ports(p.get("spec") or {})]
    return NodeInfo(
        name=meta.get("name") or "",
        labels=dict(meta.get("labels") or {}),
        annotations=dict(meta.get("annotations") or {}),
        taints=[
            Taint(key=t.get("key") or "", value=t.get("value") or "", effect=t.get("effect"))
            for t in spec.get("taints") or []
            if t.get("effect") in _EFFECTS
        ],
        allocatable=_resources(alloc),
        requested=requested,
        ready=_ready(status),
        unschedulable=bool(spec.get("unschedulable")),
        provider_id=spec.get("providerID") or "",
        created_at=_timestamp(meta.get("creationTimestamp")),
        host_ports=ports,
    )
