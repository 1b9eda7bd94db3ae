"""fleet: an instance burst in one provider region, then the burst goes away.

The FleetAutoscaler `fleet/<provider>/<region>` creates data-plane clusters (through OCM) as
the instances need them, places every instance, and once the instances are deleted removes
the clusters that are no longer needed, without creating any again (no flaps).

`run_fleet_burst` drives a running region loop and returns the headless summary:
    {"scenario": "fleet", "instances": n, "instances_placed": n, "clusters_created": n,
     "clusters_deleted": n, "clusters_final": n, "flaps": 0, "phases_seen": [...],
     "ocm_clusters_leaked": 0, "seconds_to_all_placed": s}
It ends once the region is steady: `SETTLED_EVALUATIONS` evaluations made after the deletions
in a row with every cluster ready, nothing to add or remove, and nothing changing (so an empty
cluster's deprovisioning, and any scale-up it would cause, happen before the summary).
What it needs from the outside world is passed in: how many clusters OCM still holds (for the
leak count). The demo's processes (fake OCM, agent API, fake agents, worker) start it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

from temporalio.client import Client, WorkflowHandle, WorkflowUpdateFailedError
from temporalio.service import RPCError

from activities.updates import cause_of, execute_update
from scaling.fleet import contracts
from scaling.fleet.contracts import CreateInstanceRequest
from scaling.fleet.lifecycle import DataPlaneClusterState
from scaling.fleet.models import ClusterPhase
from scaling.fleet.region import RegionStatus
from workflows.fleet.autoscaler import FleetAutoscalerWorkflow
from workflows.fleet.cluster import DataPlaneClusterWorkflow

PHASE_ORDER = [p.value for p in ClusterPhase]
SETTLED_EVALUATIONS = 5  # evaluations in a row with nothing moving before the scenario calls it done
RPC_TIMEOUT = timedelta(seconds=30)


DEMO_REGION_LIMIT = 100  # units: the demo's region limit unless its burst needs more


def demo_region_limit(instances: int) -> int:
    """Room in the region's limit for a burst of `instances` of the demo's biggest size (2
    units), as --pods sizes the node demo's maxNodes: the limit must not refuse the burst."""
    return max(DEMO_REGION_LIMIT, 2 * instances)


def demo_fleet_config(provider: str = "aws", region: str = "us-east-1", limit: int | None = DEMO_REGION_LIMIT) -> str:
    """A small fleet in seed 000's shapes (kas-fleet-manager's configuration files): one region,
    `standard` instances of 1 or 2 units."""
    limit_text = "null" if limit is None else str(limit)
    return f"""
supported_providers:
  - name: {provider}
    default: true
    regions:
      - name: {region}
        default: true
        supported_instance_type:
          standard: {{limit: {limit_text}, min_available_capacity_slack_streaming_units: 0}}
dynamic_scaling:
  enable_dynamic_data_plane_scale_up: true
  enable_dynamic_data_plane_scale_down: true
  compute_machine_per_cloud_provider:
    {provider}:
      cluster_wide_workload:
        compute_machine_type: m5.2xlarge
        compute_node_autoscaling: {{min_compute_nodes: 6, max_compute_nodes: 18}}
      kafka_workload_per_instance_type:
        standard:
          compute_machine_type: r5.xlarge
          compute_node_autoscaling: {{min_compute_nodes: 3, max_compute_nodes: 18}}
          expected_max_streaming_units: 10
supported_instance_types:
  - id: standard
    sizes:
      - {{id: x1, capacity_consumed: 1}}
      - {{id: x2, capacity_consumed: 2}}
node_prewarming:
  standard: {{num_reserved_instances: 1, base_streaming_unit_size: x1}}
"""


def _fingerprint(st: RegionStatus) -> tuple[Any, ...]:
    """What must not move in a steady region: its clusters and phases, and its counters."""
    clusters = tuple((c.id, c.phase.value) for c in st.clusters)
    return clusters, st.clusters_created, st.clusters_deleted, st.clusters_failed, st.flaps


def _quiet(st: RegionStatus) -> bool:
    """Every cluster ready, nothing waiting, and the last evaluation neither adds nor removes."""
    return (
        st.instances_waiting == 0
        and all(c.phase == ClusterPhase.READY for c in st.clusters)
        and not any(t.remove is not None or t.scale_up.needed for t in st.last_evaluation)
    )


