"""The fleet loop's contract between workflows, activities and the agent API.

- Activity names and the models they take and return. Workflows import this module, never
  activity implementations; the worker registers an implementation under each name, and test
  stubs register under the same names.
- Workflow ids, and the names of the updates/queries the agent API and the CLI call.
- The agent's status report (seed 000's "fleetshard sync": each type's max and remaining units),
  which the agent API turns into
  an update on the cluster's workflow.

Idempotency: every OCM create carries growth's `cluster_id` (derived from the autoscaler
workflow, never random at the activity). The activity sets it as the OCM cluster's
`external_id` and derives the OCM `name` from it with `ocm_cluster_name`, and before POSTing
it looks for an existing cluster with that external id (or name): a retried create, or a
create re-run after a worker restart, finds the first cluster instead of making a second.
Secrets (OCM token, identity-provider client secret, the agent's token) never appear here:
activities read them from settings files / env vars.

OCM errors reach workflows as ApplicationError with one of the `ERR_*` types below.

Signatures (input -> output):
    create_ocm_cluster        CreateOcmClusterInput  -> OcmCluster (find-or-create by external id)
    get_ocm_cluster           OcmClusterRef          -> OcmCluster (state "gone" on 404)
    create_machine_pool       CreateMachinePoolInput -> MachinePoolResult (409 = exists = fine)
    ensure_ingress_dns        OcmClusterRef          -> IngressDns (retryable error until it exists)
    ensure_identity_provider  IdentityProviderInput  -> IdentityProviderResult
    apply_cluster_resources   ClusterResourcesInput  -> ClusterResourcesResult
    install_addon             AddonInput             -> AddonInstallation (existing one returned)
    get_addon                 AddonRef               -> AddonInstallation ("absent" on 404)
    delete_ocm_cluster        OcmClusterRef          -> OcmCluster ("uninstalling", or "gone" if absent)
    cleanup_cluster_resources CleanupInput           -> None
"""

from __future__ import annotations

import hashlib
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic.alias_generators import to_camel

from scaling.fleet.config import ManualCluster
from scaling.fleet.models import ClusterPhase, InstanceVersions, ManagedInstance, TypeCapacity

# -- activity names (registered by activities/fleet, called by workflows/fleet) ------------
CREATE_OCM_CLUSTER = "create_ocm_cluster"
GET_OCM_CLUSTER = "get_ocm_cluster"
CREATE_MACHINE_POOL = "create_machine_pool"
ENSURE_INGRESS_DNS = "ensure_ingress_dns"
ENSURE_IDENTITY_PROVIDER = "ensure_identity_provider"
APPLY_CLUSTER_RESOURCES = "apply_cluster_resources"
INSTALL_ADDON = "install_addon"
GET_ADDON = "get_addon"
DELETE_OCM_CLUSTER = "delete_ocm_cluster"
CLEANUP_CLUSTER_RESOURCES = "cleanup_cluster_resources"

ACTIVITY_NAMES = frozenset(
    {
        CREATE_OCM_CLUSTER, GET_OCM_CLUSTER, CREATE_MACHINE_POOL, ENSURE_INGRESS_DNS,
        ENSURE_IDENTITY_PROVIDER, APPLY_CLUSTER_RESOURCES, INSTALL_ADDON, GET_ADDON,
        DELETE_OCM_CLUSTER, CLEANUP_CLUSTER_RESOURCES,
    }
)  # fmt: skip

# The region's decisions, activities whose inputs (what each read) and results (what each decided)
# are recorded in its history (scaling.fleet.decisions). Pure: every worker registers them.
PLACE_INSTANCES = "place_instances"  # PlacementFigures -> Placements
RECHECK_REMOVALS = "recheck_removals"  # RecheckFigures -> Rechecks
EVALUATE_REGION = "evaluate_region"  # RegionFigures -> RegionEvaluation
DECISION_NAMES = frozenset({PLACE_INSTANCES, RECHECK_REMOVALS, EVALUATE_REGION})

# ApplicationError types raised by the OCM activities. Non-retryable ones end the step.
ERR_OCM_UNAUTHORIZED = "OcmUnauthorized"  # 401/403: the token is wrong; retrying cannot help
ERR_OCM_BAD_REQUEST = "OcmBadRequest"  # 400/422: growth sent something OCM refuses
ERR_OCM_NOT_FOUND = "OcmNotFound"  # 404 where the object must exist
ERR_OCM_UNAVAILABLE = "OcmUnavailable"  # 429/5xx/timeouts: retryable
NON_RETRYABLE_OCM_ERRORS = (ERR_OCM_UNAUTHORIZED, ERR_OCM_BAD_REQUEST)

