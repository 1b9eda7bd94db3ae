"""NodeResourcesFit: the node's allocatable less what its pods request holds every resource
the pod requests: a pod slot ("Too many pods"), cpu, memory, then every other resource by
name (ephemeral-storage, hugepages-*, extended resources such as nvidia.com/gpu), each
"Insufficient <name>". A node that lists no amount of a resource offers none of it.

Requests are summed as the scheduler sums them (scaling.kube.pods.pod_demand: containers and
sidecars, init containers, overhead), with growth's small minimums for pods that request
nothing (conservative: such a pod still takes room on a real node).
"""

from __future__ import annotations

from scaling.kube.models import NodeInfo, Resources
from scaling.kube.scheduling.refusal import Refusal

NAME = "NodeResourcesFit"
TOO_MANY_PODS = "Too many pods"


def insufficient(requests: Resources, free: Resources) -> str | None:
    """The first resource `free` lacks for `requests`, as the scheduler names it (None: fits)."""
    if requests.pods > free.pods:
        return TOO_MANY_PODS
    if requests.cpu_m > free.cpu_m:
        return "Insufficient cpu"
    if requests.memory > free.memory:
        return "Insufficient memory"
    if requests.extended:
        have = dict(free.extended)
        for name, q in requests.extended:
            if q > have.get(name, 0):
                return f"Insufficient {name}"
    return None


def filter(requests: Resources, node: NodeInfo) -> Refusal | None:
    reason = insufficient(requests, node.allocatable - node.requested)
    return None if reason is None else Refusal(NAME, reason)
