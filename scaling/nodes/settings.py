"""NodeAutoscaler's settings: what an operator sets when starting a cluster's loop."""

from __future__ import annotations

from pydantic import BaseModel, Field

# The soft taints' names cross the loop's history in each evaluation: bounded whatever CA allowed.
MAX_BULK_SOFT_TAINT_COUNT = 100


class AutoscalerSettings(BaseModel):
    cluster: str
    scan_interval_s: float = 10.0
    max_nodes_total: int | None = Field(
        default=None, ge=0, description="growth nodes in the cluster at most (none: no cap)"
    )
    max_price_per_hour_total: float | None = Field(
        default=None,
        ge=0,
        allow_inf_nan=False,
        description="most the cluster's growth nodes may cost per hour, in the server-type catalogue's "
        "prices (EUR for Hetzner); the planner adds no node past it (scaling.nodes.scale_up.money)",
    )
    readiness_timeout_s: float = 300.0
    readiness_poll_s: float = 2.0
    max_attempts: int = 5
    enforce_min_nodes: bool = Field(
        default=True,
        description="request nodes for pools below their minNodes even without pending pods "
        "(Cluster Autoscaler's --enforce-node-group-min-size)",
    )
    max_requests_in_flight: int = Field(
        default=1500,
        ge=1,
        description="most NodeRequests in flight at once; pods beyond wait for a later loop (they are "
        "the loop's state, carried across continue-as-new as a compact table: at 1,500, with every other "
        "part of the state at its bound too, tests/scaling/nodes/test_payloads.py measures ~245 KB of the "
        "256 KB aim; like Cluster Autoscaler's --max-nodes-per-scaleup)",
    )
    request_ttl_s: float = 3600.0
    use_search_attributes: bool = False
    # Bound the history of one run even when the server does not suggest continue-as-new yet.
    iterations_per_run: int = 500
    # Scale-down (seed 004 steps 8-9: a growth node without pods is tainted and removed once its
    # ScaleDownAt passes; Cluster Autoscaler's rules for underused nodes); per-group timers and
    # thresholds come from each NodeGroupWithPriority's scaleDown.
    scale_down_enabled: bool = True
    max_scale_down_per_loop: int = 10
    max_bulk_soft_taint_count: int = Field(
        default=10,
        le=MAX_BULK_SOFT_TAINT_COUNT,
        description="unneeded nodes soft-tainted DeletionCandidateOfClusterAutoscaler:PreferNoSchedule, and "
        "nodes needed again untainted, per loop; 0 or less: none, those left lifted (Cluster Autoscaler's "
        "--max-bulk-soft-taint-count; "
        f"at most {MAX_BULK_SOFT_TAINT_COUNT}: each name crosses the loop's history)",
    )
    max_bulk_soft_taint_time_s: float = Field(
        default=3.0,
        allow_inf_nan=False,
        description="seconds a loop spends on those taints at most (Cluster Autoscaler's --max-bulk-soft-taint-time)",
    )
    node_deletion_candidate_ttl_s: float = Field(
        default=0.0,
        ge=0,
        allow_inf_nan=False,
        description="on the loop's first scale-down evaluation, a node's soft taint younger than this starts "
        "its unneeded timer at the time the taint says, so the timers a stopped Cluster Autoscaler kept carry "
        "over; 0: off (Cluster Autoscaler's --node-deletion-candidate-ttl)",
    )
    scale_down_unready_time_s: float = Field(
        default=1200.0,
        description="seconds a NotReady growth node must be unneeded before it is removed "
        "(Cluster Autoscaler's scale-down-unready-time; Ready nodes wait their group's unneededTime)",
    )
    pdb_retry_s: float = 120.0  # how long a drain retries evictions refused by a PDB (429)
    eviction_retry_s: float = 2.0
    drain_timeout_s: float = 300.0  # evicted pods must be gone within this
    orphan_grace_s: float = 600.0
    capacity_memory_s: float = Field(
        default=180.0, description="seconds a server type that had no capacity is skipped by the planner"
    )
    # MachineGC (nodes/<cluster>/gc) started by the loop as a child that outlives it.
    machine_gc: bool = Field(default=True, description="run MachineGC (nodes/<cluster>/gc) beside the loop")
    machine_gc_interval_s: float = Field(default=60.0, description="seconds between MachineGC rounds")
    machine_gc_grace_s: float = Field(
        default=900.0, description="seconds before a machine no Node or NodeRequest accounts for is deleted"
    )
