"""The fleet loop's configuration, in seed 000's shapes (kas-fleet-manager's provider,
dynamic-scaling, instance-types and node-prewarming files), as one YAML document with a
section per file:

    supported_providers:            # providers -> regions -> per instance type limit and slack
    dynamic_scaling:                # machine types and machine-pool min/max per instance type
    supported_instance_types:       # instance types -> sizes -> streaming units consumed
    node_prewarming:                # reserved instances per instance type
    clusters:                       # clusters listed by hand (dataplane-cluster-configuration)

`load_fleet_config` validates the whole document and raises FleetConfigError listing every
problem with the dotted path of the field it is about. Given a directory, it reads
kas-fleet-manager's own files from it instead (`load_kas_fleet_manager_dir`), as they are.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


# -- supported providers ----------------------------------------------------------------
class RegionInstanceTypeLimits(_Strict):
    """A region's limit (streaming units; None = no limit, 0 = always reached) and the free
    capacity slack (streaming units) it keeps for one instance type."""

    limit: int | None = Field(default=None, ge=0)
    min_available_capacity_slack_streaming_units: int = Field(default=0, ge=0)


class RegionConfig(_Strict):
    """A region of a provider and the instance types it supports."""

    name: str = Field(min_length=1)
    default: bool = False
    supported_instance_type: dict[str, RegionInstanceTypeLimits] = Field(default_factory=dict)


class ProviderConfig(_Strict):
    """A cloud provider and its regions."""

    name: str = Field(min_length=1)
    default: bool = False
    regions: list[RegionConfig] = Field(default_factory=list)


# -- dynamic scaling --------------------------------------------------------------------
class NodeAutoscaling(_Strict):
    """Autoscaled node count bounds of a machine pool."""

    min_compute_nodes: int = Field(ge=0)
    max_compute_nodes: int = Field(ge=1)

    @model_validator(mode="after")
    def _min_not_above_max(self) -> NodeAutoscaling:
        if self.min_compute_nodes > self.max_compute_nodes:
            raise ValueError("min_compute_nodes must not exceed max_compute_nodes")
        return self


class WorkloadMachines(_Strict):
    """The machine type and pool bounds for one workload (cluster-wide or one instance type).

    growth adds two optional fields: `multi_az` (None = seed 000's rule: only `standard` is
    multi-AZ) and `expected_max_streaming_units` (the capacity a not-yet-ready cluster of this
    type is counted with; None = the type's biggest size)."""

    compute_machine_type: str = Field(min_length=1)
    compute_node_autoscaling: NodeAutoscaling
    multi_az: bool | None = None
    expected_max_streaming_units: int | None = Field(default=None, ge=1)


class ProviderMachines(_Strict):
    """Machine settings of one provider: the default pool and one pool per instance type."""

    cluster_wide_workload: WorkloadMachines = Field(
        default_factory=lambda: WorkloadMachines(
            compute_machine_type="m5.2xlarge",
            compute_node_autoscaling=NodeAutoscaling(min_compute_nodes=6, max_compute_nodes=18),
        )
    )
    kafka_workload_per_instance_type: dict[str, WorkloadMachines] = Field(default_factory=dict)


class DynamicScalingConfig(_Strict):
    """Whether growth may create and delete data-plane clusters, and with which machines."""

    enable_dynamic_data_plane_scale_up: bool = True
    enable_dynamic_data_plane_scale_down: bool = True
    new_data_plane_openshift_version: str = ""
    compute_machine_per_cloud_provider: dict[str, ProviderMachines] = Field(default_factory=dict)


# -- instance types ---------------------------------------------------------------------
class _UpstreamStrict(_Strict):
    # kas-fleet-manager's files spell some fields camelCase (capacityConsumed); growth reads
    # either spelling, and error paths name the upstream one.
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class BillingModel(_Strict):
    """A billing model of an instance type (upstream's supported_billing_models entry). growth
    bills nothing; it is read so that the file loads as it is."""

    id: str = Field(min_length=1)
    ams_resource: str = Field(min_length=1)
    ams_product: str = Field(min_length=1)
    ams_billing_models: list[str] = Field(min_length=1)
    grace_period_days: int = Field(default=0, ge=0)


class InstanceSize(_UpstreamStrict):
    """A size of an instance type and the streaming units one instance of it consumes
    (capacityConsumed). The other fields are upstream's limits of a size; growth checks them as
    upstream does (numbers above 0) and does not use them."""

    id: str = Field(min_length=1)
    display_name: str = ""
    capacity_consumed: int = Field(ge=1, alias="capacityConsumed")
    quota_consumed: int | None = Field(default=None, ge=1, alias="quotaConsumed")
    quota_type: str = Field(default="", alias="quotaType")  # deprecated upstream and ignored there
    ingress_throughput_per_sec: str = Field(default="", alias="ingressThroughputPerSec")
    egress_throughput_per_sec: str = Field(default="", alias="egressThroughputPerSec")
    total_max_connections: int | None = Field(default=None, ge=1, alias="totalMaxConnections")
    max_connection_attempts_per_sec: int | None = Field(default=None, ge=1, alias="maxConnectionAttemptsPerSec")
    max_data_retention_size: str = Field(default="", alias="maxDataRetentionSize")
    max_data_retention_period: str = Field(default="", alias="maxDataRetentionPeriod")
    max_partitions: int | None = Field(default=None, ge=1, alias="maxPartitions")
    max_message_size: str = Field(default="", alias="maxMessageSize")
    min_in_sync_replicas: int | None = Field(default=None, ge=1, alias="minInSyncReplicas")
    replication_factor: int | None = Field(default=None, ge=1, alias="replicationFactor")
    supported_az_modes: list[Literal["single", "multi"]] = Field(default_factory=list, alias="supportedAZModes")
    maturity_status: Literal["", "stable", "preview"] = Field(default="", alias="maturityStatus")
    lifespan_seconds: int | None = Field(default=None, ge=1, alias="lifespanSeconds")


class InstanceTypeConfig(_Strict):
    """A managed-instance type (e.g. standard, developer), its billing models and its sizes."""

    id: str = Field(min_length=1)
    display_name: str = ""
    supported_billing_models: list[BillingModel] = Field(default_factory=list)
    sizes: list[InstanceSize] = Field(min_length=1)

    def size(self, size_id: str) -> InstanceSize | None:
        return next((s for s in self.sizes if s.id == size_id), None)

    def biggest_units(self) -> int:
        return max(s.capacity_consumed for s in self.sizes)


# -- prewarming -------------------------------------------------------------------------
class PrewarmingConfig(_Strict):
    """Reserved instances of one size that every ready cluster of the type keeps (0 = off);
    the size defaults to x1, as upstream's."""

    num_reserved_instances: int = Field(default=0, ge=0)
    base_streaming_unit_size: str = Field(default="x1", min_length=1)


# -- manually listed clusters -------------------------------------------------------------
class ManualCluster(_Strict):
    """A cluster listed in kas-fleet-manager's dataplane-cluster-configuration.yaml, with its
    fields and defaults (internal/kafka/internal/config/dataplane_cluster_config.go). growth
    registers it into its region without creating it at OCM; `cluster_type` is growth's own
    addition (upstream sets "enterprise" when an organisation registers a cluster by its API)."""

    name: str = ""
    cluster_id: str = Field(min_length=1)
    cloud_provider: str = ""
    region: str = ""
    multi_az: bool = False
    schedulable: bool = False  # a Go bool: absent = false
    kafka_instance_limit: int = Field(default=0, ge=-1)  # -1 = no limit
    status: Literal["cluster_provisioning", "cluster_provisioned", "ready"] = "cluster_provisioning"
    provider_type: Literal["ocm", "standalone"] = "ocm"
    cluster_dns: str = ""
    supported_instance_type: str = "standard,developer"  # upstream's default: both
    cluster_type: Literal["managed", "enterprise"] = "managed"

    @model_validator(mode="after")
    def _standalone_needs_dns_and_name(self) -> ManualCluster:
        if self.provider_type == "standalone" and not (self.cluster_dns and self.name):
            raise ValueError("a standalone cluster needs cluster_dns and name")
        if not self.instance_types():
            raise ValueError("supported_instance_type lists no instance type")
        return self

    def instance_types(self) -> list[str]:
        """ "standard,developer" -> ["standard", "developer"], in the file's order."""
        return [t.strip() for t in self.supported_instance_type.split(",") if t.strip()]


# -- the document -----------------------------------------------------------------------
class FleetConfig(_Strict):
    """The whole fleet configuration; cross-references are checked (see `_references`)."""

    supported_providers: list[ProviderConfig] = Field(default_factory=list)
    dynamic_scaling: DynamicScalingConfig = Field(default_factory=DynamicScalingConfig)
    supported_instance_types: list[InstanceTypeConfig] = Field(default_factory=list)
    node_prewarming: dict[str, PrewarmingConfig] = Field(default_factory=dict)
    clusters: list[ManualCluster] = Field(default_factory=list)

    @model_validator(mode="after")
    def _references(self) -> FleetConfig:
        problems = reference_problems(self)
        if problems:
            raise ValueError("; ".join(f"{path}: {msg}" for path, msg in problems))
        return self

    # Lookups the workflows and rules use.
    def instance_type(self, type_id: str) -> InstanceTypeConfig | None:
        return next((t for t in self.supported_instance_types if t.id == type_id), None)

    def region(self, provider: str, region: str) -> RegionConfig | None:
        for p in self.supported_providers:
            if p.name == provider:
                return next((r for r in p.regions if r.name == region), None)
        return None

    def machines(self, provider: str, instance_type: str) -> WorkloadMachines | None:
        pm = self.dynamic_scaling.compute_machine_per_cloud_provider.get(provider)
        return pm.kafka_workload_per_instance_type.get(instance_type) if pm else None

    def manual_clusters(self, provider: str, region: str) -> list[ManualCluster]:
        return [c for c in self.clusters if c.cloud_provider == provider and c.region == region]

    def without_clusters(self) -> FleetConfig:
        """The configuration a region carries: its listed clusters go to the registry instead
        (the `register_clusters` update), so the carried input does not grow with the fleet."""
        return self.model_copy(update={"clusters": []})


def reference_problems(cfg: FleetConfig) -> list[tuple[str, str]]:
    """Names that must refer to something defined elsewhere in the document."""
    problems: list[tuple[str, str]] = []
    types = {t.id: t for t in cfg.supported_instance_types}
    for i, t in enumerate(cfg.supported_instance_types):
        if [t.id for t in cfg.supported_instance_types].count(t.id) > 1:
            problems.append((f"supported_instance_types[{i}].id", f"duplicate instance type {t.id!r}"))
        ids = [s.id for s in t.sizes]
        for j, s in enumerate(t.sizes):
            if ids.count(s.id) > 1:
                problems.append((f"supported_instance_types[{i}].sizes[{j}].id", f"duplicate size {s.id!r}"))
    for i, p in enumerate(cfg.supported_providers):
        for j, r in enumerate(p.regions):
            for itype in r.supported_instance_type:
                if itype not in types:
                    path = f"supported_providers[{i}].regions[{j}].supported_instance_type.{itype}"
                    problems.append((path, f"unknown instance type {itype!r}"))
    scaling = cfg.dynamic_scaling.compute_machine_per_cloud_provider
    for provider, pm in scaling.items():
        for itype in pm.kafka_workload_per_instance_type:
            if itype not in types:
                path = f"dynamic_scaling.compute_machine_per_cloud_provider.{provider}.kafka_workload_per_instance_type.{itype}"
                problems.append((path, f"unknown instance type {itype!r}"))
    for itype, pw in cfg.node_prewarming.items():
        if itype not in types:
            problems.append((f"node_prewarming.{itype}", f"unknown instance type {itype!r}"))
        elif types[itype].size(pw.base_streaming_unit_size) is None:
            problems.append(
                (
                    f"node_prewarming.{itype}.base_streaming_unit_size",
                    f"size {pw.base_streaming_unit_size!r} is not a size of {itype!r}",
                )
            )
    seen_ids: set[str] = set()
    for i, c in enumerate(cfg.clusters):
        if c.cluster_id in seen_ids:
            problems.append((f"clusters[{i}].cluster_id", f"duplicate cluster {c.cluster_id!r}"))
        seen_ids.add(c.cluster_id)
        for itype in c.instance_types():
            if itype not in types:
                problems.append((f"clusters[{i}].supported_instance_type", f"unknown instance type {itype!r}"))
    # A region that supports a type growth may create clusters for needs machines for it.
    if cfg.dynamic_scaling.enable_dynamic_data_plane_scale_up:
        for i, p in enumerate(cfg.supported_providers):
            for j, r in enumerate(p.regions):
                for itype in r.supported_instance_type:
                    if itype in types and cfg.machines(p.name, itype) is None:
                        path = f"supported_providers[{i}].regions[{j}].supported_instance_type.{itype}"
                        problems.append(
                            (
                                path,
                                f"no dynamic_scaling.compute_machine_per_cloud_provider.{p.name}"
                                f".kafka_workload_per_instance_type.{itype} to create clusters with",
                            )
                        )
    return problems


class FleetConfigError(ValueError):
    """An invalid fleet configuration: every problem as (dotted field path, message)."""

    def __init__(self, problems: list[tuple[str, str]]) -> None:
        self.problems = problems
        super().__init__("invalid fleet configuration: " + "; ".join(f"{p}: {m}" for p, m in problems))


def _dotted(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(document)"


def parse_fleet_config(raw: Any) -> FleetConfig:
    """Validate a parsed YAML/JSON document; FleetConfigError names each bad field."""
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise FleetConfigError([("(document)", "must be a mapping")])
    try:
        return FleetConfig.model_validate(raw)
    except ValidationError as err:
        problems: list[tuple[str, str]] = []
        for e in err.errors():
            msg = str(e["msg"]).removeprefix("Value error, ")
            if not e["loc"] and ": " in msg:
                # Cross-reference problems arrive as one message "path: msg; path: msg".
                problems.extend(tuple(part.split(": ", 1)) for part in msg.split("; "))  # type: ignore[misc]
            else:
                problems.append((_dotted(e["loc"]), msg))
        raise FleetConfigError(problems) from None


def load_fleet_config(path: str | Path) -> FleetConfig:
    """growth's one document, or a directory holding kas-fleet-manager's own files."""
    if Path(path).is_dir():
        return load_kas_fleet_manager_dir(path)
    return parse_fleet_config(yaml.safe_load(Path(path).read_text()))


def load_fleet_config_text(text: str) -> FleetConfig:
    return parse_fleet_config(yaml.safe_load(text))


class _ClusterList(_Strict):
    clusters: list[ManualCluster] = Field(default_factory=list)


def load_manual_clusters(path: str | Path) -> list[ManualCluster]:
    """The clusters of a dataplane-cluster-configuration.yaml file, as it is; FleetConfigError
    names each bad field (`clusters[i].<field>`). Instance types are checked where they are
    registered (the region knows its types)."""
    raw = yaml.safe_load(Path(path).read_text())
    if not isinstance(raw, dict):
        raise FleetConfigError([("(document)", "must be a mapping with `clusters`")])
    try:
        return _ClusterList.model_validate(raw).clusters
    except ValidationError as err:
        problems = [(_dotted(e["loc"]), str(e["msg"]).removeprefix("Value error, ")) for e in err.errors()]
        raise FleetConfigError(problems) from None


# kas-fleet-manager's own files (its config/ directory) and the section of growth's document
# each one becomes; each file loads as it is.
KAS_FLEET_MANAGER_FILES = {
    "kafka-instance-types-configuration.yaml": "supported_instance_types",
    "provider-configuration.yaml": "supported_providers",
    "dynamic-scaling-configuration.yaml": "dynamic_scaling",
    "node-prewarming-configuration.yaml": "node_prewarming",
    "dataplane-cluster-configuration.yaml": "clusters",
}


def load_kas_fleet_manager_dir(directory: str | Path) -> FleetConfig:
    """growth's configuration from a kas-fleet-manager config directory (the files of
    KAS_FLEET_MANAGER_FILES; a missing one leaves its section at its default). The instance-types,
    provider and cluster files hold their section under its own key; the other two are the section."""
    doc: dict[str, Any] = {}
    for name, section in KAS_FLEET_MANAGER_FILES.items():
        path = Path(directory) / name
        if not path.exists():
            continue
        raw = yaml.safe_load(path.read_text())
        if raw is None:
            continue
        if not isinstance(raw, dict):
            raise FleetConfigError([(name, "must be a mapping")])
        keyed = section in ("supported_instance_types", "supported_providers", "clusters")
        doc[section] = (raw.get(section) or []) if keyed else raw
    return parse_fleet_config(doc)
