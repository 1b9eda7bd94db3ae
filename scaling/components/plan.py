"""What a component planner returns, and what it reads: a component's groups, its plan input,
the changes (one TidbCluster's replicas each) and the headroom it could not place.

The planners that make a plan are in `scaling.components.planners`.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from scaling.components.contracts import ComponentMetrics, Shape
from scaling.components.naming import auto_cluster_name
from scaling.components.spec import AutoResource, ComponentSpec

HOMOGENEOUS = ""  # group key and capacity key of the base cluster's instances
EXTERNAL_GROUP = "external"
PD_GROUP_PREFIX = "pd-auto-scaling"  # PD's group label prefix; growth's own groups use it too
GROUP_LABEL = "group"
RESOURCE_TYPE_LABEL = "resource-type"
SPECIAL_USE_LABEL = "specialUse"
HOT_REGION = "hotRegion"


Direction = Literal["out", "in"]


class Group(BaseModel):
    """One heterogeneous group as it stands (its TidbCluster exists, maybe at 0 replicas)."""

    name: str  # auto-<hash>
    group: str  # tidb.pingcap.com/autoscaling-group
    resource_type: str
    replicas: int
    labels: dict[str, str] = Field(default_factory=dict)


class PlanInput(BaseModel):
    namespace: str
    autoscaler: str
    base_cluster: str
    spec: ComponentSpec
    homogeneous_replicas: int
    homogeneous_shape: Shape  # the base cluster's cpu/memory requests
    base_cpu: str = ""  # quantity text of the base requests (external groups copy them)
    base_memory: str = ""
    base_storage: str = ""
    groups: list[Group] = Field(default_factory=list)
    metrics: ComponentMetrics | None = None
    # How many more of each shape the nodes hold (keys: HOMOGENEOUS, resource types); None or
    # a missing key: unknown, treated as unlimited.
    fits: dict[str, int] | None = None
    growth_manages_nodes: bool = False


class Change(BaseModel):
    """Set one TidbCluster's replicas for this component (create it first if missing)."""

    cluster: str  # base cluster or auto-<hash>
    group: str  # HOMOGENEOUS or the group label
    direction: Direction
    from_replicas: int
    to_replicas: int
    create: bool = False  # the auto cluster does not exist yet
    resource_type: str = ""
    cpu: str = ""
    memory: str = ""
    storage: str = ""
    labels: dict[str, str] = Field(default_factory=dict)
    reason: str = ""


class Headroom(BaseModel):
    """Instances that need nodes the cluster does not have (for the node loop / an operator)."""

    resource_type: str  # HOMOGENEOUS or a resource type
    shape: Shape
    count: int
    reason: str


class ComponentPlan(BaseModel):
    component: str
    changes: list[Change] = Field(default_factory=list)
    headroom: list[Headroom] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)

    def target(self, cluster: str) -> int | None:
        for c in self.changes:
            if c.cluster == cluster:
                return c.to_replicas
        return None


def group_labels(component: str, resource_type: str) -> dict[str, str]:
    """growth's own group labels (the same PD gives a group, so the two planners agree)."""
    labels = {GROUP_LABEL: f"{PD_GROUP_PREFIX}-{component}-{resource_type}", RESOURCE_TYPE_LABEL: resource_type}
    if component == "tikv":
        labels[SPECIAL_USE_LABEL] = HOT_REGION
    return labels


def group_name(inp: PlanInput, resource: AutoResource, labels: dict[str, str] | None) -> str:
    return auto_cluster_name(
        inp.namespace, inp.autoscaler, inp.spec.component, resource.cpu, resource.memory, resource.storage, labels
    )
