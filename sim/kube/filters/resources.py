"""NodeResourcesFit: every resource the pod requests against what the node has left.

Requests as k8s.io/component-helpers/resource PodRequests sums them: the containers, plus each
restartable (sidecar) init container, which runs beside them; an ordinary init container runs
alone with the sidecars started before it, and the pod needs the largest of those phases; then
the overhead. A request defaults to its limit (the apiserver's defaulting). Extended resources,
hugepages and ephemeral-storage are checked as cpu and memory are: a node that does not offer
one has none of it (fit.go's "Insufficient <name>"); "pods" counts the pod slot.

The resource scores read a second sum of cpu and memory, where a container missing a request
counts a default (PodResourcesOptions.NonMissingContainerRequests): `pod_requests(pod,
non_missing)`. The scheduler keeps it in the same dict under SCORE_ONLY names, which no
resource can be named (they hold a space), so this filter never reads them.
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


# Requests the scheduler keeps beside the real ones for its scores (sim/kube/scores); not resources.
SCORE_ONLY = frozenset({"non-zero cpu", "non-zero memory"})


def pod_requests(pod: Obj, non_missing: Resources | None = None) -> Resources:
    """What the pod requests; with `non_missing`, each container (init containers included)
    missing one of its resources counts that amount instead (an explicit 0 is not missing)."""
    spec = pod.get("spec") or {}
    defaults = non_missing or {}

    def requests(c: Obj) -> Resources:
        own = container_requests(c)
        return {**{k: v for k, v in defaults.items() if k not in own}, **own}

    total: Counter[str] = Counter()
    for c in spec.get("containers") or []:
        total.update(requests(c))
    sidecars: Counter[str] = Counter()
    init_peak: Counter[str] = Counter()
    for c in spec.get("initContainers") or []:
        own = Counter(requests(c))
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
        if want > 0 and name not in SCORE_ONLY and used.get(name, 0) + want > alloc.get(name, 0):
            reasons.append("Too many pods" if name == "pods" else f"Insufficient {name}")
    return reasons
