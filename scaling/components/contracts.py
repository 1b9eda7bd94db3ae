"""The components loop's contract between workflows and activities: activity names and the
models they take and return. Workflows import this module, never activity implementations;
the worker registers an implementation under each name, and test stubs register under the same.

Sizes: nothing here grows with a TiDB cluster's instance count. Metrics cross as per-group
aggregates (`GroupMetrics`, one per homogeneous/heterogeneous group of one component), groups
are bounded by the autoscaler's resource types and PD's label sets, and capacity answers are
per resource type. Objects cross as the few fields the loop reads, never whole specs or pod lists.

Every input that touches Kubernetes names the Kubernetes cluster (`kube_cluster`, a key of the
worker's `clusters` settings; "" = the default `kubernetes:` connection): one worker serves many.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator

Component = Literal["tikv", "tidb"]

# Activity names (registered by activities/components, called by workflows/components).
LIST_AUTOSCALERS = "components_list_autoscalers"
GET_AUTOSCALER = "components_get_autoscaler"
WRITE_AUTOSCALER_STATUS = "components_write_autoscaler_status"
EMIT_AUTOSCALER_EVENT = "components_emit_autoscaler_event"
GET_TIDB_CLUSTER = "components_get_tidb_cluster"
LIST_AUTO_CLUSTERS = "components_list_auto_clusters"
QUERY_METRICS = "components_query_metrics"
ASK_PD_AUTOSCALING = "components_ask_pd_autoscaling"
ASK_EXTERNAL_ENDPOINT = "components_ask_external_endpoint"
OBSERVE_CAPACITY = "components_observe_capacity"
CREATE_AUTO_CLUSTER = "components_create_auto_cluster"
PATCH_REPLICAS = "components_patch_replicas"
DELETE_AUTO_CLUSTER = "components_delete_auto_cluster"

# The autoscaler's decisions, local activities whose results (what each read and decided) are
# recorded in its history (scaling.components.decisions).
DECIDE_GROUPS = "components_decide_groups"  # GroupFigures -> GroupDecision
DECIDE_PLAN = "components_decide_plan"  # PlanFigures -> PlanDecision
DECISION_NAMES = frozenset({DECIDE_GROUPS, DECIDE_PLAN})

ACTIVITY_NAMES = frozenset(
    {
        LIST_AUTOSCALERS,
        GET_AUTOSCALER,
        WRITE_AUTOSCALER_STATUS,
        EMIT_AUTOSCALER_EVENT,
        GET_TIDB_CLUSTER,
        LIST_AUTO_CLUSTERS,
        QUERY_METRICS,
        ASK_PD_AUTOSCALING,
        ASK_EXTERNAL_ENDPOINT,
        OBSERVE_CAPACITY,
        CREATE_AUTO_CLUSTER,
        PATCH_REPLICAS,
        DELETE_AUTO_CLUSTER,
    }
)

# Non-retryable ApplicationError types activities raise; the workflow treats them as "no data
# this round" (never as "no load", never as "delete the groups").
METRICS_UNAVAILABLE = "MetricsUnavailable"
PD_UNAVAILABLE = "PdUnavailable"
RECOMMENDER_UNAVAILABLE = "RecommenderUnavailable"
UNKNOWN_CLUSTER = "UnknownCluster"


# ---- TidbClusterAutoScaler ------------------------------------------------------------------
class AutoscalerRef(BaseModel):
    kube_cluster: str = ""
    namespace: str
    name: str


class ListAutoscalersInput(BaseModel):
    kube_cluster: str = ""
    namespace: str | None = None  # None: every namespace


class AutoscalerObject(BaseModel):
    """One TidbClusterAutoScaler as read: `spec` is the raw camelCase spec (one object's spec,
    bounded by what a user writes); scaling/components/spec.py parses and validates it."""

    found: bool
    uid: str = ""
    generation: int = 0
    spec: dict = Field(default_factory=dict)
    deleting: bool = False  # metadata.deletionTimestamp is set


class WriteStatusInput(BaseModel):
    """Make the autoscaler's status exactly `status` (camelCase, built by
    scaling/components/status.py: per group currentReplicas and lastAutoScalingTimestamp,
    conditions with a spec error's field and message)."""

    kube_cluster: str = ""
    namespace: str
    name: str
    status: dict


class WriteStatusResult(BaseModel):
    found: bool  # False: the object is gone


class AutoscalerEvent(BaseModel):
    """A Kubernetes Event on the TidbClusterAutoScaler (ScaledOut, ScaledIn, GroupCreated,
    GroupDeleted, InvalidSpec, MetricsUnavailable, IntervalWait, NeedNodes)."""

    kube_cluster: str = ""
    namespace: str
    name: str
    uid: str = ""
    reason: str
    message: str
    type: Literal["Normal", "Warning"] = "Normal"
    # The Event's name after `<name>.`, drawn by the workflow (replayed, it is the same): a write
    # made again, by a retry or by a worker replaying a lost workflow task, writes one Event.
    key: str = Field(default="", pattern=r"^[a-f0-9]{0,32}$")


