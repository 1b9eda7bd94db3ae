"""Streaming-unit capacity of a region's clusters for one instance type (seed 000: free units are
max minus consumed over the clusters that take or will take instances).

Clusters in deprovisioning, cleanup, deleted or failed give no capacity and count for no
limit. Clusters not ready yet (or ready but not yet reported) count with the configured
expected capacity. `consumed_units` is growth's own record of what it placed.
"""

from __future__ import annotations

from collections.abc import Iterable

from pydantic import BaseModel, ConfigDict, Field

from scaling.fleet.config import FleetConfig
from scaling.fleet.models import NO_CAPACITY, SCALE_UP_ONGOING, ClusterPhase, ClusterRecord


class TypeRules(BaseModel):
    """What the scaling rules need to know about one instance type in one region."""

    instance_type: str
    limit: int | None = Field(default=None, ge=0)  # None = no limit; 0 = always reached
    slack: int = Field(default=0, ge=0)  # min available capacity slack; 0 never triggers
    biggest_units: int = Field(ge=1)  # units of the type's biggest size
    expected_units: int = Field(ge=1)  # capacity a cluster counts with before the agent reports


def type_rules(cfg: FleetConfig, provider: str, region: str) -> dict[str, TypeRules]:
    """The rules of every instance type the region supports, from the fleet configuration."""
    reg = cfg.region(provider, region)
    if reg is None:
        return {}
    out: dict[str, TypeRules] = {}
    for itype, limits in reg.supported_instance_type.items():
        spec = cfg.instance_type(itype)
        if spec is None:
            continue
        machines = cfg.machines(provider, itype)
        expected = machines.expected_max_streaming_units if machines else None
        biggest = spec.biggest_units()
        out[itype] = TypeRules(
            instance_type=itype,
            limit=limits.limit,
            slack=limits.min_available_capacity_slack_streaming_units,
            biggest_units=biggest,
            expected_units=expected or biggest,
        )
    return out


def gives_capacity(cluster: ClusterRecord) -> bool:
    return cluster.phase not in NO_CAPACITY


def supports(cluster: ClusterRecord, instance_type: str) -> bool:
    return instance_type in cluster.types


def scaled(cluster: ClusterRecord, instance_type: str) -> bool:
    """Whether the cluster counts in the type's dynamic scaling: it runs the type and is not an
    enterprise cluster (upstream keeps those out of dynamic scaling and region limits)."""
    return cluster.cluster_type != "enterprise" and supports(cluster, instance_type)


def cluster_capacity_units(cluster: ClusterRecord, rules: TypeRules) -> int:
    """Max streaming units of the type: the agent's figure, or the expected capacity until it reports."""
    max_units = cluster.units(rules.instance_type).max_units
    return max_units if max_units is not None else rules.expected_units


def cluster_free_units(cluster: ClusterRecord, rules: TypeRules) -> int:
    used = cluster.units(rules.instance_type).consumed_units
    return max(0, cluster_capacity_units(cluster, rules) - used)


def can_hold_biggest(cluster: ClusterRecord, rules: TypeRules) -> bool:
    return cluster_free_units(cluster, rules) >= rules.biggest_units


class CapacityTally(BaseModel):
    """The region's figures for one instance type that the scale-up rule reads. Kept as sums
    and counts so a scale-down dry run can take one cluster out in O(1) (`less`); small, so a
    recorded decision carries it as its input (scaling.fleet.decisions)."""

    model_config = ConfigDict(frozen=True)

    total_units: int = 0
    consumed_units: int = 0
    holders_of_biggest: int = 0  # clusters with room for the biggest size
    scale_up_ongoing: int = 0  # clusters in accepted/provisioning/provisioned/waiting

    @property
    def free_units(self) -> int:
        return self.total_units - self.consumed_units

    def less(self, capacity_units: int, consumed_units: int, holds_biggest: bool, ongoing: bool) -> CapacityTally:
        """The tally with one counted cluster of these figures taken out."""
        return CapacityTally(
            total_units=self.total_units - capacity_units,
            consumed_units=self.consumed_units - consumed_units,
            holders_of_biggest=self.holders_of_biggest - int(holds_biggest),
            scale_up_ongoing=self.scale_up_ongoing - int(ongoing),
        )

    def without(self, cluster: ClusterRecord, rules: TypeRules) -> CapacityTally:
        """The tally with `cluster` (one that was counted) taken out."""
        if not gives_capacity(cluster):
            return self
        return self.less(
            cluster_capacity_units(cluster, rules),
            cluster.units(rules.instance_type).consumed_units,
            can_hold_biggest(cluster, rules),
            cluster.phase in SCALE_UP_ONGOING,
        )


def tally_capacity(clusters: Iterable[ClusterRecord], rules: TypeRules) -> CapacityTally:
    """Sum the clusters that run `rules.instance_type`, give capacity and are scaled."""
    total = consumed = holders = ongoing = 0
    for c in clusters:
        if not scaled(c, rules.instance_type) or not gives_capacity(c):
            continue
        cap = cluster_capacity_units(c, rules)
        used = c.units(rules.instance_type).consumed_units
        total += cap
        consumed += used
        holders += int(cap - used >= rules.biggest_units)
        ongoing += int(c.phase in SCALE_UP_ONGOING)
    return CapacityTally(
        total_units=total, consumed_units=consumed, holders_of_biggest=holders, scale_up_ongoing=ongoing
    )


def ready_clusters(clusters: Iterable[ClusterRecord], instance_type: str) -> list[ClusterRecord]:
    """The ready clusters that count in the type's dynamic scaling."""
    return [c for c in clusters if scaled(c, instance_type) and c.phase == ClusterPhase.READY]