# -- workflows: ids, updates, queries ----------------------------------------------------
CLUSTER_WORKFLOW = "DataPlaneCluster"
AUTOSCALER_WORKFLOW = "FleetAutoscaler"

# DataPlaneCluster
UPDATE_AGENT_STATUS = "report_agent_status"  # AgentStatusReport -> None; validator refuses bad reports
UPDATE_INSTANCE_STATUSES = "report_instance_statuses"  # dict[id, InstanceStatusReport] -> None
QUERY_CLUSTER_STATUS = "status"  # -> the cluster's state model (workflows/fleet)
QUERY_AGENT_VIEW = "agent_view"  # -> AgentClusterView (GET agent-clusters/{id}, .../kafkas)
# ... and what its region's FleetAutoscaler tells it (signals):
SIGNAL_DEPROVISION = "deprovision"  # marked for removal: accepts no more instances
SIGNAL_DELETE = "delete"  # the re-check passed: delete at OCM, clean up
SIGNAL_RESTORE = "restore"  # the re-check failed (not empty / capacity needed): back to ready
SIGNAL_INSTANCE_PLACED = "instance_placed"  # ManagedInstance
SIGNAL_INSTANCE_RELEASED = "instance_released"  # instance id
SIGNAL_CLUSTER_MESSAGES = "cluster_messages"  # ClusterMessages: the above, batched, in order

# FleetAutoscaler
UPDATE_CREATE_INSTANCE = "create_instance"  # CreateInstanceRequest -> InstancePlacement
UPDATE_DELETE_INSTANCE = "delete_instance"  # instance id -> bool (False: unknown)
UPDATE_APPROVE_DELETION = "approve_deletion"  # cluster id -> bool
UPDATE_BLOCK_DELETION = "block_deletion"  # cluster id -> bool
SIGNAL_PAUSE = "pause"
SIGNAL_RESUME = "resume"
QUERY_REGION_STATUS = "status"  # -> the region's state summary (workflows/fleet)
SIGNAL_CLUSTER_CHANGED = "cluster_changed"  # from a DataPlaneCluster: its phase and capacity
SIGNAL_INSTANCES_REJECTED = "instances_rejected"  # from a DataPlaneCluster: RejectedInstances
# A region's own "not processed" (activities.updates sends it again): its validator refused a
# creation or deletion while the region finishes its handlers before continue-as-new.
UPDATE_DRAINING = "UpdateDraining"
UPDATE_REGISTER_CLUSTER = "register_cluster"  # ManualCluster -> cluster id; an existing cluster (no create)
UPDATE_REGISTER_CLUSTERS = "register_clusters"  # ClusterRegistrations -> cluster ids; a batch of the above
# Clusters in one register_clusters update: its input (about 300 bytes a cluster) is in the
# region's history, so a long list goes in batches (30 KB each), never as one payload.
MAX_REGISTER_BATCH = 100


def cluster_workflow_id(cluster_id: str) -> str:
    return f"fleet/cluster/{cluster_id}"


def autoscaler_workflow_id(provider: str, region: str) -> str:
    return f"fleet/{provider}/{region}"


def ocm_cluster_name(cluster_id: str) -> str:
    """OCM's cluster name for growth's cluster id: short (OCM caps names at 15 characters),
    DNS-safe, and the same on every retry."""
    return "gf-" + hashlib.sha256(cluster_id.encode()).hexdigest()[:12]


def machine_pool_id(instance_type: str) -> str:
    return f"kafka-{instance_type}"


INSTANCE_PROFILE_LABEL = "bf2.org/kafkaInstanceProfileType"
RESERVED_DEPLOYMENT_LABEL = "bf2.org/deployment"
STRIMZI_ADDON = "managed-kafka"
FLEETSHARD_ADDON = "kas-fleetshard-operator"

OcmClusterState = Literal[
    "waiting", "validating", "pending", "installing", "ready", "error", "uninstalling", "hibernating", "gone"
]
AddonState = Literal["pending", "installing", "ready", "failed", "deleting", "deleted", "absent"]


# -- OCM activity models -----------------------------------------------------------------
class CreateOcmClusterInput(BaseModel):
    """Create (or find) the OCM cluster for growth's cluster `cluster_id`.

    `cluster_id` is the idempotency key: OCM external_id = cluster_id and name =
    ocm_cluster_name(cluster_id). The default (cluster-wide) machine pool is autoscaled between
    `default_min_nodes` and `default_max_nodes` (seed 000: 6 and 18)."""

    cluster_id: str
    provider: str
    region: str
    multi_az: bool
    compute_machine_type: str
    default_min_nodes: int = 6
    default_max_nodes: int = 18
    openshift_version: str = ""  # "" = OCM's default


