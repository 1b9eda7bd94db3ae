"""NodeResourcesFit: every resource the pod requests against what the node has left.

Requests as k8s.io/component-helpers/resource PodRequests sums them: the containers, plus each
restartable (sidecar) init container, which runs beside them; an ordinary init container runs
alone with the sidecars started before it, and the pod needs the largest of those phases; then
the overhead. A request defaults to its limit (the apiserver's defaulting). Extended resources,
hugepages and ephemeral-storage are checked as cpu and memory are: a node that does not offer
one has none of it (fit.go's "Insufficient <name>"); "pods" counts the pod slot.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from sim.kube import quantity

Obj = dict[str, Any]
Resources = dict[str, int]


def amount(name: str, value: Any) -> int:
    return quantity.millis(value) if name == "cpu" else quantity.units(value)


def container_requests(container: Obj) -> Resources:
    res = container.get("resources") or {}
    merged = {**(res.get("limits") or {}), **(res.get("requests") or {})}
    return {k: amount(k, v) for k, v in merged.items()}


def pod_requests(pod: Obj) -> Resources:
    spec = pod.get("spec") or {}
    total: Counter[str] = Counter()
    for c in spec.get("containers") or []:
        total.update(container_requests(c))
    sidecars: Counter[str] = Counter()
    init_peak: Counter[str] = Counter()
    for c in spec.get("initContainers") or []:
        own = Counter(container_requests(c))
        if c.get("restartPolicy") == "Always":
            total.update(own)
            sidecars.update(own)
            phase = sidecars
        else:
            phase = own + sidecars
        for k, v in phase.items():
            init_peak[k] = max(init_peak[k], v)
    for k, v in init_peak.items():
        total[k] = max(total[k], v)
    for k, v in (spec.get("overhead") or {}).items():
        total[k] += amount(k, v)
    total["pods"] = 1
    return dict(total)


def allocatable(node: Obj) -> Resources:
    status = node.get("status") or {}
    source = status.get("allocatable") or status.get("capacity") or {}
    return {k: amount(k, v) for k, v in source.items()}


def insufficient(req: Resources, used: Resources, alloc: Resources) -> list[str]:
    """fit.go's reasons, one per resource short."""
    reasons = []
    for name, want in sorted(req.items()):
        if want > 0 and used.get(name, 0) + want > alloc.get(name, 0):
            reasons.append("Too many pods" if name == "pods" else f"Insufficient {name}")
    return reasons
