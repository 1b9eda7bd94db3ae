"""TidbClusterAutoScaler spec (pingcap.com/v1alpha1): parse, default and validate.

The raw spec is camelCase as the CRD writes it; rules keep the seed's snake_case keys
(`max_threshold`, `min_threshold`, `resource_types`). Per component (`tikv`, `tidb`):

    resources: {<type>: {cpu, memory, storage?, count?}}
    rules: {cpu|storage: {max_threshold, min_threshold?, resource_types?}}
    scaleInIntervalSeconds (500), scaleOutIntervalSeconds (300)
    external: {endpoint: {host, port, path?, tlsSecret?: {name, namespace}}, maxReplicas}
    maxHomogeneousReplicas (growth's own; absent = no cap)

Defaulting as released tidb-operator does (pkg/autoscaler/autoscaler/util.go): no resources ->
one type `default_<component>` with the base TidbCluster's requests and no count; a rule without
resource_types -> every resource type; a cpu rule without min_threshold -> 0.1.
Validation: 0 <= min < max <= 1 per rule (stricter than upstream's min <= max: equal thresholds
would scale out and in on the same reading); a rule's resource types must exist; storage rules
are TiKV-only; counts and maxReplicas >= 0; quantities parse. Errors name the field, for status.
A TiDB resource type may carry `storage`, as the released CRD allows; TiDB has no volume, so it
is ignored. A storage rule has no min_threshold upstream ("not applicable to storage"): it aims
just under max.
`maxHomogeneousReplicas` is seed 002's user-set cap on homogeneous instances: a homogeneous
scale-out never takes the base cluster past it (released tidb-operator has no such field).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from scaling.components.contracts import Component, ComponentView, ExternalEndpoint, SecretRef
from scaling.kube.quantity import cpu_millis, memory_bytes

COMPONENTS: tuple[Component, ...] = ("tikv", "tidb")
RULE_RESOURCES = ("cpu", "storage")
DEFAULT_SCALE_IN_S = 500
DEFAULT_SCALE_OUT_S = 300
DEFAULT_CPU_MIN_THRESHOLD = 0.1  # tidb-operator's defaultBasicAutoScaler


def default_type(component: str) -> str:
    return f"default_{component}"


class SpecError(BaseModel):
    field: str  # e.g. "spec.tikv.rules.cpu.min_threshold"
    message: str

    def __str__(self) -> str:
        return f"{self.field}: {self.message}"


class AutoResource(BaseModel):
    name: str
    cpu: str
    memory: str
    storage: str = ""
    count: int | None = None  # None: unlimited
    cpu_milli: int = 0
    memory_bytes: int = 0


class AutoRule(BaseModel):
    max_threshold: float
    min_threshold: float | None = None
    resource_types: list[str] = Field(default_factory=list)

    @property
    def target(self) -> float:
        """Where a scale-out aims: the midpoint, or max itself without a min."""
        if self.min_threshold is None:
            return self.max_threshold
        return (self.max_threshold + self.min_threshold) / 2


class ExternalConfig(BaseModel):
    endpoint: ExternalEndpoint
    max_replicas: int


class ComponentSpec(BaseModel):
    component: Component
    resources: dict[str, AutoResource]
    rules: dict[str, AutoRule] = Field(default_factory=dict)
    scale_in_interval_s: int = DEFAULT_SCALE_IN_S
    scale_out_interval_s: int = DEFAULT_SCALE_OUT_S
    external: ExternalConfig | None = None
    max_homogeneous_replicas: int | None = None  # None: no cap

    def preferred_types(self, rule: AutoRule) -> list[AutoResource]:
        """The rule's resource types, most CPU first (ties: more memory, then name)."""
        types = [self.resources[t] for t in rule.resource_types if t in self.resources]
        return sorted(types, key=lambda r: (-r.cpu_milli, -r.memory_bytes, r.name))


class AutoscalerSpec(BaseModel):
    cluster_name: str
    cluster_namespace: str
    components: dict[str, ComponentSpec] = Field(default_factory=dict)


def base_cluster_ref(raw: dict[str, Any], namespace: str) -> tuple[str, str] | SpecError:
    """spec.cluster {name, namespace?}: the base TidbCluster (namespace defaults to the object's)."""
    cluster = raw.get("cluster")
    if not isinstance(cluster, dict) or not isinstance(cluster.get("name"), str) or not cluster["name"]:
        return SpecError(field="spec.cluster.name", message="required: the TidbCluster to scale")
    ns = cluster.get("namespace") or namespace
    if not isinstance(ns, str):
        return SpecError(field="spec.cluster.namespace", message="must be a string")
    return cluster["name"], ns


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def _resource(name: str, raw: Any, at: str, component: str, errors: list[SpecError]) -> AutoResource | None:
    if not isinstance(raw, dict):
        errors.append(SpecError(field=at, message="must be an object {cpu, memory, storage?, count?}"))
        return None
    values: dict[str, Any] = {"name": name}
    for key in ("cpu", "memory", "storage"):
        v = raw.get(key)
        if v is None or v == "":
            if key != "storage":
                errors.append(SpecError(field=f"{at}.{key}", message="required"))
                return None
            continue
        try:
            amount = cpu_millis(v) if key == "cpu" else memory_bytes(v)
        except ValueError as exc:
            errors.append(SpecError(field=f"{at}.{key}", message=str(exc)))
            return None
        if amount <= 0:
            errors.append(SpecError(field=f"{at}.{key}", message=f"must be > 0, got {v!r}"))
            return None
        values[key] = str(v)
        if key == "cpu":
            values["cpu_milli"] = amount
        elif key == "memory":
            values["memory_bytes"] = amount
    if component != "tikv":
        values.pop("storage", None)  # allowed by the CRD; a TiDB instance has no volume to size
    if raw.get("count") is not None:
        count = _int(raw["count"])
        if count is None or count < 0:
            errors.append(SpecError(field=f"{at}.count", message=f"must be an integer >= 0, got {raw['count']!r}"))
            return None
        values["count"] = count
    return AutoResource(**values)


