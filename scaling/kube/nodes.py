"""Nodes as growth sees them, from the API's JSON (camelCase dicts)."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Collection, Mapping
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


# The taints the node lifecycle controller keeps while a node cannot take pods (TaintNodesByCondition):
# until they are gone the scheduler places nothing there, though Ready may be True already.
NOT_READY_TAINTS = frozenset(
    {"node.kubernetes.io/not-ready", "node.kubernetes.io/disk-pressure", "node.kubernetes.io/network-unavailable"}
)
# Those a joining node sheds on its own: Karpenter leaves them out of a node not initialized yet
# (its StateNode.Taints), as the pods meant for it will land once it is Ready.
EPHEMERAL_TAINTS = frozenset(
    {"node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable", "node.cloudprovider.kubernetes.io/uninitialized"}
)
# Cluster Autoscaler's startup taints (utils/taints: IgnoreTaintPrefix, StartupTaintPrefix): a node
# registers with one and an agent of the user's (a CNI, a GPU driver) lifts it once the node can run
# pods. The node is not Ready until then, and a planned node is read without it.
STARTUP_TAINT_PREFIXES = (
    "ignore-taint.cluster-autoscaler.kubernetes.io/",
    "startup-taint.cluster-autoscaler.kubernetes.io/",
)
# Its status taints (StatusTaintPrefix): left out of a planned node too, but no sign of unreadiness.
STATUS_TAINT_PREFIX = "status-taint.cluster-autoscaler.kubernetes.io/"


# A node growth registers with a group's startupTaints (Karpenter's field) carries one label each,
# naming the key: how a reader with only the node tells that taint from one pods must tolerate.
STARTUP_MARK_PREFIX = "startup-taint.growth.autoscaling.dev/"


def is_startup_taint(key: str, marks: Collection[str] = ()) -> bool:
    """Whether a taint of ``key`` is one an agent lifts once the node runs pods: Cluster Autoscaler's
    prefixes, or a key the node's ``marks`` (startup_mark names) declare."""
    return key.startswith(STARTUP_TAINT_PREFIXES) or (bool(marks) and startup_mark(key) in marks)


def startup_mark(key: str) -> str:
    """The name part of the label marking a startup taint of ``key`` (a label name: 63 characters of
    [A-Za-z0-9_.-], alphanumeric at both ends; longer or odd keys by their hash)."""
    name = re.sub(r"[^A-Za-z0-9_.-]", "_", key)
    if len(name) <= 63 and name[:1].isalnum() and name[-1:].isalnum():
        return name
    return "h" + hashlib.sha256(key.encode()).hexdigest()[:40]


def startup_marks(labels: Mapping[str, str]) -> set[str]:
    return {k[len(STARTUP_MARK_PREFIX) :] for k in labels if k.startswith(STARTUP_MARK_PREFIX)}


def template_taints(taints: list[Taint]) -> list[Taint]:
    """The taints a planned node is read with: those it registers with but its startup and status
    taints, which it carries only for a while (Cluster Autoscaler's SanitizeTaints)."""
    return [t for t in taints if not (is_startup_taint(t.key) or t.key.startswith(STATUS_TAINT_PREFIX))]


# A condition that keeps a node unready, by the status that does.
_UNREADY_WHEN = {"Ready": ("False", "Unknown"), "DiskPressure": ("True",), "NetworkUnavailable": ("True",)}


def node_is_ready(node: dict[str, Any]) -> bool:
    """Ready as Cluster Autoscaler reads it (utils/kubernetes/ready.go GetReadinessState): a Ready
    condition, not False or Unknown, no DiskPressure or NetworkUnavailable, none of NOT_READY_TAINTS
    and no startup taint (FilterOutNodesWithStartupTaints). A node Ready but still tainted so takes
    no pod yet: counted as room, it would have the planner drop the request that made it and buy
    again for the same pods."""
    conditions = (node.get("status") or {}).get("conditions") or []
    if not any(c.get("type") == "Ready" for c in conditions):
        return False
    if any(c.get("status") in _UNREADY_WHEN.get(c.get("type"), ()) for c in conditions):
        return False
    keys = [t.get("key") or "" for t in (node.get("spec") or {}).get("taints") or []]
    marks = startup_marks((node.get("metadata") or {}).get("labels") or {})
    return not any(k in NOT_READY_TAINTS or is_startup_taint(k, marks) for k in keys)


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
        ready=node_is_ready(node),
        unschedulable=bool(spec.get("unschedulable")),
        provider_id=spec.get("providerID") or "",
        created_at=_timestamp(meta.get("creationTimestamp")),
        host_ports=ports,
    )


def as_joined(node: NodeInfo) -> NodeInfo:
    """``node`` as it will be once it has joined: a node not Ready yet without EPHEMERAL_TAINTS and
    its startup taints (a Ready one as it is: a taint it still carries then is no joining's)."""
    marks = startup_marks(node.labels)
    if node.ready or not any(joining_taint(t.key, marks) for t in node.taints):
        return node
    return node.model_copy(update={"taints": [t for t in node.taints if not joining_taint(t.key, marks)]})


def joining_taint(key: str, marks: Collection[str] = ()) -> bool:
    return key in EPHEMERAL_TAINTS or is_startup_taint(key, marks)
