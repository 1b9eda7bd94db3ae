"""One pod's scheduling cycle: PreFilter once over the cluster, then Filter per node.

The plugins run in the default profile's order (NodeUnschedulable, NodeName, TaintToleration,
NodeAffinity, NodePorts, NodeResourcesFit, VolumeBinding, VolumeZone, PodTopologySpread,
InterPodAffinity) and a node keeps the first plugin's refusal, as the framework's
RunFilterPlugins stops at it; the pod's message counts those reasons over the nodes
(FitError.Error: "0/N nodes are available: <count> <reason>, ... ." sorted), or carries a
PreFilter refusal ("0/N nodes are available: <reason>.").
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from sim.kube.filters import podaffinity, spread, volumes
from sim.kube.filters.nodeaffinity import NODE_AFFINITY, NODE_NAME, affinity_matches, name_matches
from sim.kube.filters.ports import REASON as PORTS_REASON
from sim.kube.filters.ports import Port, conflicts, host_ports
from sim.kube.filters.resources import Resources, insufficient
from sim.kube.filters.taints import taint_reason, unschedulable, untolerated

Obj = dict[str, Any]


@dataclass(eq=False)
class NodeInfo:
    """A node with what is bound to it: allocatable, requests held, live pods."""

    node: Obj
    alloc: Resources
    used: Resources
    pods: list[Obj]
    _ports: list[Port] | None = None

    @property
    def name(self) -> str:
        return self.node["metadata"]["name"]

    @property
    def ports(self) -> list[Port]:
        if self._ports is None:
            self._ports = [p for pod in self.pods for p in host_ports(pod)]
        return self._ports

    def add(self, pod: Obj, req: Resources) -> None:
        self.pods.append(pod)
        for k, v in req.items():
            self.used[k] = self.used.get(k, 0) + v
        if self._ports is not None:
            self._ports += host_ports(pod)


@dataclass
class Cluster:
    """What a cycle reads beside the nodes: namespaces' labels, volume objects, and the placed
    pods with required anti-affinity, as (their node, their terms)."""

    nodes: list[NodeInfo]
    namespaces: podaffinity.Namespaces = field(default_factory=dict)
    volumes: volumes.Volumes = field(default_factory=volumes.Volumes)
    anti_pods: list[tuple[Obj, list[podaffinity.Term]]] = field(default_factory=list)


def pod_node_reasons(pod: Obj, node: Obj) -> list[str]:
    """The filters that read the pod and the node alone: NodeUnschedulable, NodeName,
    TaintToleration, NodeAffinity."""
    if reason := unschedulable(pod, node):
        return [reason]
    if not name_matches(pod, node):
        return [NODE_NAME]
    if (taint := untolerated(pod, node)) is not None:
        return [taint_reason(taint)]
    if not affinity_matches(pod, node):
        return [NODE_AFFINITY]
    return []


def node_reasons(pod: Obj, req: Resources, node: Obj, used: Resources, alloc: Resources) -> list[str]:
    """pod_node_reasons, then NodeResourcesFit: all that decides for a pod without host ports,
    volumes and pod (anti-)affinity or spread (scheduler.equivalence_key)."""
    return pod_node_reasons(pod, node) or insufficient(req, used, alloc)


class Cycle:
    def __init__(self, pod: Obj, req: Resources, cluster: Cluster) -> None:
        self.pod, self.req, self.cluster = pod, req, cluster
        self.ports = host_ports(pod)
        self.failure: str | None = None  # a PreFilter refusal: no node will do
        self.volumes: volumes.State | None = None
        if volumes.claim_names(pod):
            state = volumes.prefilter(pod, cluster.volumes)
            if isinstance(state, str):
                self.failure = state
            else:
                self.volumes = state
        pairs = [(info.node, info.pods) for info in cluster.nodes]
        self.spread = spread.prefilter(pod, pairs)
        self.affinity = podaffinity.prefilter(pod, pairs, cluster.anti_pods, cluster.namespaces)

    def reasons(self, info: NodeInfo) -> list[str]:
        """Why the node cannot take the pod (the first refusing plugin's reasons); empty when it can."""
        pod, node = self.pod, info.node
        if self.failure is not None:
            return [self.failure]
        if reasons := pod_node_reasons(pod, node):
            return reasons
        if self.ports and conflicts(self.ports, info.ports):
            return [PORTS_REASON]
        if short := insufficient(self.req, info.used, info.alloc):
            return short
        if self.volumes is not None and (reason := volumes.refusal(self.volumes, self.cluster.volumes, node)):
            return [reason]
        if self.spread and (reason := spread.refusal(pod, self.spread, node)):
            return [reason]
        if reason := podaffinity.refusal(self.affinity, node):
            return [reason]
        return []

    def message(self) -> str:
        """The Unschedulable message when no node takes the pod."""
        if not self.cluster.nodes:
            return "no nodes available to schedule pods"
        if self.failure is not None:
            return f"0/{len(self.cluster.nodes)} nodes are available: {self.failure}."
        counts: Counter[str] = Counter()
        for info in self.cluster.nodes:
            counts.update(self.reasons(info))
        return unschedulable_message(len(self.cluster.nodes), counts)


def unschedulable_message(node_count: int, reasons: Counter[str]) -> str:
    if node_count == 0:
        return "no nodes available to schedule pods"
    parts = sorted(f"{count} {reason}" for reason, count in reasons.items())
    return f"0/{node_count} nodes are available: {', '.join(parts)}."
