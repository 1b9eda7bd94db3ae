"""NodeUnschedulable and TaintToleration (NoSchedule and NoExecute taints).

Both read the node's spec only, as the kube-scheduler does (it has not filtered on node
conditions since TaintNodesByCondition): a NotReady node is kept off by the
node.kubernetes.io/not-ready:NoSchedule taint the node lifecycle controller puts on it
(sim/kube/nodelifecycle.py), and a Ready node that still carries it takes no pod either.
"""

from __future__ import annotations

from typing import Any

Obj = dict[str, Any]
UNSCHEDULABLE_TAINT = {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}
UNSCHEDULABLE = "node(s) were unschedulable"


def tolerates(tolerations: list[Obj], taint: Obj) -> bool:
    for t in tolerations:
        if t.get("effect") and t["effect"] != taint.get("effect"):
            continue
        if t.get("operator") == "Exists":
            if not t.get("key") or t["key"] == taint.get("key"):
                return True
        elif t.get("key") == taint.get("key") and (t.get("value") or "") == (taint.get("value") or ""):
            return True
    return False


def scheduling_taints(node: Obj) -> list[Obj]:
    """The node's taints that keep pods off (NoSchedule, NoExecute)."""
    return [t for t in (node.get("spec") or {}).get("taints") or [] if t.get("effect") in ("NoSchedule", "NoExecute")]


def untolerated(pod: Obj, node: Obj) -> Obj | None:
    tolerations = (pod.get("spec") or {}).get("tolerations") or []
    return next((t for t in scheduling_taints(node) if not tolerates(tolerations, t)), None)


def unschedulable(pod: Obj, node: Obj) -> str | None:
    tolerations = (pod.get("spec") or {}).get("tolerations") or []
    if (node.get("spec") or {}).get("unschedulable") and not tolerates(tolerations, UNSCHEDULABLE_TAINT):
        return UNSCHEDULABLE
    return None


def taint_reason(taint: Obj) -> str:
    return f"node(s) had untolerated taint {{{taint.get('key')}: {taint.get('value') or ''}}}"
