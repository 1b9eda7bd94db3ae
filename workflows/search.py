"""Search attributes that make the Web UI's workflow list useful (filter by cluster, pool, phase).

Registered on the dev server by the demo (`--search-attribute`); on another server register
them once with `temporal operator search-attribute create`. Workflows set them only when their
input says so, because an unregistered attribute fails the workflow task.
"""

from __future__ import annotations

from temporalio.common import SearchAttributeKey, SearchAttributePair, TypedSearchAttributes

from scaling.nodes.scale_up.requests import NodeRequestStatus

CLUSTER = SearchAttributeKey.for_keyword("GrowthCluster")
NODE_GROUP = SearchAttributeKey.for_keyword("GrowthNodeGroup")
POOL = SearchAttributeKey.for_keyword("GrowthPool")
PHASE = SearchAttributeKey.for_keyword("GrowthPhase")
NODE = SearchAttributeKey.for_keyword("GrowthNode")
PROVIDER = SearchAttributeKey.for_keyword("GrowthProvider")  # fleet: cloud provider of a region
REGION = SearchAttributeKey.for_keyword("GrowthRegion")  # fleet: provider region

ALL = (CLUSTER, NODE_GROUP, POOL, PHASE, NODE, PROVIDER, REGION)


def fleet_attributes(provider: str, region: str, phase: str, cluster: str = "") -> list:
    """A fleet workflow's attributes: provider, region, phase (and the cluster id, if one)."""
    pairs = [PROVIDER.value_set(provider), REGION.value_set(region), PHASE.value_set(phase)]
    return [*pairs, CLUSTER.value_set(cluster)] if cluster else pairs


def request_attributes(cluster: str, status: NodeRequestStatus) -> list:
    return [
        CLUSTER.value_set(cluster),
        NODE_GROUP.value_set(status.group),
        POOL.value_set(status.current_pool or "-"),
        PHASE.value_set(status.phase.value),
    ]


def initial_attributes(cluster: str, phase: str) -> TypedSearchAttributes:
    return TypedSearchAttributes([SearchAttributePair(CLUSTER, cluster), SearchAttributePair(PHASE, phase)])


def components_attributes(cluster: str, phase: str) -> list:
    """A ComponentAutoscaler's attributes: `<namespace>/<TidbCluster>` and its phase."""
    return [CLUSTER.value_set(cluster), PHASE.value_set(phase)]
