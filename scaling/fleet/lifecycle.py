"""A data-plane cluster's lifecycle: the DataPlaneCluster workflow's input and state, the
report it sends its region, and the pure rules for agent reports."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field

from scaling.approvals import ApprovalState
from scaling.fleet.approvals import ClusterApprovalGate
from scaling.fleet.config import WorkloadMachines
from scaling.fleet.contracts import AgentStatusReport, StrimziVersion, parse_bool
from scaling.fleet.models import ClusterPhase, ClusterType, ManagedInstance, TypeCapacity

MAX_PHASE_HISTORY = 20  # waiting <-> ready can flip forever; keep the last changes only
MAX_STRIMZI_VERSIONS = 10

# Terraforming steps, in order (seed 000 / kas-fleet-manager: once OCM has provisioned the cluster,
# its machine pools first, then the rest until it is ready).
STEP_MACHINE_POOLS = "machine_pools"
STEP_INGRESS_DNS = "ingress_dns"
STEP_IDENTITY_PROVIDER = "identity_provider"
STEP_RESOURCES = "cluster_resources"
STEP_ADDONS = "addons"
TERRAFORMING_STEPS = (STEP_MACHINE_POOLS, STEP_INGRESS_DNS, STEP_IDENTITY_PROVIDER, STEP_RESOURCES, STEP_ADDONS)


class ClusterTimeouts(BaseModel):
    """Durable bounds: a step that never finishes ends the cluster in `failed` (then cleaned up)."""

    provisioning_s: float = 3600.0  # OCM install (pending -> installing -> ready)
    step_s: float = 1800.0  # each terraforming step, addons until ready
    agent_s: float = 1800.0  # waiting_for_kas_fleetshard_operator until the first Ready report
    deletion_s: float = 3600.0  # OCM uninstall until the cluster is gone
    poll_s: float = 30.0  # how often OCM is asked while waiting


class DataPlaneClusterInput(BaseModel):
    """What a FleetAutoscaler gives a new cluster. `state` carries a run's state across
    continue-as-new."""

    cluster_id: str
    provider: str
    region: str
    instance_type: str
    multi_az: bool
    cluster_machines: WorkloadMachines | None = None  # the default (cluster-wide) pool; None when registered
    type_machines: WorkloadMachines | None = None  # the `kafka-<type>` pool; None when registered
    # A registered cluster (dataplane-cluster-configuration or register_cluster): it exists
    # already, so no OCM create or terraforming; it waits for its agent at once and is never
    # deleted at OCM by growth. It may run several types (`instance_types`).
    manual: bool = False
    instance_types: list[str] = Field(default_factory=list)  # all it runs; [] = instance_type only
    cluster_type: ClusterType = "managed"
    schedulable: bool = True  # a registered cluster's listed fields (ManualCluster), told to the region
    instance_limit: int = -1
    openshift_version: str = ""
    fleetshard_parameters: dict[str, str] = Field(default_factory=dict)  # non-secret addon parameters
    reserved: list[ManagedInstance] = Field(default_factory=list)  # prewarming, served when ready
    timeouts: ClusterTimeouts = Field(default_factory=ClusterTimeouts)
    parent_workflow_id: str = ""  # the region's autoscaler, told of every phase/capacity change
    use_search_attributes: bool = False
    reports_per_run: int = 1000  # continue-as-new after this many agent reports
    approval: ClusterApprovalGate | None = None  # steps that wait for an operator (scaling.fleet.approvals)
    state: DataPlaneClusterState | None = None


class PhaseChange(BaseModel):
    """One entry of the cluster's recent phase changes."""

    phase: ClusterPhase
    at: datetime
    message: str = ""


class DataPlaneClusterState(BaseModel):
    """Everything a DataPlaneCluster knows: one model, queried as `status`, carried across
    continue-as-new. Bounded: instances by the cluster's capacity, history by MAX_PHASE_HISTORY."""

    cluster_id: str
    provider: str
    region: str
    instance_type: str
    phase: ClusterPhase = ClusterPhase.ACCEPTED
    message: str = ""
    ocm_id: str = ""
    ocm_name: str = ""
    ocm_state: str = ""
    multi_az: bool = False
    steps_done: list[str] = Field(default_factory=list)
    failed_step: str = ""
    capacity: dict[str, TypeCapacity] = Field(default_factory=dict)
    dns_name: str = ""
    idp_id: str = ""
    syncset_id: str = ""
    addons: dict[str, str] = Field(default_factory=dict)  # addon id -> last state seen
    agent_ready: bool | None = None
    strimzi_versions: list[str] = Field(default_factory=list)  # the ready ones' names
    strimzi: list[StrimziVersion] = Field(default_factory=list)  # as last reported (non-empty)
    reports: int = 0  # agent reports received (all runs)
    last_report_at: datetime | None = None
    instances: list[ManagedInstance] = Field(default_factory=list)
    deleted_instances: list[str] = Field(default_factory=list)  # the agent reported them gone (latest last)
    history: list[PhaseChange] = Field(default_factory=list)
    deletion_confirmed: bool = False  # the autoscaler's re-check passed: delete at OCM
    approval: ApprovalState | None = None  # its latest wait for approval, if any
    accepted_at: datetime | None = None
    waiting_since: datetime | None = None  # first entry into waiting_for_kas_fleetshard_operator
    ready_at: datetime | None = None
    finished_at: datetime | None = None
    cleaned_up: bool = False


