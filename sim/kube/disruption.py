"""PodDisruptionBudget arithmetic, as the disruption controller and eviction API apply it.

expectedPods follows the disruption controller: the scale of each controller owning matched
pods (so a pod just evicted and not yet replaced still counts as expected), plus one for
each matched pod without a controller (the real controller refuses percentages there).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from sim.kube.selectors import label_selector_to_requirements, labels_match

Obj = dict[str, Any]


def selects(pdb: Obj, pod: Obj) -> bool:
    reqs = label_selector_to_requirements((pdb.get("spec") or {}).get("selector"))
    # policy/v1: an empty selector matches every pod in the namespace; a missing one none.
    return reqs is not None and labels_match(reqs, pod)


def is_terminal(pod: Obj) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def is_healthy(pod: Obj) -> bool:
    status = pod.get("status") or {}
    if status.get("phase") != "Running" or pod["metadata"].get("deletionTimestamp"):
        return False
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or [])


def can_ignore_budget(pod: Obj) -> bool:
    """Pods that are not running yet, or are done, may always be evicted."""
    phase = (pod.get("status") or {}).get("phase")
    return phase in ("Pending", "Succeeded", "Failed") or bool(pod["metadata"].get("deletionTimestamp"))


def _scaled(value: Any, total: int, round_up: bool) -> int:
    if isinstance(value, str) and value.endswith("%"):
        fraction = int(value[:-1]) * total / 100
        return math.ceil(fraction) if round_up else math.floor(fraction)
    return int(value)


def _controller_uid(pod: Obj) -> str | None:
    for ref in pod["metadata"].get("ownerReferences") or []:
        if ref.get("controller"):
            return ref.get("uid")
    return None


def pdb_status(pdb: Obj, namespace_pods: list[Obj], scale_of: Callable[[str], int | None] = lambda uid: None) -> Obj:
    """scale_of(controller uid) gives the controller's desired pod count, None if unknown."""
    spec = pdb.get("spec") or {}
    pods = [p for p in namespace_pods if not is_terminal(p) and selects(pdb, p)]
    expected = 0
    controllers: set[str] = set()
    for pod in pods:
        uid = _controller_uid(pod)
        scale = scale_of(uid) if uid else None
        if scale is None:
            expected += 1
        elif uid not in controllers:
            controllers.add(uid)
            expected += scale
    healthy = sum(1 for p in pods if is_healthy(p))
    if spec.get("maxUnavailable") is not None:
        desired = max(0, expected - _scaled(spec["maxUnavailable"], expected, True))
    elif spec.get("minAvailable") is not None:
        desired = _scaled(spec["minAvailable"], expected, True)
    else:
        desired = 0  # neither set: the controller leaves desiredHealthy at zero
    allowed = max(0, healthy - desired)
    stamp = (pdb.get("metadata") or {}).get("creationTimestamp") or "1970-01-01T00:00:00Z"
    return {
        "observedGeneration": (pdb.get("metadata") or {}).get("generation", 1),
        "currentHealthy": healthy,
        "desiredHealthy": desired,
        "disruptionsAllowed": allowed,
        "expectedPods": expected,
        "conditions": [
            {
                "type": "DisruptionAllowed",
                "status": "True" if allowed > 0 else "False",
                "reason": "SufficientPods" if allowed > 0 else "InsufficientPods",
                "message": "",
                "lastTransitionTime": stamp,
                "observedGeneration": (pdb.get("metadata") or {}).get("generation", 1),
            }
        ],
    }
