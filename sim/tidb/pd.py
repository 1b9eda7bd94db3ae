"""The fake PD's answers: the stores API and `POST /autoscaling` as released PD answers it.

Released PD's autoscaling (not seed 002's proposal, which also scales TiKV on storage and sizes a
step to reach the thresholds' midpoint) works on CPU only and steps by one:

- per rule (component tikv or tidb, its `cpu_rule`), usage = the component's CPU use over its
  CPU quota, summed over all its running instances (TiKV: stores Up; Offline ones are leaving);
- usage > max_threshold: the first existing auto-scaled group gets one more instance, or, with
  none, a new group of the rule's first resource type gets one; never beyond that resource's
  `count` (an absent count is unlimited);
- usage < min_threshold: the first group loses one instance and is dropped at zero;
- otherwise: the current groups, unchanged (PD "returns the full group information");
- a storage_rule is ignored; there is no heterogeneous scale-out for a hot subset.

Groups are what PD sees on its instances: a `group` label starting with `pd-auto-scaling`
(TiKV: the store's labels; TiDB: its topology labels), here read from each instance's
TidbCluster config (spec.tikv.config.server.labels, spec.tidb.config.labels). A new group's
plan carries labels {group: pd-auto-scaling-<component>, resource-type: <type>} and, for
TiKV, specialUse: hotRegion (tikv/pd pkg/autoscaling/calculation.go, findBestGroupToScaleOut:
one group per component, the first resource type of the cpu rule); a standing group's plan
carries {group, resource-type} only. The request is read as PD's Strategy (pkg/autoscaling/
types.go): `storage_rule` is {min_threshold, resource_types}, the available share.

The answer is a JSON list of plans {component, count, resource_type, labels}, or `null` when
there is none: released PD writes `null` both when no group exists and when it could not read
its metrics, so a client must not read `null` as "delete every group".
"""

from __future__ import annotations

import math
from typing import Any

from sim.tidb.load import Instance
from sim.tidb.operator import config_labels

GROUP_LABEL = "group"
GROUP_PREFIX = "pd-auto-scaling"
RESOURCE_TYPE_LABEL = "resource-type"
SPECIAL_USE_LABEL = "specialUse"
HOT_REGION = "hotRegion"
TIKV_PORT = 20160
TIDB_PORT = 4000
_BINARY_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB")


class BadStrategy(ValueError):
    """The request body is not a strategy PD can read (PD answers 400)."""


def byte_size(value: float) -> str:
    """PD's JSON for a byte size: four significant digits and a binary unit ("59.99GiB")."""
    size, unit = float(value), 0
    while size >= 1024 and unit < len(_BINARY_UNITS) - 1:
        size /= 1024
        unit += 1
    return f"{size:.4g}{_BINARY_UNITS[unit]}"


def reported_quota(inst: Instance) -> float:
    """The quota series' value: TiKV reports its cgroup quota in cores; TiDB reports GOMAXPROCS,
    a whole number of at least one."""
    return inst.quota if inst.component == "tikv" else float(max(1, math.floor(inst.quota)))


def instance_address(inst: Instance) -> str:
    port = TIKV_PORT if inst.component == "tikv" else TIDB_PORT
    return f"{inst.pod}.{inst.cluster}-{inst.component}-peer.{inst.namespace}.svc:{port}"


def store_json(inst: Instance, store_id: int, labels: dict[str, str], started: int) -> dict[str, Any]:
    return {
        "store": {
            "id": store_id,
            "address": instance_address(inst),
            "labels": [{"key": k, "value": v} for k, v in sorted(labels.items())],
            "version": "8.5.0",
            "status_address": f"{instance_address(inst).rsplit(':', 1)[0]}:20180",
            "state_name": inst.store_state,
        },
        "status": {
            "capacity": byte_size(inst.capacity),
            "available": byte_size(inst.capacity - inst.used),
            "used_size": byte_size(inst.used),
            "leader_count": 0,
            "region_count": 0,
            "start_ts": started,
            "last_heartbeat_ts": started,
            "uptime": "1m0s",
        },
    }