class EventWritten(BaseModel):
    """An Event write's answer: its reason and message. A round's Events are local activities,
    recorded as markers that keep a result but not the input, so the history still says which
    change each one reported (the interval checks of bench/components_scale.py read it)."""

    reason: str
    message: str


# ---- TidbCluster ----------------------------------------------------------------------------
class ComponentView(BaseModel):
    """One component of one TidbCluster: what the loop reads of it."""

    replicas: int = 0  # spec.<component>.replicas
    pods: int = 0  # status.<component>.statefulSet.replicas (pods that exist)
    ready: int = 0  # status.<component>.statefulSet.readyReplicas
    cpu: str = ""  # spec.<component>.requests.cpu (quantity text, "" if unset)
    memory: str = ""  # spec.<component>.requests.memory
    storage: str = ""  # spec.<component>.requests.storage (TiKV)


class GetClusterInput(BaseModel):
    kube_cluster: str = ""
    namespace: str
    name: str


class TidbClusterView(BaseModel):
    found: bool
    namespace: str
    name: str
    uid: str = ""
    components: dict[str, ComponentView] = Field(default_factory=dict)  # "tikv", "tidb" present in spec


class ListAutoClustersInput(BaseModel):
    """The heterogeneous TidbClusters of one autoscaler and component (label selector on
    tidb.pingcap.com/auto-instance and auto-component)."""

    kube_cluster: str = ""
    namespace: str
    autoscaler: str
    component: Component


class AutoClusterView(BaseModel):
    """One heterogeneous TidbCluster (a group) as found in the cluster."""

    name: str  # auto-<hash>
    uid: str
    group: str = ""  # label tidb.pingcap.com/autoscaling-group
    base_tc: str = ""  # label tidb.pingcap.com/base-tc
    deleting: bool = False
    component: ComponentView = Field(default_factory=ComponentView)
    labels: dict[str, str] = Field(default_factory=dict)  # the group's server labels (PD's view)


class AutoClusterList(BaseModel):
    items: list[AutoClusterView] = Field(default_factory=list)  # bounded by groups per autoscaler


class CreateAutoClusterInput(BaseModel):
    """Create `name` (auto-<hash>, deterministic: the idempotency key) from the base cluster's
    spec.<component>; an existing object of that name is answered as is (created=False)."""

    kube_cluster: str = ""
    namespace: str
    base_cluster: str
    name: str
    autoscaler: str
    component: Component
    group: str  # value of tidb.pingcap.com/autoscaling-group
    replicas: int = Field(ge=0)
    cpu: str
    memory: str
    storage: str = ""  # "" = the base cluster's
    labels: dict[str, str] = Field(default_factory=dict)  # server labels (PD groups)


class CreateAutoClusterResult(BaseModel):
    name: str
    uid: str
    created: bool
    replicas: int  # spec.<component>.replicas of the object now there


class PatchReplicasInput(BaseModel):
    kube_cluster: str = ""
    namespace: str
    cluster: str  # the base TidbCluster or an auto-<hash> one
    component: Component
    replicas: int = Field(ge=0)


class PatchReplicasResult(BaseModel):
    found: bool
    replicas: int = 0


class DeleteAutoClusterInput(BaseModel):
    kube_cluster: str = ""
    namespace: str
    name: str
    uid: str = ""  # delete only this incarnation


class DeleteAutoClusterResult(BaseModel):
    deleted: bool  # False: already gone (or another object holds the name now)


# ---- metrics (planner "growth") -------------------------------------------------------------
class MetricsInput(BaseModel):
    """CPU (and for TiKV storage) of one component over the base cluster and its groups.

    `clusters` maps each TidbCluster name (base and every auto-<hash>) to its group key ("" for
    the base = homogeneous); an instance (pod `<tc>-<component>-<n>`) belongs to the cluster
    whose name prefixes it; instances of other clusters are ignored. `hot_threshold` is the CPU
    rule's max: instances whose usage/quota exceeds it are summed separately."""

    kube_cluster: str = ""
    namespace: str
    base_cluster: str
    component: Component
    clusters: dict[str, str]
    hot_threshold: float | None = None
    storage: bool = False


class GroupMetrics(BaseModel):
    """Aggregates of one group's instances (built by scaling/components/metrics.aggregate)."""

    group: str  # "" = homogeneous (the base cluster)
    instances: int = 0  # instances with both CPU usage and quota
    cpu_used: float = 0.0  # cores
    cpu_quota: float = 0.0  # cores
    max_ratio: float = 0.0  # highest per-instance used/quota
    hot_instances: int = 0  # instances over hot_threshold
    hot_cpu_used: float = 0.0
    hot_cpu_quota: float = 0.0
    storage_instances: int = 0
    storage_used: float = 0.0  # bytes
    storage_capacity: float = 0.0  # bytes


