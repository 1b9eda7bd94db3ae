"""Room for the DaemonSets a new node will run (Cluster Autoscaler counts them in its node
templates): a new node's pods get its allocatable minus the requests of every DaemonSet whose
pod template admits that node (nodeSelector, required node affinity, tolerations of the
group's taints). The observer sends DaemonSet templates as shapes: a handful, whatever the
cluster's size."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from scaling.kube.models import Resources, Taint
from scaling.kube.pods import pod_info
from scaling.nodes.matching import labels_admit, tolerates
from scaling.nodes.scale_up.demand import PodShape, demand_key

# DaemonSets sent per loop: beyond this many a cluster has bigger problems; the rest are ignored.
MAX_DAEMONSETS = 100


def daemonset_shapes(daemonsets: Sequence[Mapping[str, Any]]) -> list[PodShape]:
    """Each DaemonSet's pod template as a shape of one pod (named by the DaemonSet)."""
    out = []
    for ds in list(daemonsets)[:MAX_DAEMONSETS]:
        meta = ds.get("metadata") or {}
        template = (ds.get("spec") or {}).get("template") or {}
        pod = pod_info(
            {
                "metadata": {
                    **(template.get("metadata") or {}),
                    "namespace": meta.get("namespace"),
                    "name": meta.get("name"),
                },
                "spec": template.get("spec") or {},
            }
        )
        out.append(
            PodShape(
                key=demand_key(pod),
                requests=pod.requests,
                node_selector=pod.node_selector,
                tolerations=pod.tolerations,
                node_affinity=pod.node_affinity,
                count=1,
            )
        )
    return out


def daemonset_overhead(daemonsets: Sequence[PodShape], labels: Mapping[str, str], taints: Sequence[Taint]) -> Resources:
    """What the DaemonSets that would run on a node with these labels and taints request."""
    total = Resources()
    for ds in daemonsets:
        if labels_admit(ds.node_selector, ds.node_affinity, labels, "") and tolerates(ds.tolerations, taints):
            total = total + ds.requests
    return total


def room_for_pods(allocatable: Resources, overhead: Resources) -> Resources:
    """A new node's room for pending pods: its allocatable less its DaemonSets (never negative)."""
    used = dict(overhead.extended)
    return Resources(
        cpu_m=max(allocatable.cpu_m - overhead.cpu_m, 0),
        memory=max(allocatable.memory - overhead.memory, 0),
        pods=max(allocatable.pods - overhead.pods, 0),
        extended=tuple((k, max(q - used.get(k, 0), 0)) for k, q in allocatable.extended),
    )
