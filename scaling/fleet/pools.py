"""Terraforming's machine pools: one autoscaled pool per supported instance type (seed 000)."""

from __future__ import annotations

from scaling.fleet.config import WorkloadMachines
from scaling.fleet.contracts import INSTANCE_PROFILE_LABEL, CreateMachinePoolInput, MachinePoolTaint, machine_pool_id

ZONES = 3  # a multi-AZ cluster spreads every pool over three zones


def cluster_multi_az(instance_type: str, machines: WorkloadMachines | None) -> bool:
    """Seed 000: clusters for `standard` instances are multi-AZ, others single-AZ; the config's
    `multi_az` overrides."""
    if machines is not None and machines.multi_az is not None:
        return machines.multi_az
    return instance_type == "standard"


def machine_pool_bounds(min_nodes: int, max_nodes: int, multi_az: bool) -> tuple[int, int]:
    """(min, max) replicas of an autoscaled pool. At least one node (three multi-AZ); a multi-AZ
    pool's bounds are multiples of 3 (min rounded up, max rounded down but never below min)."""
    if not multi_az:
        low = max(1, min_nodes)
        return low, max(low, max_nodes)
    low = max(ZONES, -(-min_nodes // ZONES) * ZONES)
    high = max(low, (max_nodes // ZONES) * ZONES)
    return low, high


def machine_pool_input(
    ocm_id: str, cluster_id: str, instance_type: str, machines: WorkloadMachines, multi_az: bool
) -> CreateMachinePoolInput:
    """The pool `kafka-<type>`: labelled and NoExecute-tainted with the instance profile type,
    so only that type's instances land on it."""
    low, high = machine_pool_bounds(
        machines.compute_node_autoscaling.min_compute_nodes,
        machines.compute_node_autoscaling.max_compute_nodes,
        multi_az,
    )
    return CreateMachinePoolInput(
        ocm_id=ocm_id,
        cluster_id=cluster_id,
        pool_id=machine_pool_id(instance_type),
        instance_type=instance_type,
        machine_type=machines.compute_machine_type,
        min_nodes=low,
        max_nodes=high,
        multi_az=multi_az,
        labels={INSTANCE_PROFILE_LABEL: instance_type},
        taints=[MachinePoolTaint(key=INSTANCE_PROFILE_LABEL, value=instance_type, effect="NoExecute")],
    )