def _default_resource(
    component: str, base: ComponentView | None, at: str, errors: list[SpecError]
) -> AutoResource | None:
    """default_<component>: the base cluster's requests, no count."""
    name = default_type(component)
    if base is None:
        errors.append(SpecError(field="spec.cluster", message=f"the base TidbCluster has no spec.{component}"))
        return None
    if not base.cpu or not base.memory:
        errors.append(
            SpecError(
                field=f"{at}.resources",
                message=f"not set, and the base TidbCluster's spec.{component}.requests lacks cpu or memory "
                "to default it from",
            )
        )
        return None
    raw = {"cpu": base.cpu, "memory": base.memory}
    if component == "tikv" and base.storage:
        raw["storage"] = base.storage
    return _resource(name, raw, f"{at}.resources.{name}", component, errors)


def _rule(kind: str, raw: Any, at: str, component: str, types: list[str], errors: list[SpecError]) -> AutoRule | None:
    if kind not in RULE_RESOURCES:
        errors.append(SpecError(field=at, message=f"unknown rule resource {kind!r}; known: cpu, storage"))
        return None
    if kind == "storage" and component != "tikv":
        errors.append(SpecError(field=at, message="storage rules are TiKV-only"))
        return None
    if not isinstance(raw, dict):
        errors.append(SpecError(field=at, message="must be an object {max_threshold, min_threshold, resource_types}"))
        return None
    high = _number(raw.get("max_threshold"))
    if high is None:
        errors.append(SpecError(field=f"{at}.max_threshold", message="required, a number in (0, 1]"))
        return None
    low: float | None = None
    if raw.get("min_threshold") is not None:
        low = _number(raw["min_threshold"])
        if low is None:
            errors.append(SpecError(field=f"{at}.min_threshold", message="must be a number in [0, 1)"))
            return None
    elif kind == "cpu":
        low = DEFAULT_CPU_MIN_THRESHOLD
    if not 0 < high <= 1:
        errors.append(SpecError(field=f"{at}.max_threshold", message=f"must be in (0, 1], got {high}"))
        return None
    if low is not None and raw.get("min_threshold") is None and low >= high:
        errors.append(
            SpecError(
                field=f"{at}.max_threshold",
                message=f"must be above the default min_threshold {low} when min_threshold is not set, got {high}",
            )
        )
        return None
    if low is not None and not 0 <= low < high:
        errors.append(
            SpecError(
                field=f"{at}.min_threshold",
                message=f"must satisfy 0 <= min_threshold < max_threshold ({high}), got {low}",
            )
        )
        return None
    chosen = raw.get("resource_types")
    if chosen is None or chosen == []:
        chosen = list(types)
    if not isinstance(chosen, list) or not all(isinstance(t, str) for t in chosen):
        errors.append(SpecError(field=f"{at}.resource_types", message="must be a list of resource type names"))
        return None
    unknown = [t for t in chosen if t not in types]
    if unknown:
        errors.append(
            SpecError(
                field=f"{at}.resource_types", message=f"unknown resource types {unknown}; defined: {sorted(types)}"
            )
        )
        return None
    return AutoRule(max_threshold=high, min_threshold=low, resource_types=list(dict.fromkeys(chosen)))


def _interval(raw: dict[str, Any], key: str, default: int, at: str, errors: list[SpecError]) -> int:
    if raw.get(key) is None:
        return default
    value = _int(raw[key])
    if value is None or value < 0:
        errors.append(SpecError(field=f"{at}.{key}", message=f"must be an integer >= 0, got {raw[key]!r}"))
        return default
    return value