class ComponentMetrics(BaseModel):
    component: Component
    groups: list[GroupMetrics] = Field(default_factory=list)  # one per group that has data
    missing: int = 0  # instances of known clusters seen in one series but not the other


# ---- PD (planner "pd") ----------------------------------------------------------------------
class PdRule(BaseModel):
    """PD's CPURule: both thresholds always sent (tidb-operator defaults min to 0.1)."""

    max_threshold: float
    min_threshold: float
    resource_types: list[str] = Field(default_factory=list)


class PdStorageRule(BaseModel):
    """PD's StorageRule has only min_threshold, the share of storage left available: tidb-operator
    sends 1 - the rule's max_threshold (autoRulesToStrategyRule)."""

    min_threshold: float
    resource_types: list[str] = Field(default_factory=list)


class PdComponentRule(BaseModel):
    component: Component
    cpu_rule: PdRule | None = None
    storage_rule: PdStorageRule | None = None


class PdResource(BaseModel):
    resource_type: str
    cpu: int  # millicores
    memory: int  # bytes
    storage: int = 0  # bytes
    count: int | None = None


class PdStrategy(BaseModel):
    rules: list[PdComponentRule]
    resources: list[PdResource]


class AskPdInput(BaseModel):
    namespace: str
    cluster: str  # base TidbCluster: picks PD's URL from settings
    strategy: PdStrategy


class PdPlan(BaseModel):
    component: str
    count: int
    resource_type: str = ""
    labels: dict[str, str] = Field(default_factory=dict)


class PdAnswer(BaseModel):
    """answered=False: PD said `null` (no plan, or it could not read metrics): undecidable,
    never "remove every group"."""

    answered: bool
    plans: list[PdPlan] = Field(default_factory=list)  # bounded by groups


# ---- external recommender -------------------------------------------------------------------
class SecretRef(BaseModel):
    """tidb-operator's SecretRef: a Secret holding ca.crt, tls.crt and tls.key. Only the name
    travels through history; the activity reads the keys from the Kubernetes API."""

    name: str
    namespace: str


class ExternalEndpoint(BaseModel):
    host: str
    port: int
    path: str = ""
    tls_secret: SecretRef | None = None  # set: HTTPS with the Secret's CA and client certificate

    @field_validator("tls_secret", mode="before")
    @classmethod
    def _no_secret(cls, value: Any) -> Any:
        # Inputs scheduled before the field became a SecretRef carried "" for "none".
        return None if value == "" else value


class AskExternalInput(BaseModel):
    kube_cluster: str = ""  # where the endpoint's tlsSecret is read
    namespace: str
    cluster: str  # the base TidbCluster's name (sent as ?name=)
    component: Component
    endpoint: ExternalEndpoint


class ExternalAnswer(BaseModel):
    recommended_replicas: int = Field(ge=0)


# ---- node capacity (headroom) ---------------------------------------------------------------
class Shape(BaseModel):
    cpu_milli: int = Field(ge=0)
    memory_bytes: int = Field(ge=0)


class CapacityInput(BaseModel):
    """How many more instances of each shape the cluster's Ready, schedulable nodes hold now
    (each shape counted on its own, against free allocatable = allocatable - pod requests)."""

    kube_cluster: str = ""
    shapes: dict[str, Shape]  # resource type name -> its requests; bounded by resource types


class CapacityAnswer(BaseModel):
    fits: dict[str, int] = Field(default_factory=dict)  # same keys as shapes
    growth_manages_nodes: bool = False  # a NodeAutoscaler runs for this kube cluster


# What each activity takes and returns (the worker's implementations and the test stubs follow it).
SIGNATURES: dict[str, tuple[type, object]] = {
    LIST_AUTOSCALERS: (ListAutoscalersInput, list[AutoscalerRef]),
    GET_AUTOSCALER: (AutoscalerRef, AutoscalerObject),
    WRITE_AUTOSCALER_STATUS: (WriteStatusInput, WriteStatusResult),
    EMIT_AUTOSCALER_EVENT: (AutoscalerEvent, EventWritten),
    GET_TIDB_CLUSTER: (GetClusterInput, TidbClusterView),
    LIST_AUTO_CLUSTERS: (ListAutoClustersInput, AutoClusterList),
    QUERY_METRICS: (MetricsInput, ComponentMetrics),
    ASK_PD_AUTOSCALING: (AskPdInput, PdAnswer),
    ASK_EXTERNAL_ENDPOINT: (AskExternalInput, ExternalAnswer),
    OBSERVE_CAPACITY: (CapacityInput, CapacityAnswer),
    CREATE_AUTO_CLUSTER: (CreateAutoClusterInput, CreateAutoClusterResult),
    PATCH_REPLICAS: (PatchReplicasInput, PatchReplicasResult),
    DELETE_AUTO_CLUSTER: (DeleteAutoClusterInput, DeleteAutoClusterResult),
}
