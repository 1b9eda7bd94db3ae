"""Which pods may land on which nodes: taints/tolerations, nodeSelector, node groups.

A node growth creates carries the group's labels plus its own (group, pool, instance type,
arch, os, topology); `node_labels_for` is the one place that set is defined, so the planner's
idea of a future node and the node the provider creates agree.

Topology (`pool_topology`): a KWOK pool's nodes carry topology.kubernetes.io/region and zone
from its config (`region`, `zone`; defaults "kwok" and "kwok-a"). A Hetzner node's region is
its location (fsn1), as hcloud-cloud-controller-manager labels it; the planner knows it only
when the pool's config names exactly one location (with several, the provider picks at create
time). The zone (the datacenter, e.g. fsn1-dc14) is the cloud controller manager's to set.
kubernetes.io/hostname is the node's name, unknown before it exists: a planned node has none,
so a pod selecting a hostname matches existing nodes only.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from scaling.kube.models import (
    LABEL_ARCH,
    LABEL_INSTANCE_TYPE,
    LABEL_OS,
    LABEL_REGION,
    LABEL_ZONE,
    NODE_OS,
    NodeSelectorTerm,
    PodInfo,
    Resources,
    Taint,
    Toleration,
)
from scaling.kube.quantity import memory_bytes
from scaling.kube.scheduling.nodeaffinity import admits
from scaling.kube.scheduling.tainttoleration import untolerated
from scaling.nodes.models import LABEL_GROUP, LABEL_POOL, NodeGroup, PodProblem, Pool, ServerType
from scaling.nodes.nodegroups import flatten_pools
from scaling.nodes.providers import hetzner


def tolerates(tolerations: Iterable[Toleration], taints: Iterable[Taint]) -> bool:
    """True when every NoSchedule/NoExecute taint is tolerated (PreferNoSchedule never blocks)."""
    return untolerated(list(tolerations), taints) is None


def selector_matches(node_selector: Mapping[str, str], labels: Mapping[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in node_selector.items())


def labels_admit(
    node_selector: Mapping[str, str],
    node_affinity: Sequence[NodeSelectorTerm],
    labels: Mapping[str, str],
    node_name: str = "",
) -> bool:
    """nodeSelector and required node affinity admit a node with these labels ("" = a future node)."""
    return admits(node_selector, node_affinity, labels, node_name)


def pod_fits_node_shape(pod: PodInfo, labels: Mapping[str, str], taints: Iterable[Taint], node_name: str = "") -> bool:
    """Labels and taints admit the pod (resources are checked elsewhere)."""
    return labels_admit(pod.node_selector, pod.node_affinity, labels, node_name) and tolerates(pod.tolerations, taints)


KWOK_REGION = "kwok"
KWOK_ZONE = "kwok-a"


def pool_topology(pool: Pool) -> dict[str, str]:
    """The topology labels every node of `pool` carries (those known before it is created)."""
    if pool.provider == "kwok":
        return {
            LABEL_REGION: str(pool.config.get("region") or KWOK_REGION),
            LABEL_ZONE: str(pool.config.get("zone") or KWOK_ZONE),
        }
    if pool.provider == hetzner.PROVIDER:
        locations = hetzner.pool_locations(pool.config)
        return hetzner.topology_labels(locations[0]) if len(locations) == 1 else {}
    return {}


def pool_resources(pool: Pool) -> tuple[tuple[str, int], ...]:
    """Extended resources a KWOK pool's nodes offer beyond their type's (config `resources`:
    {"example.com/foo": 4}); other providers' pools declare none."""
    if pool.provider != "kwok":
        return ()
    raw = pool.config.get("resources") or {}
    if not isinstance(raw, dict):
        return ()
    return tuple(sorted((str(k), memory_bytes(v)) for k, v in raw.items()))


def node_allocatable(pool: Pool, server_type: ServerType) -> Resources:
    """What a node of `pool` offers: its type's allocatable and the pool's own resources."""
    extra = pool_resources(pool)
    if not extra:
        return server_type.allocatable
    return server_type.allocatable + Resources(extended=extra)


def node_labels_for(group: NodeGroup, pool: Pool, server_type: ServerType | None) -> dict[str, str]:
    """The labels a node of `pool` will carry; arch only when the type is known."""
    labels = dict(group.labels)
    labels.update(pool_topology(pool))
    labels[LABEL_OS] = NODE_OS
    labels[LABEL_GROUP] = group.name
    labels[LABEL_POOL] = pool.name
    labels[LABEL_INSTANCE_TYPE] = server_type.name if server_type else pool.server_type.lower()
    if server_type is not None:
        labels[LABEL_ARCH] = server_type.arch
    return labels


def eligible_pools(
    node_selector: Mapping[str, str],
    tolerations: Sequence[Toleration],
    group: NodeGroup,
    catalogue: Mapping[tuple[str, str], ServerType],
    pools: Sequence[Pool] | None = None,
    node_affinity: Sequence[NodeSelectorTerm] = (),
) -> list[Pool]:
    """The group's pools whose future nodes admit a pod with this selector, affinity and tolerations."""
    if not tolerates(tolerations, group.template_taints):
        return []
    out = []
    for pool in pools if pools is not None else flatten_pools(group):
        stype = catalogue.get((pool.provider, pool.server_type.lower()))
        if labels_admit(node_selector, node_affinity, node_labels_for(group, pool, stype)):
            out.append(pool)
    return out


def _problem(pod: PodInfo, reason: str, message: str) -> PodProblem:
    return PodProblem(namespace=pod.namespace, name=pod.name, uid=pod.uid, reason=reason, message=message)


def match_pods_to_groups(
    pods: Sequence[PodInfo],
    groups: Sequence[NodeGroup],
    catalogue: Mapping[tuple[str, str], ServerType],
) -> tuple[dict[str, list[PodInfo]], list[PodProblem]]:
    """Each pod to the one group whose nodes would admit it; ambiguity and no match are problems.

    Pods sharing a selector and tolerations are matched once (thousands of replicas are common).
    """
    flat = {g.name: flatten_pools(g) for g in groups}
    cache: dict[tuple, list[str]] = {}
    matched: dict[str, list[PodInfo]] = {g.name: [] for g in groups}
    problems: list[PodProblem] = []
    for pod in pods:
        key = (tuple(sorted(pod.node_selector.items())), tuple(pod.tolerations), tuple(pod.node_affinity))
        names = cache.get(key)
        if names is None:
            names = [
                g.name
                for g in groups
                if eligible_pools(
                    pod.node_selector, pod.tolerations, g, catalogue, flat[g.name], node_affinity=pod.node_affinity
                )
            ]
            cache[key] = names
        if len(names) == 1:
            matched[names[0]].append(pod)
        elif names:
            problems.append(
                _problem(
                    pod,
                    "MultipleNodeGroups",
                    f"pod matches node groups {', '.join(sorted(names))}; make their labels or taints disjoint",
                )
            )
        else:
            problems.append(_problem(pod, "NoMatchingNodeGroup", "no node group's labels and taints admit this pod"))
    return {k: v for k, v in matched.items() if v}, problems
