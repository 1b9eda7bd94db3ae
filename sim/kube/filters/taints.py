"""NodeUnschedulable and TaintToleration (NoSchedule and NoExecute taints).

A NotReady node carries node.kubernetes.io/not-ready:NoSchedule, as the node lifecycle
controller taints it on a real cluster (the sim's nodes do not carry it in their spec).
"""

from __future__ import annotations

from typing import Any

from sim.kube.kwok import is_ready

Obj = dict[str, Any]
NOT_READY_TAINT = {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}
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
    """The taints that keep pods off (NoSchedule, NoExecute), the not-ready one included."""
    taints = [t for t in (node.get("spec") or {}).get("taints") or [] if t.get("effect") in ("NoSchedule", "NoExecute")]
    return taints if is_ready(node) else [NOT_READY_TAINT, *taints]


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