class OcmCluster(BaseModel):
    """An OCM cluster as growth needs it. `state` is OCM's status.state; "gone" means 404
    (OCM answers 404 once an uninstalled cluster is removed). `created` is False when a create
    found an existing cluster with the same external id."""

    ocm_id: str = ""
    cluster_id: str
    name: str = ""
    state: OcmClusterState
    message: str = ""  # OCM's status.provision_error_message / description when state == error
    created: bool = False


class OcmClusterRef(BaseModel):
    """Which OCM cluster: OCM's id (from create) and growth's id. `ocm_id` may be "" when a
    create never answered (then get/delete look the cluster up by external_id = cluster_id,
    so a cluster created by a lost request is still found and deleted)."""

    ocm_id: str
    cluster_id: str


class MachinePoolTaint(BaseModel):
    """A machine-pool taint (OCM's taints[]: key, value, effect)."""

    key: str
    value: str
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] = "NoExecute"


class CreateMachinePoolInput(BaseModel):
    """One autoscaled machine pool per supported instance type, id `kafka-<type>`, labelled and
    tainted `bf2.org/kafkaInstanceProfileType=<type>`. Idempotent: an existing pool with this id
    (409 at OCM) counts as created."""

    ocm_id: str
    cluster_id: str
    pool_id: str
    instance_type: str
    machine_type: str
    min_nodes: int = Field(ge=0)
    max_nodes: int = Field(ge=1)
    multi_az: bool = False
    labels: dict[str, str] = Field(default_factory=dict)
    taints: list[MachinePoolTaint] = Field(default_factory=list)


class MachinePoolResult(BaseModel):
    """The pool OCM holds after the call (created now or already there)."""

    pool_id: str
    min_nodes: int
    max_nodes: int
    created: bool


class IngressDns(BaseModel):
    """The cluster's `default` ingress dns_name (e.g. apps.<name>.<base domain>)."""

    dns_name: str


class IdentityProviderInput(BaseModel):
    """Ensure an identity provider named `name` exists on the cluster. The client id/secret and
    issuer come from the activity's settings. Idempotent: "already exists" is looked up by name."""

    ocm_id: str
    cluster_id: str
    name: str = "Kafka_SRE"


class IdentityProviderResult(BaseModel):
    """The identity provider's OCM id; created False when it existed already."""

    idp_id: str
    created: bool


class ClusterResourcesInput(BaseModel):
    """Apply growth's cluster resources (namespaces, the fleetshard's config, ingress settings)
    as one syncset named after the cluster. Idempotent: the syncset is replaced if present."""

    ocm_id: str
    cluster_id: str
    ingress_dns_name: str
    instance_types: list[str]


class ClusterResourcesResult(BaseModel):
    """The syncset that holds the resources, and how many objects it carries."""

    syncset_id: str
    resources: int


class AddonInput(BaseModel):
    """Install an addon (idempotent: an existing installation is returned as it is). Non-secret
    parameters only; the fleetshard addon's credentials (agent token, control-plane URL) are
    added by the activity from settings, keyed by `cluster_id`."""

    ocm_id: str
    cluster_id: str
    addon_id: str
    parameters: dict[str, str] = Field(default_factory=dict)


class AddonRef(BaseModel):
    """Which addon installation on which OCM cluster."""

    ocm_id: str
    cluster_id: str
    addon_id: str


class AddonInstallation(BaseModel):
    """An addon installation's state; "absent" = OCM has none (404)."""

    addon_id: str
    state: AddonState
    message: str = ""


class CleanupInput(BaseModel):
    """Remove what growth created outside OCM for this cluster (DNS records, identity-provider
    client, the agent's token). Idempotent: missing things are fine."""

    cluster_id: str
    ocm_id: str = ""


# -- the agent (fleetshard) report --------------------------------------------------------
class _AgentModel(BaseModel):
    # The agent speaks camelCase JSON (maxUnits, kafkaVersions); growth reads either spelling.
    # Unknown fields (lastTransitionTime, ...) are ignored, as upstream's generated model does.
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore")


class AgentCondition(_AgentModel):
    """A status condition. Every field may be omitted (the Go client drops empty strings): a
    deleted instance reports `{"type": "Ready", "reason": "Deleted"}` with no status."""

    type: str = ""
    status: str = ""
    reason: str = ""
    message: str = ""


class AgentCapacity(_AgentModel):
    """Capacity of one instance type on the cluster in streaming units, as the agent computes it
    from the nodes it can get (max) and what is placed (remaining). A zero is omitted by the Go
    client, so `{"maxUnits": 4}` means none remaining."""

    max_units: int = Field(default=0, ge=0)
    remaining_units: int = Field(default=0, ge=0)


