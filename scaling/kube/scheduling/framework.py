"""The filters in the kube-scheduler's order, the first refusal kept (what the scheduler's
event names for that node): NodeUnschedulable, NodeName, TaintToleration, NodeAffinity,
NodePorts, NodeResourcesFit, VolumeBinding, VolumeZone, PodTopologySpread, InterPodAffinity.

`prefilter` runs once per pod shape against the cluster; `filter` once per node. The pod
argument is anything with a pending pod's fields (PodInfo, or the planner's PodShape)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from pydantic import BaseModel, ConfigDict

from scaling.kube.models import NodeInfo, NodeSelectorTerm, PodInfo, Resources, Toleration
from scaling.kube.scheduling import (
    interpodaffinity,
    nodeaffinity,
    nodename,
    nodeports,
    noderesources,
    nodeunschedulable,
    podtopologyspread,
    tainttoleration,
    volumebinding,
    volumezone,
)
from scaling.kube.scheduling.cluster import Cluster
from scaling.kube.scheduling.refusal import Refusal
from scaling.kube.scheduling.terms import HostPort
from scaling.kube.scheduling.volumes import VolumeTopology, volume_topology

__all__ = ["volume_topology"]


class Pending(Protocol):
    """What the filters read of a pod (PodInfo and the planner's PodShape both have it)."""

    node_selector: dict[str, str]
    tolerations: list[Toleration]
    node_affinity: list[NodeSelectorTerm]
    requests: Resources
    host_ports: list[HostPort]
    namespace: str
    labels: dict[str, str]


class SchedulingState(BaseModel):
    """A pod shape's prefilter state: what the filters need beyond the pod's own fields."""

    model_config = ConfigDict(frozen=True)

    spread: podtopologyspread.SpreadState | None = None
    affinity: interpodaffinity.AffinityState | None = None
    volumes: VolumeTopology | None = None

    def __bool__(self) -> bool:
        return bool(self.spread or self.affinity or self.volumes)


def prefilter(pod: PodInfo, cluster: Cluster) -> SchedulingState:
    return SchedulingState(
        spread=podtopologyspread.prefilter(
            pod.namespace,
            pod.labels,
            pod.spread_constraints,
            pod.node_selector,
            pod.node_affinity,
            pod.tolerations,
            cluster,
        ),
        affinity=interpodaffinity.prefilter(
            pod.namespace, pod.labels, tuple(pod.pod_affinity), tuple(pod.pod_anti_affinity), cluster
        ),
        volumes=volume_topology(pod.namespace, pod.pvc_names, cluster.volumes) if pod.pvc_names else None,
    )


def filter(
    pod: Pending, state: SchedulingState, node: NodeInfo, *, resources: bool = True, node_name: str | None = None
) -> Refusal | None:
    """The first filter that refuses `node` for `pod` (None: every filter admits it).
    `resources` False leaves NodeResourcesFit to the caller (the planner counts room itself)."""
    refusal = (
        nodeunschedulable.filter(pod.tolerations, node)
        or nodename.filter(node_name, node)
        or tainttoleration.filter(pod.tolerations, node)
        or nodeaffinity.filter(pod.node_selector, pod.node_affinity, node)
        or nodeports.filter(pod.host_ports, node)
        or (noderesources.filter(pod.requests, node) if resources else None)
    )
    if refusal is not None or not state:
        return refusal
    return (
        (volumebinding.filter(state.volumes, node) or volumezone.filter(state.volumes, node) if state.volumes else None)
        or podtopologyspread.filter(state.spread, node)
        or interpodaffinity.filter(state.affinity, node)
    )


def first_refusals(pod: Pending, state: SchedulingState, nodes: Sequence[NodeInfo]) -> Mapping[str, int]:
    """Reason -> nodes refusing for it, as the scheduler's "0/N nodes are available" sums them."""
    out: dict[str, int] = {}
    for n in nodes:
        r = filter(pod, state, n)
        if r is not None:
            out[r.reason] = out.get(r.reason, 0) + 1
    return out
