"""A data-plane cluster's lifecycle: the DataPlaneCluster workflow's input and state, the
report it sends its region, and the pure rules for agent reports."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field

from scaling.approvals import ApprovalState
from scaling.fleet.approvals import ClusterApprovalGate
from scaling.fleet.config import WorkloadMachines
from scaling.fleet.contracts import AgentStatusReport
from scaling.fleet.models import ClusterPhase, ManagedInstance, TypeCapacity

MAX_PHASE_HISTORY = 20  # waiting <-> ready can flip forever; keep the last changes only
MAX_STRIMZI_VERSIONS = 10

# Terraforming steps, in order (seed 000 / kas-fleet-manager).
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
    cluster_machines: WorkloadMachines  # the default (cluster-wide) pool
    type_machines: WorkloadMachines  # the `kafka-<type>` pool
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
    strimzi_versions: list[str] = Field(default_factory=list)
    reports: int = 0  # agent reports received (all runs)
    last_report_at: datetime | None = None
    instances: list[ManagedInstance] = Field(default_factory=list)
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


def report_problems(report: AgentStatusReport, state: DataPlaneClusterState) -> list[str]:
    """Why an agent report must be refused, each naming the field; [] = acceptable."""
    problems: list[str] = []
    if state.phase not in (
        ClusterPhase.PROVISIONED,
        ClusterPhase.WAITING,
        ClusterPhase.READY,
        ClusterPhase.DEPROVISIONING,
    ):
        problems.append(f"cluster is {state.phase.value}: no agent reports are expected")
    if report.ready() is None:
        problems.append("conditions: no Ready condition")
    for itype in report.capacity:
        if itype != state.instance_type:
            problems.append(f"capacity.{itype}: instance type not supported by this cluster")
    return problems


def phase_after_report(phase: ClusterPhase, ready: bool) -> ClusterPhase:
    """waiting_for_kas_fleetshard_operator <-> ready, as the agent's Ready condition says."""
    if phase == ClusterPhase.WAITING and ready:
        return ClusterPhase.READY
    if phase == ClusterPhase.READY and not ready:
        return ClusterPhase.WAITING
    return phase


def apply_report(state: DataPlaneClusterState, report: AgentStatusReport, now: datetime) -> bool:
    """Store the report's capacity, Ready and Strimzi versions; True when the phase changed."""
    for itype, cap in report.capacity.items():
        current = state.capacity.get(itype, TypeCapacity())
        state.capacity[itype] = current.model_copy(
            update={"max_units": cap.max_units, "remaining_units": cap.remaining_units}
        )
    state.agent_ready = bool(report.ready())
    state.strimzi_versions = [s.version for s in report.strimzi if s.ready][:MAX_STRIMZI_VERSIONS]
    state.reports += 1
    state.last_report_at = now
    new = phase_after_report(state.phase, state.agent_ready)
    if new == state.phase:
        return False
    set_phase(state, new, now, "agent reported Ready" if state.agent_ready else "agent reported not Ready")
    return True


def set_phase(state: DataPlaneClusterState, phase: ClusterPhase, now: datetime, message: str = "") -> None:
    state.phase = phase
    state.message = message
    state.history.append(PhaseChange(phase=phase, at=now, message=message))
    del state.history[:-MAX_PHASE_HISTORY]


def cluster_report(state: DataPlaneClusterState) -> ClusterReport:
    cap = state.capacity.get(state.instance_type, TypeCapacity())
    return ClusterReport(
        cluster_id=state.cluster_id,
        instance_type=state.instance_type,
        phase=state.phase,
        max_units=cap.max_units,
        remaining_units=cap.remaining_units,
        message=state.message,
    )


DataPlaneClusterInput.model_rebuild()
