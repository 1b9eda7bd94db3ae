"""The fleet loop's domain: data-plane cluster phases, per-instance-type capacity, managed
instances. Plain pydantic models shared by the rules, the workflows and the contracts."""

from __future__ import annotations

from enum import Enum
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PlainSerializer, model_validator
from pydantic.alias_generators import to_camel


class ClusterPhase(str, Enum):
    """A data-plane cluster's lifecycle, named as kas-fleet-manager names its statuses."""

    ACCEPTED = "cluster_accepted"
    PROVISIONING = "cluster_provisioning"
    PROVISIONED = "cluster_provisioned"  # terraforming: machine pools, DNS, IdP, resources, addons
    WAITING = "waiting_for_kas_fleetshard_operator"
    READY = "ready"
    DEPROVISIONING = "deprovisioning"
    CLEANUP = "cleanup"
    DELETED = "deleted"
    FAILED = "failed"


# A scale-up is already under way while any cluster of the type/region is in one of these.
SCALE_UP_ONGOING = frozenset(
    {ClusterPhase.ACCEPTED, ClusterPhase.PROVISIONING, ClusterPhase.PROVISIONED, ClusterPhase.WAITING}
)
# These accept no instances and count for no capacity or limit.
NO_CAPACITY = frozenset({ClusterPhase.DEPROVISIONING, ClusterPhase.CLEANUP, ClusterPhase.DELETED, ClusterPhase.FAILED})
# Terminal: the workflow has finished.
FINISHED = frozenset({ClusterPhase.DELETED, ClusterPhase.FAILED})


class TypeCapacity(BaseModel):
    """Seed 000's dynamic capacity info for one instance type on one cluster: max_nodes from the
    machine pool (set at terraforming), max_units/remaining_units as the agent last reported."""

    max_nodes: int = 0
    max_units: int | None = None  # None until the agent has reported
    remaining_units: int | None = None


class TypeUnits(BaseModel):
    """One instance type's streaming units on one cluster, as the region's rules read them."""

    max_units: int | None = None  # the agent's figure; None before its first report
    consumed_units: int = 0  # what growth placed there (authoritative before the next report)


# kas-fleet-manager's cluster types: its own clusters, and an organisation's registered ones,
# which its dynamic scaling and region limits leave alone.
ClusterType = Literal["managed", "enterprise"]
MAX_REJECTED_BY = 20  # clusters an instance remembers refusing it


class ClusterRecord(BaseModel):
    """One data-plane cluster as the region's autoscaler sees it: what the rules read.

    `types` holds every instance type the cluster runs with its units (a cluster growth creates
    runs one; one listed in the configuration may run several, e.g. "standard,developer").
    `manual` clusters were registered, not created: growth never removes them. `schedulable` and
    `instance_limit` are upstream's dataplane-cluster-configuration fields (-1 = no limit)."""

    id: str
    instance_type: str  # the type it was created for, or the first it lists
    types: dict[str, TypeUnits] = Field(default_factory=dict)
    phase: ClusterPhase = ClusterPhase.ACCEPTED
    instances: int = 0  # placed managed instances (reserved ones never count)
    cluster_type: ClusterType = "managed"
    manual: bool = False
    schedulable: bool = True
    instance_limit: int = -1
    deletion_blocked: bool = False  # an operator said: never remove this one
    deletion_approved: bool = False  # an operator approved its removal (when approval is required)
    delete_sent: bool = False  # the re-check passed and the cluster was told to delete itself

    @model_validator(mode="before")
    @classmethod
    def _one_type_shape(cls, data: Any) -> Any:
        """Records from before per-type units (histories, continued runs) held one type's
        max_units/consumed_units at the top: they become that type's entry."""
        if isinstance(data, dict) and ("max_units" in data or "consumed_units" in data or "types" not in data):
            data = dict(data)
            legacy = {k: data.pop(k) for k in ("max_units", "consumed_units") if k in data}
            if not data.get("types") and data.get("instance_type"):
                data["types"] = {data["instance_type"]: legacy}
        return data

    def units(self, instance_type: str) -> TypeUnits:
        """The type's entry (a detached empty one when the cluster does not run the type)."""
        return self.types.get(instance_type) or TypeUnits()

    @property
    def consumed_units(self) -> int:
        return sum(u.consumed_units for u in self.types.values())


class InstanceVersions(BaseModel):
    """Kafka, Strimzi and Kafka IBP versions of an instance (ManagedKafka spec.versions, or
    what the agent reports running); "" = not known."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore")

    kafka: str = ""
    strimzi: str = ""
    kafka_ibp: str = ""


# An instance on a cluster, as the agent's per-instance reports move it (kas-fleet-manager's
# provisioning -> ready, deprovision -> deleting; failed on an error, rejected when the agent
# refuses it). Deleted instances leave the cluster's list.
InstancePhase = Literal["placed", "ready", "deleting", "failed", "rejected"]


class ManagedInstance(BaseModel):
    """A managed (Kafka-like) instance: its type, size and the streaming units it consumes.

    `cluster_id` is empty while it waits for a ready cluster with room. On its cluster, `phase`
    follows the agent's reports, `deleted` is ManagedKafka spec.deleted (removal asked, until the
    agent reports it gone) and `versions` what the agent last reported running."""

    id: str
    instance_type: str
    size: str
    units: int = Field(ge=1)
    quota: int = Field(default=0, ge=0)  # its size's quotaConsumed (0 = not known: units stand in)
    cluster_id: str = ""
    namespace: str = ""
    labels: dict[str, str] = Field(default_factory=dict)
    phase: InstancePhase = "placed"
    deleted: bool = False
    versions: InstanceVersions = Field(default_factory=InstanceVersions)
    message: str = ""  # the agent's reason when failed or rejected
    rejected_by: list[str] = Field(default_factory=list)  # clusters whose agent refused it (latest last)


def _without_defaults(instance: ManagedInstance) -> dict[str, Any]:
    return instance.model_dump(mode="json", exclude_defaults=True)


# A ManagedInstance as it crosses history in a continue-as-new input (the region's queue, an index
# shard's records): without its fields at their defaults, which a queued or placed instance mostly
# has (about 70 bytes instead of 230); it reads back as the same ManagedInstance.
CompactInstance = Annotated[ManagedInstance, PlainSerializer(_without_defaults)]