def _parse_strategy(body: Any) -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]]]:
    if not isinstance(body, dict):
        raise BadStrategy("json: cannot unmarshal into Go value of type autoscaling.Strategy")
    rules = body.get("rules") or []
    resources = body.get("resources") or []
    if not isinstance(rules, list) or not isinstance(resources, list):
        raise BadStrategy("json: rules and resources must be arrays")
    by_type: dict[str, dict[str, Any]] = {}
    for res in resources:
        if not isinstance(res, dict) or not isinstance(res.get("resource_type"), str):
            raise BadStrategy("json: every resource needs a resource_type string")
        by_type[res["resource_type"]] = res
    for rule in rules:
        if not isinstance(rule, dict):
            raise BadStrategy("json: every rule must be an object")
    return rules, by_type


def _groups(component: str, members: list[Instance], labels_of: dict[str, dict[str, str]]) -> list[dict[str, Any]]:
    counts: dict[str, int] = {}
    types: dict[str, str] = {}
    for inst in members:
        labels = labels_of.get(inst.cluster, {})
        group = labels.get(GROUP_LABEL, "")
        if len(group) > len(GROUP_PREFIX) and group.startswith(GROUP_PREFIX):
            counts[group] = counts.get(group, 0) + 1
            types.setdefault(group, labels.get(RESOURCE_TYPE_LABEL, ""))
    plans = []
    for group in sorted(counts):
        labels = {GROUP_LABEL: group}
        if types[group]:
            labels[RESOURCE_TYPE_LABEL] = types[group]
        plans.append({"component": component, "count": counts[group], "resource_type": types[group], "labels": labels})
    return plans


def _within(resources: dict[str, dict[str, Any]], resource_type: str, count: int) -> bool:
    res = resources.get(resource_type)
    if res is None:
        return False
    limit = res.get("count")
    return limit is None or count <= int(limit)


def autoscaling_plans(
    body: Any, instances: list[Instance], clusters: dict[str, dict[str, Any]]
) -> list[dict[str, Any]] | None:
    """Released PD's answer for one cluster family. `instances` are its running instances,
    `clusters` its TidbClusters by name (for their configured labels)."""
    rules, resources = _parse_strategy(body)
    plans: list[dict[str, Any]] = []
    for rule in rules:
        component, cpu_rule = rule.get("component"), rule.get("cpu_rule")
        if component not in ("tikv", "tidb") or not isinstance(cpu_rule, dict):
            continue
        members = [i for i in instances if i.component == component and i.store_state == "Up"]
        quota = sum(reported_quota(i) for i in members)
        if not members or quota <= 0:
            continue
        usage = sum(i.cpu for i in members) / quota
        labels_of = {name: config_labels(tc, component) for name, tc in clusters.items()}
        groups = _groups(component, members, labels_of)
        if usage > float(cpu_rule.get("max_threshold", 0)):
            if groups:
                first = groups[0]
                if _within(resources, first["resource_type"], first["count"] + 1):
                    first["count"] += 1
            else:
                types = cpu_rule.get("resource_types") or []
                if types and _within(resources, types[0], 1):
                    labels = {GROUP_LABEL: f"{GROUP_PREFIX}-{component}", RESOURCE_TYPE_LABEL: types[0]}
                    if component == "tikv":
                        labels[SPECIAL_USE_LABEL] = HOT_REGION
                    groups = [{"component": component, "count": 1, "resource_type": types[0], "labels": labels}]
        elif usage < float(cpu_rule.get("min_threshold", 0)) and groups:
            groups[0]["count"] -= 1
            if groups[0]["count"] <= 0:
                groups = groups[1:]
        plans.extend(groups)
    return plans or None
