"""NodeGroupWithPriority: validation, flattening into pools, priority tiers.

Validation is strict and names the offending field with its path (spec.pools[1].priority)
so the problem can go on the object's status; one bad group never hides the others.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Iterable, Sequence
from decimal import Decimal
from typing import Any

import yaml

from scaling.kube.models import Resources, Taint
from scaling.kube.quantity import cpu_millis, memory_bytes, parse_quantity
from scaling.nodes.billing import DEFAULT_BILLING, DEFAULT_MARGIN_S
from scaling.nodes.disruption.budgets import schedule_problem
from scaling.nodes.disruption.models import Budget, ConsolidationPolicy, Disruption, DisruptionReason
from scaling.nodes.models import (
    CRD_GROUP,
    CRD_VERSION,
    ApprovalPolicy,
    Billing,
    GroupLimits,
    NodeGroup,
    Pool,
    PoolSpec,
    ScaleDownSettings,
    SpecProblem,
)
from scaling.nodes.providers.hetzner import config_problem as hetzner_config_problem

KIND = "NodeGroupWithPriority"
API_VERSION = f"{CRD_GROUP}/{CRD_VERSION}"
_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
# A group's spec rides in the loop's observations and history: one of more than this many
# bytes (as JSON) is refused, naming `spec` (a real one is about 1 KB; etcd takes 1.5 MiB).
MAX_SPEC_BYTES = 64 * 1024
_NAME = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?")
_POOL_NAME = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
_DURATION_PART = re.compile(r"([0-9]+(?:\.[0-9]+)?)(ms|s|m|h)", re.ASCII)  # ASCII digits only
_DURATION_UNIT = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


class InvalidSpec(ValueError):
    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


def pool_name(provider: str, server_type: str, zone: str = "", name: str = "") -> str:
    """`<provider>-<type>`, and `-<zone>` for an entry pinned to a zone (config.zone), so one
    type can be a pool in each of several zones; an entry that names itself (config.name, one
    server type) is called that, so one type and zone can be several pools (a migrated Cluster
    Autoscaler group each, told apart by placement group, sizes or priority)."""
    if name:
        return name
    return f"{provider}-{server_type}{f'-{zone}' if zone else ''}".lower()


def _zone(config: dict[str, Any]) -> str:
    return str(config.get("zone") or "")


def _own_name(config: dict[str, Any]) -> str:
    return str(config.get("name") or "")


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _count(v: Any, field: str) -> int:
    if not _is_int(v):
        raise InvalidSpec(field, f"must be an integer, got {v!r}")
    if v < 0:
        raise InvalidSpec(field, f"must not be negative, got {v}")
    return v


def _mapping(v: Any, field: str) -> dict[str, Any]:
    if v is None:
        return {}
    if not isinstance(v, dict):
        raise InvalidSpec(field, f"must be a mapping, got {type(v).__name__}")
    return v


def _string_map(v: Any, field: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for k, val in _mapping(v, field).items():
        if not isinstance(k, str) or not k:
            raise InvalidSpec(field, f"label keys must be non-empty strings, got {k!r}")
        if not isinstance(val, str):
            raise InvalidSpec(f"{field}.{k}", f"label values must be strings, got {val!r}")
        out[k] = val
    return out


def _duration_s(v: Any, field: str) -> float:
    """Seconds from a number or a Go-style duration ("10m", "1h30m", "45s")."""
    if _is_int(v) or isinstance(v, float):
        seconds = float(v)
    elif isinstance(v, str) and v and "".join(m.group(0) for m in _DURATION_PART.finditer(v)) == v:
        seconds = sum(float(m.group(1)) * _DURATION_UNIT[m.group(2)] for m in _DURATION_PART.finditer(v))
    else:
        raise InvalidSpec(field, f"must be a duration like '10m' or a number of seconds, got {v!r}")
    if seconds < 0:
        raise InvalidSpec(field, f"must not be negative, got {v!r}")
    return seconds


def _taints(v: Any, field: str) -> list[Taint]:
    if v is None:
        return []
    if not isinstance(v, list):
        raise InvalidSpec(field, "must be a list")
    out = []
    for i, t in enumerate(v):
        f = f"{field}[{i}]"
        if not isinstance(t, dict):
            raise InvalidSpec(f, "must be a mapping with key, value, effect")
        key = t.get("key")
        if not isinstance(key, str) or not key:
            raise InvalidSpec(f"{f}.key", "must be a non-empty string")
        value = t.get("value", "") or ""
        if not isinstance(value, str):
            raise InvalidSpec(f"{f}.value", f"must be a string, got {value!r}")
        effect = t.get("effect", "NoSchedule")
        if effect not in _EFFECTS:
            raise InvalidSpec(f"{f}.effect", f"must be one of {', '.join(_EFFECTS)}, got {effect!r}")
        out.append(Taint(key=key, value=value, effect=effect))
    return out


def _scale_down(v: Any, field: str) -> ScaleDownSettings:
    raw = _mapping(v, field)
    kwargs: dict[str, Any] = {}
    if "enabled" in raw:
        if not isinstance(raw["enabled"], bool):
            raise InvalidSpec(f"{field}.enabled", f"must be true or false, got {raw['enabled']!r}")
        kwargs["enabled"] = raw["enabled"]
    if "unneededTime" in raw:
        kwargs["unneeded_time_s"] = _duration_s(raw["unneededTime"], f"{field}.unneededTime")
    if "delayAfterAdd" in raw:
        kwargs["delay_after_add_s"] = _duration_s(raw["delayAfterAdd"], f"{field}.delayAfterAdd")
    if "utilizationThreshold" in raw:
        f = f"{field}.utilizationThreshold"
        try:  # a number or a quantity ("500m" = 0.5)
            threshold = parse_quantity(raw["utilizationThreshold"])
        except ValueError as e:
            raise InvalidSpec(f, str(e)) from None
        if not Decimal(0) <= threshold <= Decimal(1):
            raise InvalidSpec(f, f"must be between 0 and 1, got {raw['utilizationThreshold']!r}")
        kwargs["utilization_threshold"] = float(threshold)
    unknown = set(raw) - {"enabled", "unneededTime", "delayAfterAdd", "utilizationThreshold"}
    if unknown:
        raise InvalidSpec(f"{field}.{sorted(unknown)[0]}", "unknown field")
    return ScaleDownSettings(**kwargs)


# Karpenter's CRD patterns (pkg/apis/v1/nodepool.go) for spec.disruption.
_NILLABLE_DURATION = re.compile(r"(([0-9]+(s|m|h))+|Never)", re.ASCII)
_BUDGET_DURATION = re.compile(r"(([0-9]+(h|m))|([0-9]+h[0-9]+m))(0s)?", re.ASCII)
_BUDGET_NODES = re.compile(r"(100|[0-9]{1,2})%|[0-9]+", re.ASCII)
_DISRUPTION_FIELDS = ("consolidationPolicy", "consolidateAfter", "expireAfter", "budgets")
_BUDGET_FIELDS = ("nodes", "schedule", "duration", "reasons")
MAX_BUDGETS = 50  # Karpenter's MaxItems, for budgets and for a budget's reasons


def _nillable_duration(v: Any, field: str) -> float | None:
    """A Karpenter NillableDuration: "30s", "1h30m" or "Never" (None)."""
    if not isinstance(v, str) or not _NILLABLE_DURATION.fullmatch(v):
        raise InvalidSpec(field, f"must be a duration like '30s', '1h30m' or 'Never', got {v!r}")
    return None if v == "Never" else _duration_s(v, field)


def _budget(v: Any, field: str) -> Budget:
    raw = _mapping(v, field)
    unknown = set(raw) - set(_BUDGET_FIELDS)
    if unknown:
        raise InvalidSpec(
            f"{field}.{sorted(unknown, key=str)[0]}", f"unknown field (known: {', '.join(_BUDGET_FIELDS)})"
        )
    nodes = raw.get("nodes", "10%")
    if not isinstance(nodes, str) or not _BUDGET_NODES.fullmatch(nodes):
        raise InvalidSpec(
            f"{field}.nodes", f"must be a string: a count like '3' or a percentage like '10%', got {nodes!r}"
        )
    schedule, duration = raw.get("schedule"), raw.get("duration")
    if (schedule is None) != (duration is None):
        raise InvalidSpec(
            f"{field}.schedule" if schedule is None else f"{field}.duration", "'schedule' must be set with 'duration'"
        )
    duration_s = None
    if schedule is not None:
        if not isinstance(schedule, str) or (problem := schedule_problem(schedule)) is not None:
            raise InvalidSpec(
                f"{field}.schedule",
                problem if isinstance(schedule, str) and problem else f"must be a cron schedule, got {schedule!r}",
            )
        if not isinstance(duration, str) or not _BUDGET_DURATION.fullmatch(duration):
            raise InvalidSpec(
                f"{field}.duration", f"must be minutes or hours like '30m', '8h' or '1h30m', got {duration!r}"
            )
        duration_s = _duration_s(duration, f"{field}.duration")
    reasons_raw = raw.get("reasons") or []
    if not isinstance(reasons_raw, list) or len(reasons_raw) > MAX_BUDGETS:
        raise InvalidSpec(f"{field}.reasons", f"must be a list of at most {MAX_BUDGETS} reasons")
    known = [r.value for r in DisruptionReason]
    reasons = []
    for i, r in enumerate(reasons_raw):
        if r not in known:
            raise InvalidSpec(f"{field}.reasons[{i}]", f"must be one of {', '.join(known)}, got {r!r}")
        reasons.append(DisruptionReason(r))
    return Budget(nodes=nodes, schedule=schedule, duration_s=duration_s, reasons=tuple(reasons))


def _disruption(
    v: Any, field: str, scale_down: ScaleDownSettings, scale_down_raw: Any
) -> tuple[Disruption, ScaleDownSettings]:
    """spec.disruption (Karpenter's NodePool fields), and the group's scale-down settings with
    consolidationPolicy and consolidateAfter applied. consolidateAfter is the scale-down's unneeded
    time ("Never" turns consolidation off): setting both it and spec.scaleDown's is refused."""
    raw = _mapping(v, field)
    unknown = set(raw) - set(_DISRUPTION_FIELDS)
    if unknown:
        raise InvalidSpec(
            f"{field}.{sorted(unknown, key=str)[0]}", f"unknown field (known: {', '.join(_DISRUPTION_FIELDS)})"
        )
    updates: dict[str, Any] = {}
    if "consolidationPolicy" in raw:
        known = [p.value for p in ConsolidationPolicy]
        if raw["consolidationPolicy"] not in known:
            raise InvalidSpec(
                f"{field}.consolidationPolicy", f"must be one of {', '.join(known)}, got {raw['consolidationPolicy']!r}"
            )
        updates["policy"] = ConsolidationPolicy(raw["consolidationPolicy"])
    if "consolidateAfter" in raw:
        after = _nillable_duration(raw["consolidateAfter"], f"{field}.consolidateAfter")
        written = _mapping(scale_down_raw, "spec.scaleDown")
        for key in ("unneededTime", "enabled"):
            if key in written:
                raise InvalidSpec(f"{field}.consolidateAfter", f"set either it or spec.scaleDown.{key}, not both")
        updates["enabled" if after is None else "unneeded_time_s"] = False if after is None else after
    expire = raw.get("expireAfter")
    budgets_raw = raw.get("budgets") or []
    if not isinstance(budgets_raw, list) or len(budgets_raw) > MAX_BUDGETS:
        raise InvalidSpec(f"{field}.budgets", f"must be a list of at most {MAX_BUDGETS} budgets")
    disruption = Disruption(
        expire_after_s=None if expire is None else _nillable_duration(expire, f"{field}.expireAfter"),
        budgets=[_budget(b, f"{field}.budgets[{i}]") for i, b in enumerate(budgets_raw)],
    )
    return disruption, scale_down.model_copy(update=updates)


def _headroom(v: Any, field: str) -> Resources | None:
    """spec.headroom: {cpu, memory, pods} as Kubernetes quantities; pods (slots) defaults to 1.

    It is the room one placeholder pod would ask for (see scaling.nodes.headroom)."""
    if v is None:
        return None
    raw = _mapping(v, field)
    unknown = set(raw) - {"cpu", "memory", "pods"}
    if unknown:
        raise InvalidSpec(f"{field}.{sorted(unknown, key=str)[0]}", "unknown field (known: cpu, memory, pods)")
    if not raw:
        raise InvalidSpec(field, "must set cpu, memory or pods")
    amounts: dict[str, int] = {}
    for key, convert in (("cpu", cpu_millis), ("memory", memory_bytes)):
        if key in raw:
            f = f"{field}.{key}"
            try:
                value = parse_quantity(raw[key])
            except ValueError as e:
                raise InvalidSpec(f, str(e)) from None
            if value < 0:
                raise InvalidSpec(f, f"must not be negative, got {raw[key]!r}")
            amounts[key] = convert(raw[key])
    pods = 1
    if "pods" in raw:
        f = f"{field}.pods"
        try:
            n = parse_quantity(raw["pods"])
        except ValueError as e:
            raise InvalidSpec(f, str(e)) from None
        if n != n.to_integral_value() or n < 1:
            raise InvalidSpec(f, f"must be a whole number of pods, at least 1, got {raw['pods']!r}")
        pods = int(n)
    return Resources(cpu_m=amounts.get("cpu", 0), memory=amounts.get("memory", 0), pods=pods)


def _price(v: Any, field: str) -> float:
    """A price per hour: a number, or a decimal string ("0.25"); never negative."""
    if isinstance(v, bool) or not isinstance(v, (int, float, str)):
        raise InvalidSpec(field, f"must be a number, got {v!r}")
    try:
        price = Decimal(str(v).strip())
    except ArithmeticError:
        raise InvalidSpec(field, f"must be a number, got {v!r}") from None
    if not price.is_finite() or price < 0:
        raise InvalidSpec(field, f"must be a finite number, at least 0, got {v!r}")
    return float(price)


def _limits(v: Any, field: str) -> GroupLimits | None:
    """spec.limits: {pricePerHour} in the catalogue's currency (scaling.nodes.scale_up.money)."""
    if v is None:
        return None
    raw = _mapping(v, field)
    unknown = set(raw) - {"pricePerHour"}
    if unknown:
        raise InvalidSpec(f"{field}.{sorted(unknown, key=str)[0]}", "unknown field (known: pricePerHour)")
    price = raw.get("pricePerHour")
    return GroupLimits(pricePerHour=None if price is None else _price(price, f"{field}.pricePerHour"))


_APPROVAL_FIELDS = ("nodesAbove", "pricePerHourAbove", "timeout", "default")


def _approval(v: Any, field: str) -> ApprovalPolicy | None:
    """spec.approval: {nodesAbove, pricePerHourAbove, timeout, default} (scaling.nodes.scale_up.approvals)."""
    if v is None:
        return None
    raw = _mapping(v, field)
    unknown = set(raw) - set(_APPROVAL_FIELDS)
    if unknown:
        raise InvalidSpec(
            f"{field}.{sorted(unknown, key=str)[0]}", f"unknown field (known: {', '.join(_APPROVAL_FIELDS)})"
        )
    if raw.get("nodesAbove") is None and raw.get("pricePerHourAbove") is None:
        raise InvalidSpec(field, "must set nodesAbove or pricePerHourAbove")
    kwargs: dict[str, Any] = {}
    if raw.get("nodesAbove") is not None:
        kwargs["nodes_above"] = _count(raw["nodesAbove"], f"{field}.nodesAbove")
    if raw.get("pricePerHourAbove") is not None:
        kwargs["price_per_hour_above"] = _price(raw["pricePerHourAbove"], f"{field}.pricePerHourAbove")
    if "timeout" in raw:
        kwargs["timeout_s"] = _duration_s(raw["timeout"], f"{field}.timeout")
        if kwargs["timeout_s"] <= 0:
            raise InvalidSpec(f"{field}.timeout", f"must be longer than 0, got {raw['timeout']!r}")
    if "default" in raw:
        if raw["default"] not in ("approve", "deny"):
            raise InvalidSpec(f"{field}.default", f"must be approve or deny, got {raw['default']!r}")
        kwargs["default"] = raw["default"]
    return ApprovalPolicy(**kwargs)


def _billing(v: Any, field: str, provider: str) -> Billing | None:
    """pools[].billing: {period, margin} as durations; absent = the provider's default
    (Hetzner: per started hour), period 0 = paid by the second (never hold a node for it)."""
    if v is None:
        return DEFAULT_BILLING.get(provider)
    raw = _mapping(v, field)
    unknown = set(raw) - {"period", "margin"}
    if unknown:
        raise InvalidSpec(f"{field}.{sorted(unknown, key=str)[0]}", "unknown field (known: period, margin)")
    if "period" not in raw:
        raise InvalidSpec(f"{field}.period", "is required (e.g. '1h'; 0 turns billing-aware scale-down off)")
    # Go's time.ParseDuration takes a bare "0" too.
    period = 0.0 if raw["period"] == "0" else _duration_s(raw["period"], f"{field}.period")
    if period == 0:
        return None
    margin = _duration_s(raw.get("margin", DEFAULT_MARGIN_S), f"{field}.margin")
    if margin >= period:
        raise InvalidSpec(f"{field}.margin", f"must be shorter than the period ({raw['period']!r})")
    return Billing(period_s=period, margin_s=margin)


def _pool(v: Any, field: str, known_providers: Collection[str]) -> PoolSpec:
    if not isinstance(v, dict):
        raise InvalidSpec(field, "must be a mapping")
    provider = v.get("provider")
    if not isinstance(provider, str) or not provider:
        raise InvalidSpec(f"{field}.provider", "is required")
    if provider not in known_providers:
        known = ", ".join(sorted(known_providers)) or "none"
        raise InvalidSpec(f"{field}.provider", f"unknown provider {provider!r} (known: {known})")
    types = v.get("serverType")
    if isinstance(types, str):
        types = [types]
    if not isinstance(types, list) or not types:
        raise InvalidSpec(f"{field}.serverType", "must be a non-empty list of server type names")
    seen: set[str] = set()
    for i, t in enumerate(types):
        if not isinstance(t, str) or not t.strip():
            raise InvalidSpec(f"{field}.serverType[{i}]", f"must be a non-empty string, got {t!r}")
        if t.lower() in seen:
            raise InvalidSpec(f"{field}.serverType[{i}]", f"duplicate server type {t!r}")
        seen.add(t.lower())
    if "priority" not in v:
        raise InvalidSpec(f"{field}.priority", "is required")
    priority = _count(v["priority"], f"{field}.priority")
    min_nodes = _count(v.get("minNodes", 0), f"{field}.minNodes")
    max_nodes = v.get("maxNodes")
    if max_nodes is not None:
        max_nodes = _count(max_nodes, f"{field}.maxNodes")
        if min_nodes > max_nodes:
            raise InvalidSpec(f"{field}.minNodes", f"minNodes {min_nodes} exceeds maxNodes {max_nodes}")
    config = _mapping(v.get("config"), f"{field}.config")
    if "name" in config:
        own = config["name"]
        if not isinstance(own, str) or not _POOL_NAME.fullmatch(own):
            raise InvalidSpec(f"{field}.config.name", f"must be a DNS label (a-z, 0-9, '-', at most 63), got {own!r}")
        if len(types) != 1:
            raise InvalidSpec(f"{field}.config.name", "names one pool: list exactly one server type")
    if provider == "hetzner" and (problem := hetzner_config_problem(config)) is not None:
        raise InvalidSpec(f"{field}.config.{problem[0]}", problem[1])
    if provider == "kwok" and "resources" in config:
        _pool_resources(config["resources"], f"{field}.config.resources")
    return PoolSpec(
        provider=provider,
        serverType=list(types),
        priority=priority,
        minNodes=min_nodes,
        maxNodes=max_nodes,
        config=dict(config),
        billing=_billing(v.get("billing"), f"{field}.billing", provider),
    )


def spec_too_large(spec: dict[str, Any]) -> None:
    size = len(json.dumps(spec, default=str))
    if size > MAX_SPEC_BYTES:
        raise InvalidSpec("spec", f"is {size} bytes as JSON; growth reads at most {MAX_SPEC_BYTES}")


# What a KWOK pool may declare its nodes offer beyond their type (config.resources).
MAX_POOL_RESOURCES = 16


def _pool_resources(raw: Any, field: str) -> None:
    """{"example.com/foo": 4, ...}: extended-resource names (a domain-qualified name) and
    non-negative whole quantities; InvalidSpec names the first bad entry."""
    if not isinstance(raw, dict) or len(raw) > MAX_POOL_RESOURCES:
        raise InvalidSpec(field, f"must map at most {MAX_POOL_RESOURCES} resource names to quantities")
    for name, q in raw.items():
        if not isinstance(name, str) or not _RESOURCE.fullmatch(name):
            raise InvalidSpec(f"{field}.{name}", "must be a resource name like example.com/foo or hugepages-2Mi")
        try:
            amount = parse_quantity(q)
        except ValueError as e:
            raise InvalidSpec(f"{field}.{name}", str(e)) from None
        if amount < 0 or amount != amount.to_integral_value():
            raise InvalidSpec(f"{field}.{name}", f"must be a whole, non-negative quantity, got {q!r}")


_RESOURCE = re.compile(
    r"([a-z0-9]([-a-z0-9.]*[a-z0-9])?/[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?|hugepages-[0-9]+[KMG]i|ephemeral-storage)"
)


def parse_node_group(obj: dict[str, Any], known_providers: Collection[str]) -> NodeGroup:
    """Validate one NodeGroupWithPriority object; InvalidSpec names the first bad field."""
    if not isinstance(obj, dict):
        raise InvalidSpec("", "a NodeGroupWithPriority must be a mapping")
    api_version = obj.get("apiVersion", API_VERSION)
    if api_version != API_VERSION:
        raise InvalidSpec("apiVersion", f"must be {API_VERSION}, got {api_version!r}")
    kind = obj.get("kind", KIND)
    if kind != KIND:
        raise InvalidSpec("kind", f"must be {KIND}, got {kind!r}")
    meta = _mapping(obj.get("metadata"), "metadata")
    name = meta.get("name")
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise InvalidSpec("metadata.name", f"must be a DNS subdomain name, got {name!r}")
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        raise InvalidSpec("spec", "is required")
    spec_too_large(spec)
    pools_raw = spec.get("pools")
    if not isinstance(pools_raw, list) or not pools_raw:
        raise InvalidSpec("spec.pools", "must list at least one pool")
    pools = [_pool(p, f"spec.pools[{i}]", known_providers) for i, p in enumerate(pools_raw)]
    # Pool names must be unique: a server type may appear in one entry only (per zone).
    seen: dict[str, str] = {}
    for i, p in enumerate(pools):
        for j, t in enumerate(p.server_types):
            n = pool_name(p.provider, t, _zone(p.config), _own_name(p.config))
            if n in seen:
                raise InvalidSpec(f"spec.pools[{i}].serverType[{j}]", f"{t!r} is already listed at {seen[n]}")
            seen[n] = f"spec.pools[{i}]"
    max_nodes = spec.get("maxNodes")
    if max_nodes is not None:
        max_nodes = _count(max_nodes, "spec.maxNodes")
        total_min = sum(p.min_nodes for p in pools)
        if total_min > max_nodes:
            raise InvalidSpec("spec.maxNodes", f"is below the pools' summed minNodes ({total_min})")
    disruption, scale_down = _disruption(
        spec.get("disruption"),
        "spec.disruption",
        _scale_down(spec.get("scaleDown"), "spec.scaleDown"),
        spec.get("scaleDown"),
    )
    return NodeGroup(
        name=name,
        labels=_string_map(spec.get("labels"), "spec.labels"),
        taints=_taints(spec.get("taints"), "spec.taints"),
        startupTaints=_taints(spec.get("startupTaints"), "spec.startupTaints"),
        pools=pools,
        maxNodes=max_nodes,
        scaleDown=scale_down,
        disruption=disruption,
        headroom=_headroom(spec.get("headroom"), "spec.headroom"),
        limits=_limits(spec.get("limits"), "spec.limits"),
        approval=_approval(spec.get("approval"), "spec.approval"),
    )


def _problem(name: str, field: str, message: str) -> SpecProblem:
    return SpecProblem(kind=KIND, name=name, field=field, message=message)


def load_node_groups(
    objs: Iterable[dict[str, Any]], known_providers: Collection[str]
) -> tuple[list[NodeGroup], list[SpecProblem]]:
    """Every valid group, and a problem for each invalid or duplicate one."""
    groups: list[NodeGroup] = []
    problems: list[SpecProblem] = []
    names: set[str] = set()
    for obj in objs:
        raw_name = ((obj or {}).get("metadata") or {}).get("name") if isinstance(obj, dict) else None
        name = raw_name if isinstance(raw_name, str) else ""
        try:
            group = parse_node_group(obj, known_providers)
        except InvalidSpec as e:
            problems.append(_problem(name, e.field, e.message))
            continue
        if group.name in names:
            problems.append(_problem(group.name, "metadata.name", "duplicate NodeGroupWithPriority name"))
            continue
        names.add(group.name)
        groups.append(group)
    return groups, problems


def parse_node_groups_yaml(text: str, known_providers: Collection[str]) -> tuple[list[NodeGroup], list[SpecProblem]]:
    """A YAML stream of NodeGroupWithPriority documents (empty documents are skipped)."""
    try:
        docs = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as e:
        return [], [_problem("", "", f"invalid YAML: {e}")]
    return load_node_groups(docs, known_providers)


def flatten_pools(group: NodeGroup) -> list[Pool]:
    """One Pool per (provider, server type), in the order written."""
    return [
        Pool(
            group=group.name,
            name=pool_name(spec.provider, t, _zone(spec.config), _own_name(spec.config)),
            provider=spec.provider,
            server_type=t,
            priority=spec.priority,
            min_nodes=spec.min_nodes,
            max_nodes=spec.max_nodes,
            config=spec.config,
            billing=spec.billing,
        )
        for spec in group.pools
        for t in spec.server_types
    ]


def priority_tiers(pools: Sequence[Pool]) -> list[list[Pool]]:
    """Pools grouped by priority, highest first; pools of equal priority share a tier."""
    by_priority: dict[int, list[Pool]] = {}
    for p in pools:
        by_priority.setdefault(p.priority, []).append(p)
    return [by_priority[k] for k in sorted(by_priority, reverse=True)]