class SteadyState:
    """The region is steady once `SETTLED_EVALUATIONS` evaluations (made after
    `after_evaluation`) in a row saw it quiet and unchanged. A removal shows as a cluster
    deprovisioning (or as the evaluation's `remove`) until the cluster has left the registry,
    and a scale-up as a cluster not ready, so a region that is still moving never passes."""

    def __init__(self, after_evaluation: int, evaluations: int = SETTLED_EVALUATIONS) -> None:
        self.after_evaluation = after_evaluation
        self.evaluations = evaluations
        self.since: int | None = None  # the first evaluation of the current quiet stretch
        self.fingerprint: tuple[Any, ...] | None = None

    def check(self, st: RegionStatus) -> bool:
        if st.evaluations <= self.after_evaluation or not _quiet(st):
            self.since = self.fingerprint = None
            return False
        fp = _fingerprint(st)
        if fp != self.fingerprint:
            self.since, self.fingerprint = st.evaluations, fp
        return st.evaluations - self.since >= self.evaluations


async def _status(handle: WorkflowHandle) -> RegionStatus | None:
    try:
        return await handle.query(FleetAutoscalerWorkflow.status)
    except RPCError:
        return None  # a query can race with a continue-as-new hand-over; ask again


async def run_fleet_burst(
    client: Client,
    provider: str,
    region: str,
    *,
    instances: int,
    ocm_live_clusters: Callable[[], Awaitable[int]],
    timeout_s: float = 300.0,
    size: str = "x1",
    say: Callable[[str], None] = print,
) -> dict[str, Any]:
    handle = client.get_workflow_handle(contracts.autoscaler_workflow_id(provider, region))
    seen_clusters: set[str] = set()
    phases: set[str] = set()
    deadline = time.monotonic() + timeout_s

    async def poll(check: Callable[[RegionStatus], bool], what: str) -> RegionStatus:
        while True:
            st = await _status(handle)
            if st is not None:
                for c in st.clusters:
                    seen_clusters.add(c.id)
                    phases.add(c.phase.value)
                if check(st):
                    return st
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"{what} not reached in {timeout_s:.0f}s (last status: {st and st.model_dump_json()[:800]})"
                )
            await asyncio.sleep(0.5)

    t0 = time.monotonic()
    for i in range(instances):
        req = CreateInstanceRequest(id=f"burst-{i}", instance_type="standard", size=size)
        try:
            await execute_update(handle, FleetAutoscalerWorkflow.create_instance, req, rpc_timeout=RPC_TIMEOUT)
        except WorkflowUpdateFailedError as err:  # the validator's reason, not just "update failed"
            raise RuntimeError(f"instance {req.id} refused: {cause_of(err)}") from None
    say(f"{instances} instances created; waiting until every one is placed")
    st = await poll(lambda s: s.instances_placed == instances and s.instances_waiting == 0, "all instances placed")
    seconds_to_all_placed = time.monotonic() - t0
    placed = st.instances_placed
    say(f"all {placed} placed on {len(st.clusters)} clusters in {seconds_to_all_placed:.1f}s; deleting them")

    for i in range(instances):
        await execute_update(handle, FleetAutoscalerWorkflow.delete_instance, f"burst-{i}", rpc_timeout=RPC_TIMEOUT)
    # Only evaluations that ran after the last delete count: until then `last_evaluation` is the
    # one made while the burst was still placed (it never names a removal), and a loop busy
    # sending the released instances to their clusters can take seconds to evaluate again.
    after = await poll(lambda s: True, "a status after the deletions")
    steady = SteadyState(after_evaluation=after.evaluations)
    st = await poll(steady.check, f"a steady region ({SETTLED_EVALUATIONS} evaluations without a change)")
    say(
        f"steady {time.monotonic() - t0:.1f}s after the burst began: {len(st.clusters)} clusters, {st.clusters_deleted} deleted"
    )
    # Phases clusters went through that a poll may have missed: their own recorded history.
    for cid in seen_clusters:
        try:
            cst: DataPlaneClusterState = await client.get_workflow_handle(contracts.cluster_workflow_id(cid)).query(
                DataPlaneClusterWorkflow.status
            )
        except RPCError:
            continue
        phases.update(h.phase.value for h in cst.history)
    live = await ocm_live_clusters()
    return {
        "scenario": "fleet",
        "instances": instances,
        "instances_placed": placed,
        "clusters_created": st.clusters_created,
        "clusters_deleted": st.clusters_deleted,
        "clusters_final": len(st.clusters),
        "flaps": st.flaps,
        "phases_seen": sorted(phases, key=PHASE_ORDER.index),
        "ocm_clusters_leaked": max(0, live - len(st.clusters)),
        "seconds_to_all_placed": round(seconds_to_all_placed, 2),
    }