class ClusterReport(BaseModel):
    """What a cluster tells its region's autoscaler (signal `cluster_changed`)."""

    cluster_id: str
    instance_type: str
    phase: ClusterPhase
    max_units: int | None = None
    remaining_units: int | None = None
    message: str = ""
    deletion_denied: bool = False  # once, right after an approval gate denied its deletion
    # Every type it runs -> the agent's maxUnits (None before its report); {} in reports from
    # before several types (then `instance_type` with `max_units`).
    max_units_by_type: dict[str, int | None] = Field(default_factory=dict)
    manual: bool = False
    cluster_type: ClusterType = "managed"
    # A registered cluster's listed fields, so a registry rebuilt from reports has them (the
    # region's input no longer lists its clusters); reports from before say schedulable, no limit.
    schedulable: bool = True
    instance_limit: int = -1


# Upstream takes agent reports in these phases only; in any other it answers 204 and changes
# nothing (kas-fleet-manager services/data_plane_cluster.go clusterCanProcessStatusReports).
REPORTING_PHASES = frozenset({ClusterPhase.WAITING, ClusterPhase.READY})


def report_problems(report: AgentStatusReport, state: DataPlaneClusterState) -> list[str]:
    """Why an agent report must be refused (400), each naming the field; [] = acceptable.
    Capacity for a type the cluster does not run is not a problem: it is ignored."""
    problems = report.strimzi_problems()
    for i, cond in enumerate(report.conditions):
        if cond.type == "Ready":
            if parse_bool(cond.status) is None:
                problems.append(f"conditions[{i}].status: {cond.status!r} is not a boolean")
            break
    return problems


def supported_types(state: DataPlaneClusterState) -> list[str]:
    """The instance types the cluster runs: the ones it has a machine pool (capacity) for."""
    return sorted({state.instance_type, *state.capacity})


def phase_after_report(phase: ClusterPhase, ready: bool) -> ClusterPhase:
    """waiting_for_kas_fleetshard_operator <-> ready, as the agent's Ready condition says."""
    if phase == ClusterPhase.WAITING and ready:
        return ClusterPhase.READY
    if phase == ClusterPhase.READY and not ready:
        return ClusterPhase.WAITING
    return phase


def apply_report(state: DataPlaneClusterState, report: AgentStatusReport, now: datetime) -> bool:
    """Fold an accepted report into the state as upstream does; True when the phase or the
    capacity changed. Outside REPORTING_PHASES nothing changes. A not-ready report only moves
    the cluster to waiting (its capacity and versions are not stored); a ready one stores the
    capacity of the types the cluster runs (others are ignored) and, when it lists any, the
    Strimzi versions."""
    if state.phase not in REPORTING_PHASES:
        return False
    state.reports += 1
    state.last_report_at = now
    state.agent_ready = report.ready()
    changed = False
    if state.agent_ready:
        for itype in supported_types(state):
            cap = report.capacity.get(itype)
            if cap is None:
                continue
            current = state.capacity.get(itype, TypeCapacity())
            new = current.model_copy(update={"max_units": cap.max_units, "remaining_units": cap.remaining_units})
            changed = changed or new != current
            state.capacity[itype] = new
        if report.strimzi:
            state.strimzi = report.strimzi[:MAX_STRIMZI_VERSIONS]
            state.strimzi_versions = [s.version for s in state.strimzi if s.ready]
    new_phase = phase_after_report(state.phase, state.agent_ready)
    if new_phase == state.phase:
        return changed
    set_phase(state, new_phase, now, "agent reported Ready" if state.agent_ready else "agent reported not Ready")
    return True


def set_phase(state: DataPlaneClusterState, phase: ClusterPhase, now: datetime, message: str = "") -> None:
    state.phase = phase
    state.message = message
    state.history.append(PhaseChange(phase=phase, at=now, message=message))
    del state.history[:-MAX_PHASE_HISTORY]


def cluster_report(state: DataPlaneClusterState, inp: DataPlaneClusterInput) -> ClusterReport:
    cap = state.capacity.get(state.instance_type, TypeCapacity())
    by_type = {}
    if len(supported_types(state)) > 1 or inp.manual:
        by_type = {t: state.capacity.get(t, TypeCapacity()).max_units for t in supported_types(state)}
    return ClusterReport(
        cluster_id=state.cluster_id,
        instance_type=state.instance_type,
        phase=state.phase,
        max_units=cap.max_units,
        remaining_units=cap.remaining_units,
        message=state.message,
        max_units_by_type=by_type,
        manual=inp.manual,
        cluster_type=inp.cluster_type,
        schedulable=inp.schedulable,
        instance_limit=inp.instance_limit,
    )


DataPlaneClusterInput.model_rebuild()