def _external(raw: Any, at: str, errors: list[SpecError]) -> ExternalConfig | None:
    if not isinstance(raw, dict):
        errors.append(SpecError(field=at, message="must be an object {endpoint, maxReplicas}"))
        return None
    ep = raw.get("endpoint")
    if not isinstance(ep, dict) or not ep.get("host") or _int(ep.get("port")) is None:
        errors.append(SpecError(field=f"{at}.endpoint", message="needs host and an integer port"))
        return None
    port = _int(ep.get("port")) or 0
    if not 0 < port < 65536:
        errors.append(SpecError(field=f"{at}.endpoint.port", message=f"must be in 1..65535, got {port}"))
        return None
    max_replicas = _int(raw.get("maxReplicas"))
    if max_replicas is None or max_replicas < 0:
        errors.append(
            SpecError(field=f"{at}.maxReplicas", message=f"required, an integer >= 0, got {raw.get('maxReplicas')!r}")
        )
        return None
    secret = ep.get("tlsSecret")
    tls_secret: SecretRef | None = None
    if secret is not None:
        # The released CRD requires both keys (SecretRef {name, namespace}).
        if not isinstance(secret, dict) or not all(
            isinstance(secret.get(k), str) and secret[k] for k in ("name", "namespace")
        ):
            errors.append(
                SpecError(field=f"{at}.endpoint.tlsSecret", message=f"must be {{name, namespace}}, got {secret!r}")
            )
            return None
        tls_secret = SecretRef(name=secret["name"], namespace=secret["namespace"])
    endpoint = ExternalEndpoint(host=str(ep["host"]), port=port, path=str(ep.get("path") or ""), tls_secret=tls_secret)
    return ExternalConfig(endpoint=endpoint, max_replicas=max_replicas)


def parse_component(
    component: Component, raw: Any, base: ComponentView | None
) -> tuple[ComponentSpec | None, list[SpecError]]:
    at = f"spec.{component}"
    errors: list[SpecError] = []
    if not isinstance(raw, dict):
        return None, [SpecError(field=at, message="must be an object")]
    resources: dict[str, AutoResource] = {}
    raw_resources = raw.get("resources")
    if raw_resources:
        if not isinstance(raw_resources, dict):
            return None, [SpecError(field=f"{at}.resources", message="must be a map of resource type -> resource")]
        for name, body in raw_resources.items():
            res = _resource(str(name), body, f"{at}.resources.{name}", component, errors)
            if res is not None:
                resources[res.name] = res
    else:
        res = _default_resource(component, base, at, errors)
        if res is not None:
            resources[res.name] = res
    if errors:
        return None, errors
    rules: dict[str, AutoRule] = {}
    raw_rules = raw.get("rules") or {}
    if not isinstance(raw_rules, dict):
        return None, [SpecError(field=f"{at}.rules", message="must be a map cpu|storage -> rule")]
    for kind, body in raw_rules.items():
        rule = _rule(str(kind), body, f"{at}.rules.{kind}", component, list(resources), errors)
        if rule is not None:
            rules[str(kind)] = rule
    scale_in = _interval(raw, "scaleInIntervalSeconds", DEFAULT_SCALE_IN_S, at, errors)
    scale_out = _interval(raw, "scaleOutIntervalSeconds", DEFAULT_SCALE_OUT_S, at, errors)
    external = _external(raw["external"], f"{at}.external", errors) if raw.get("external") is not None else None
    max_homogeneous: int | None = None
    if raw.get("maxHomogeneousReplicas") is not None:
        max_homogeneous = _int(raw["maxHomogeneousReplicas"])
        if max_homogeneous is None or max_homogeneous < 0:
            errors.append(
                SpecError(
                    field=f"{at}.maxHomogeneousReplicas",
                    message=f"must be an integer >= 0, got {raw['maxHomogeneousReplicas']!r}",
                )
            )
    if not rules and external is None and not errors:
        errors.append(SpecError(field=f"{at}.rules", message="no rules and no external endpoint: nothing to scale on"))
    if errors:
        return None, errors
    return (
        ComponentSpec(
            component=component,
            resources=resources,
            rules=rules,
            scale_in_interval_s=scale_in,
            scale_out_interval_s=scale_out,
            external=external,
            max_homogeneous_replicas=max_homogeneous,
        ),
        [],
    )


def parse_spec(
    raw: dict[str, Any], namespace: str, base_components: dict[str, ComponentView]
) -> tuple[AutoscalerSpec | None, dict[str, list[SpecError]]]:
    """Parse, default and validate. Errors are per component ("" = the whole object), so one
    bad component does not stop the other; the spec holds only the valid components."""
    ref = base_cluster_ref(raw, namespace)
    if isinstance(ref, SpecError):
        return None, {"": [ref]}
    errors: dict[str, list[SpecError]] = {}
    spec = AutoscalerSpec(cluster_name=ref[0], cluster_namespace=ref[1])
    if ref[1] != namespace:
        # The heterogeneous clusters live beside their base; a cross-namespace base is refused
        # rather than half-supported.
        return None, {"": [SpecError(field="spec.cluster.namespace", message="must be the autoscaler's namespace")]}
    for component in COMPONENTS:
        if raw.get(component) is None:
            continue
        parsed, problems = parse_component(component, raw[component], base_components.get(component))
        if problems:
            errors[component] = problems
        elif parsed is not None:
            spec.components[component] = parsed
    if not spec.components and not errors:
        errors[""] = [SpecError(field="spec", message="neither spec.tikv nor spec.tidb is set")]
    return spec, errors
