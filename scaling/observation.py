"""What one autoscaler loop observes of a cluster (the output of the observe activity)."""

from __future__ import annotations

from pydantic import BaseModel, Field

from scaling.models import NodeGroup, NodeInfo, PodInfo, PodProblem, SpecProblem


class ClusterObservation(BaseModel):
    unschedulable: list[PodInfo] = Field(default_factory=list)
    nodes: list[NodeInfo] = Field(default_factory=list)
    groups: list[NodeGroup] = Field(default_factory=list)
    invalid_groups: list[SpecProblem] = Field(default_factory=list)
    pods_total: int = 0
    pods_running: int = 0


class PodEvent(BaseModel):
    """A Kubernetes Event on a pod, like Cluster Autoscaler's TriggeredScaleUp / NotTriggerScaleUp."""

    namespace: str
    pod_name: str
    pod_uid: str
    reason: str
    message: str
    type: str = "Normal"


def never_satisfiable_events(problems: list[PodProblem]) -> list[PodEvent]:
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
    ]
