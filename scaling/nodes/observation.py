"""What one autoscaler loop observes of a cluster (the output of the observe activity)."""

from __future__ import annotations

from scaling.nodes.contracts import PodEvent
from scaling.nodes.headroom import is_headroom
from scaling.nodes.models import PodProblem


def never_satisfiable_events(problems: list[PodProblem]) -> list[PodEvent]:
    """NotTriggerScaleUp events for real pods (a headroom's virtual pod is no Kubernetes object)."""
    return [
        PodEvent(
            namespace=p.namespace,
            pod_name=p.name,
            pod_uid=p.uid,
            reason="NotTriggerScaleUp",
            message=f"{p.reason}: {p.message}",
            type="Warning",
        )
        for p in problems
        if not is_headroom(p.uid)
    ]


# Events per emit_pod_events call: each call's input stays well under 256 KB of history.
EVENTS_PER_CALL = 200


def event_batches(events: list[PodEvent], size: int = EVENTS_PER_CALL) -> list[list[PodEvent]]:
    return [events[i : i + size] for i in range(0, len(events), size)]