class StrimziVersion(_AgentModel):
    """A Strimzi operator version installed on the cluster and whether it is ready."""

    version: str = ""
    ready: bool = False
    kafka_versions: list[str] = Field(default_factory=list)
    kafka_ibp_versions: list[str] = Field(default_factory=list)


def parse_bool(value: str) -> bool | None:
    """Go's strconv.ParseBool, which upstream reads a Ready condition's status with; None when
    it is not a boolean."""
    if value in ("1", "t", "T", "true", "TRUE", "True"):
        return True
    if value in ("0", "f", "F", "false", "FALSE", "False"):
        return False
    return None


class AgentStatusReport(_AgentModel):
    """Body of PUT /api/kafkas_mgmt/v1/agent-clusters/{id}/status, delivered to the cluster's
    workflow as the `report_agent_status` update. Every field may be omitted, as upstream's
    DataPlaneClusterUpdateStatusRequest allows."""

    conditions: list[AgentCondition] = Field(default_factory=list)
    capacity: dict[str, AgentCapacity] = Field(default_factory=dict)
    strimzi: list[StrimziVersion] = Field(default_factory=list)

    @field_validator("capacity")
    @classmethod
    def _remaining_within_max(cls, value: dict[str, AgentCapacity]) -> dict[str, AgentCapacity]:
        for itype, cap in value.items():
            if cap.remaining_units > cap.max_units:
                raise ValueError(f"capacity.{itype}.remainingUnits exceeds maxUnits")
        return value

    def ready(self) -> bool:
        """The first Ready condition's status; no Ready condition (or an unparsable status)
        means not ready, as upstream reads it."""
        for cond in self.conditions:
            if cond.type == "Ready":
                return bool(parse_bool(cond.status))
        return False

    def strimzi_problems(self) -> list[str]:
        """Upstream's checks of the strimzi entries, with its field paths (400)."""
        for i, s in enumerate(self.strimzi):
            for field, empty in (
                ("version", not s.version),
                ("kafkaVersions", not s.kafka_versions),
                ("kafkaIbpVersions", not s.kafka_ibp_versions),
            ):
                if empty:
                    return [f".status.strimzi[{i}].{field} cannot be empty"]
        return []


class InstanceStatusReport(_AgentModel):
    """One instance's entry in PUT .../agent-clusters/{id}/kafkas/status (upstream's
    DataPlaneKafkaStatus, keyed by instance id). growth reads the Ready condition and the
    versions; capacity, routes and adminServerURI are accepted and not kept."""

    conditions: list[AgentCondition] = Field(default_factory=list)
    versions: InstanceVersions = Field(default_factory=InstanceVersions)


class AgentClusterView(BaseModel):
    """What GET agent-clusters/{id} and GET agent-clusters/{id}/kafkas read from the cluster's
    workflow (query `agent_view`): its phase, max_nodes per type (capacity.maxNodes), the
    instances placed on it and the reserved (prewarming) instances, which are empty unless the
    cluster is ready. `versions` (the latest ready Strimzi version the agent reported, with its
    latest Kafka and IBP versions) goes into each ManagedKafka's spec.versions."""

    cluster_id: str
    provider: str
    region: str
    phase: ClusterPhase
    capacity: dict[str, TypeCapacity] = Field(default_factory=dict)
    instances: list[ManagedInstance] = Field(default_factory=list)
    reserved: list[ManagedInstance] = Field(default_factory=list)
    versions: InstanceVersions | None = None  # the latest ready Strimzi's; None = none reported


class RejectedInstances(BaseModel):
    """Instances a cluster's agent refused (Ready reason Rejected): the cluster has dropped them,
    and the region places them elsewhere, as upstream moves a rejected Kafka to another cluster."""

    cluster_id: str
    messages: dict[str, str] = Field(default_factory=dict)  # instance id -> the agent's reason


# -- autoscaler updates (CLI) ------------------------------------------------------------
class ClusterRegistrations(BaseModel):
    """Clusters listed in dataplane-cluster-configuration.yaml, registered in one update (at most
    MAX_REGISTER_BATCH; the validator refuses more, naming `clusters`)."""

    clusters: list[ManualCluster]


class CreateInstanceRequest(BaseModel):
    """Create a managed instance of `instance_type` and `size` in the region; `id` is the
    caller's (a retried update with the same id returns the same placement)."""

    id: str
    instance_type: str
    size: str


class InstancePlacement(BaseModel):
    """Where an instance is: on `cluster_id`, or waiting (cluster_id "") for a ready cluster."""

    id: str
    instance_type: str
    size: str
    units: int
    cluster_id: str = ""
    waiting: bool = True
