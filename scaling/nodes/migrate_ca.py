"""From Cluster Autoscaler's Hetzner provider to growth: CA's settings as CA users keep them in,
NodeGroupWithPriority objects and worker settings out, with notes on what did not carry over.

What CA reads (cluster-autoscaler/cloudprovider/hetzner, hetzner_manager.go and
hetzner_cloud_provider.go, and expander/priority):
- `--nodes=<min>:<max>:<type>:<location>:<name>`, split on the first four colons; min and max
  must be integers; type and location are lower-cased.
- `HCLOUD_CLUSTER_CONFIG` (base64 JSON) wins over `HCLOUD_CLUSTER_CONFIG_FILE` (plain JSON):
  `imagesForArch` {arm64, amd64} and `nodeConfigs` {<name>: cloudInit, labels, taints,
  placementGroup}. With either, every `--nodes` name needs a nodeConfigs entry (CA stops
  otherwise). Without them, the legacy `HCLOUD_CLOUD_INIT` and `HCLOUD_IMAGE` (default
  `ubuntu-20.04`) apply to every node group. JSON keys match case-insensitively, as Go's do.
- `HCLOUD_NETWORK`, `HCLOUD_FIREWALL`, `HCLOUD_SSH_KEY` (id or name), `HCLOUD_PUBLIC_IPV4/IPV6`
  (Go booleans, default true), `HCLOUD_ENDPOINT`, `HCLOUD_SERVER_CREATION_TIMEOUT` (minutes).
- The priority expander's ConfigMap `cluster-autoscaler-priority-expander`, key `priorities`:
  YAML of priority -> regexes over node group names (unanchored, as Go's MatchString); the
  highest matching priority wins; a group no regex matches is never expanded by CA.

How growth maps them: CA node groups whose nodes carry the same labels and taints become the
pools of one NodeGroupWithPriority (one pool entry per server type, its locations in priority
order, so growth falls back across them); their priorities come from the expander. Secrets
never reach the output: the token stays where it is (`token_env: HCLOUD_TOKEN`, the same
Secret), and cloud-init is not copied (it usually holds a join token).
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

import yaml
from pydantic import BaseModel, Field

from scaling.nodes.catalogue import catalogue_index, lookup
from scaling.nodes.models import CRD_GROUP, CRD_VERSION
from scaling.nodes.nodegroups import KIND, InvalidSpec, _duration_s, parse_node_group
from scaling.nodes.providers.hetzner import PROVIDER
from scaling.nodes.providers.kwok import kwok_catalogue

DEFAULT_LEGACY_IMAGE = "ubuntu-20.04"  # what CA uses when HCLOUD_IMAGE is unset
PRIORITY_CONFIGMAP = "cluster-autoscaler-priority-expander"
MIGRATED_FROM = f"{CRD_GROUP}/migrated-from"
_GO_TRUE = {"1", "t", "T", "TRUE", "true", "True"}
_GO_FALSE = {"0", "f", "F", "FALSE", "false", "False"}
_DNS = re.compile(r"[^a-z0-9.-]+")
_NODE_CONFIG_KEYS = {"cloudinit", "labels", "taints", "placementgroup"}  # CA's NodeConfig fields
# CA flags growth has a setting for: flag -> (where, growth name). Durations are Go durations.
_GROUP_FLAGS = {
    "scale-down-enabled": "enabled",
    "scale-down-unneeded-time": "unneededTime",
    "scale-down-delay-after-add": "delayAfterAdd",
    "scale-down-utilization-threshold": "utilizationThreshold",
}
_LOOP_FLAGS = {
    "max-nodes-total": "max_nodes_total",
    "scan-interval": "scan_interval_s",
    "scale-down-unready-time": "scale_down_unready_time_s",
    "max-node-provision-time": "readiness_timeout_s",
    "enforce-node-group-min-size": "enforce_min_nodes",
}
# Flags that only say what CA is (or are growth's behaviour anyway): nothing to carry.
_SILENT_FLAGS = {"cloud-provider", "expander", "nodes", "v", "logtostderr", "stderrthreshold", "alsologtostderr"}


class MigrationError(ValueError):
    """CA settings CA itself would refuse; `field` names the setting."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


class CaSettings(BaseModel):
    """Cluster Autoscaler's settings as a deployment holds them."""

    args: list[str] = Field(default_factory=list)  # the container's command and args
    env: dict[str, str] = Field(default_factory=dict)  # literal values
    env_from_secrets: dict[str, str] = Field(default_factory=dict)  # name -> "secret/key" it comes from
    cluster_config_file: str | None = None  # the text of HCLOUD_CLUSTER_CONFIG_FILE, read by the caller
    priorities: str | None = None  # the expander ConfigMap's `priorities`


class Migration(BaseModel):
    node_groups: list[dict[str, Any]]
    worker_settings: dict[str, Any]
    notes: list[str]  # what did not carry over, or changed meaning


class _CaGroup(BaseModel):
    name: str
    min_size: int
    max_size: int
    server_type: str
    location: str
    priority: int = 0
    labels: dict[str, str] = Field(default_factory=dict)
    taints: list[dict[str, str]] = Field(default_factory=list)
    placement_group: str = ""


def parse_nodes_flag(value: str) -> _CaGroup:
    """`<min>:<max>:<type>:<location>:<name>`, as CA's createNodePoolSpec reads it."""
    tokens = value.split(":", 4)
    if len(tokens) != 5:
        raise MigrationError("--nodes", f"expected <min>:<max>:<type>:<location>:<name>, got {value!r}")
    sizes = []
    for what, token in (("min", tokens[0]), ("max", tokens[1])):
        if not re.fullmatch(r"[+-]?[0-9]+", token):
            raise MigrationError("--nodes", f"{what} size {token!r} of {value!r} is not an integer")
        sizes.append(int(token))
    return _CaGroup(
        name=tokens[4], min_size=sizes[0], max_size=sizes[1], server_type=tokens[2].lower(), location=tokens[3].lower()
    )


def flag_values(args: Sequence[str]) -> dict[str, list[str]]:
    """`--name=value` and `--name value` flags, every value of each (in order)."""
    out: dict[str, list[str]] = {}
    i = 0
    while i < len(args):
        arg = args[i]
        if arg.startswith("-") and arg.lstrip("-"):
            name, eq, value = arg.lstrip("-").partition("=")
            if not eq and i + 1 < len(args) and not args[i + 1].startswith("-"):
                value, i = args[i + 1], i + 1
            elif not eq:
                value = "true"
            out.setdefault(name, []).append(value)
        i += 1
    return out


def _go_bool(value: str, field: str) -> bool:
    if value in _GO_TRUE:
        return True
    if value in _GO_FALSE:
        return False
    raise MigrationError(field, f"not a boolean: {value!r}")


def _ci(d: Mapping[str, Any], key: str) -> Any:
    """Go's encoding/json matches keys case-insensitively."""
    for k, v in d.items():
        if k.lower() == key.lower():
            return v
    return None


def cluster_config(ca: CaSettings) -> dict[str, Any] | None:
    """The decoded new-format config, or None when only the legacy variables are set."""
    b64 = ca.env.get("HCLOUD_CLUSTER_CONFIG", "")
    if b64:
        field = "HCLOUD_CLUSTER_CONFIG"
        try:
            text = base64.b64decode(b64, validate=True).decode()
        except (binascii.Error, UnicodeDecodeError) as e:
            raise MigrationError(field, f"not base64: {e}") from None
    elif ca.cluster_config_file is not None:
        field, text = "HCLOUD_CLUSTER_CONFIG_FILE", ca.cluster_config_file
    elif ca.env.get("HCLOUD_CLUSTER_CONFIG_FILE"):
        raise MigrationError(
            "HCLOUD_CLUSTER_CONFIG_FILE", f"pass the content of {ca.env['HCLOUD_CLUSTER_CONFIG_FILE']} as well"
        )
    elif "HCLOUD_CLUSTER_CONFIG" in ca.env_from_secrets:
        source = ca.env_from_secrets["HCLOUD_CLUSTER_CONFIG"]
        raise MigrationError("HCLOUD_CLUSTER_CONFIG", f"comes from {source}: pass its decoded JSON as the config file")
    else:
        return None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise MigrationError(field, f"not JSON: {e}") from None
    if not isinstance(data, dict):
        raise MigrationError(field, "must be a JSON object")
    return data


def parse_priorities(text: str) -> list[tuple[int, list[re.Pattern[str]]]]:
    """The expander's priorities, highest first; bad YAML, keys or regexes name the field."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise MigrationError("priorities", f"invalid YAML: {e}") from None
    if not isinstance(data, dict) or not data:
        raise MigrationError("priorities", "must map priorities to lists of regexes")
    out = []
    for key, regexes in data.items():
        if isinstance(key, bool) or not isinstance(key, int) or key < 0:
            raise MigrationError(f"priorities[{key!r}]", "a priority must be a non-negative integer")
        if not isinstance(regexes, list):
            raise MigrationError(f"priorities[{key}]", "must be a list of regexes")
        compiled = []
        for i, r in enumerate(regexes):
            try:
                compiled.append(re.compile(str(r)))
            except re.error as e:
                raise MigrationError(f"priorities[{key}][{i}]", f"invalid regex {r!r}: {e}") from None
        out.append((key, compiled))
    return sorted(out, key=lambda kv: -kv[0])


def _arch(server_type: str) -> str:
    t = lookup(catalogue_index(kwok_catalogue(PROVIDER)), PROVIDER, server_type)
    return t.arch if t is not None else ("arm64" if server_type.startswith("cax") else "amd64")


def _ref(env: Mapping[str, str], name: str, config_key: str, notes: list[str]) -> tuple[str, list[int]] | None:
    value = env.get(name, "")
    if not value:
        return None
    if value.isdigit():
        return config_key, [int(value)]
    notes.append(
        f"{name}={value!r} is a name: growth's pools need the numeric id (`hcloud {config_key.rstrip('s').replace('_', '-')} "
        f"describe {value}`), then add `{config_key}: [<id>]` to each pool's config"
    )
    return None


def _group_name(raw: str, taken: set[str], notes: list[str]) -> str:
    name = _DNS.sub("-", raw.lower()).strip("-.") or "ca-nodes"
    base, n = name, 2
    while name in taken:
        name, n = f"{base}-{n}", n + 1
    if name != raw:
        notes.append(f"node group {raw!r} is named {name!r} (NodeGroupWithPriority names are DNS names)")
    taken.add(name)
    return name


def migrate(ca: CaSettings) -> Migration:
    notes: list[str] = []
    flags = flag_values(ca.args)
    provider = (flags.get("cloud-provider") or [PROVIDER])[-1]
    if provider != PROVIDER:
        raise MigrationError("--cloud-provider", f"only the hetzner provider is migrated, got {provider!r}")
    groups = [parse_nodes_flag(v) for v in flags.get("nodes", [])]
    if not groups:
        raise MigrationError("--nodes", "no node groups: CA's Hetzner provider needs at least one --nodes flag")
    names = [g.name for g in groups]
    if len(set(names)) != len(names):
        raise MigrationError("--nodes", f"node group names repeat: {names}")
    for g in groups:
        if g.min_size < 0 or g.max_size < g.min_size:
            raise MigrationError("--nodes", f"{g.name}: need 0 <= min <= max, got {g.min_size}:{g.max_size}")

    # Images, cloud-init, labels, taints: the new format or the legacy variables.
    config = cluster_config(ca)
    images: dict[str, str] = {}
    if config is not None:
        for arch, image in (_ci(config, "imagesForArch") or {}).items():
            if image:
                images[arch.lower()] = str(image)
        if not images:
            notes.append("imagesForArch names no image: the worker's default image applies to every pool")
        node_configs = _ci(config, "nodeConfigs") or {}
        if not isinstance(node_configs, dict) or not node_configs:
            raise MigrationError("nodeConfigs", "the cluster config has no node configs (CA stops without them)")
        for g in groups:
            nc = node_configs.get(g.name)
            if not isinstance(nc, dict):
                raise MigrationError(f"nodeConfigs.{g.name}", "missing: CA needs one per --nodes group")
            g.labels = {str(k): str(v) for k, v in (_ci(nc, "labels") or {}).items()}
            g.taints = [
                {"key": str(_ci(t, "key")), "value": str(_ci(t, "value") or ""), "effect": str(_ci(t, "effect"))}
                for t in _ci(nc, "taints") or []
            ]
            g.placement_group = str(_ci(nc, "placementGroup") or "")
            for key in sorted(k for k in nc if k.lower() not in _NODE_CONFIG_KEYS):
                notes.append(f"nodeConfigs.{g.name}.{key} is not a field CA's Hetzner provider reads; not carried over")
            if _ci(nc, "cloudInit"):
                notes.append(
                    f"nodeConfigs.{g.name}.cloudInit not copied: growth writes its own join user-data "
                    "(kubelet labels and taints included); give the worker the join endpoint and put the join "
                    "token in a file (join_token_file) or GROWTH_JOIN_TOKEN"
                )
        for extra in sorted(set(node_configs) - set(names)):
            notes.append(f"nodeConfigs.{extra} matches no --nodes group (CA ignores it too)")
        for legacy in ("HCLOUD_CLOUD_INIT", "HCLOUD_IMAGE"):
            if ca.env.get(legacy):
                notes.append(f"{legacy} ignored: the cluster config replaces it (as in CA)")
    else:
        images["amd64"] = images["arm64"] = ca.env.get("HCLOUD_IMAGE") or DEFAULT_LEGACY_IMAGE
        if ca.env.get("HCLOUD_CLOUD_INIT") or ca.env_from_secrets.get("HCLOUD_CLOUD_INIT"):
            notes.append(
                "HCLOUD_CLOUD_INIT not copied: growth writes its own join user-data; give the worker the join "
                "endpoint and put the join token in a file (join_token_file) or GROWTH_JOIN_TOKEN"
            )
    for env_name in sorted(ca.env):
        if re.fullmatch(r"HCLOUD_.+_CLOUD_INIT", env_name):
            notes.append(f"{env_name} (a per-pool cloud-init) not copied, as HCLOUD_CLOUD_INIT")

    # Priorities from the expander's ConfigMap.
    expander = (flags.get("expander") or ["random"])[-1]
    if ca.priorities is not None:
        table = parse_priorities(ca.priorities)
        for g in groups:
            g.priority = next((p for p, regexes in table if any(r.search(g.name) for r in regexes)), -1)
            if g.priority < 0:
                g.priority = 0
                notes.append(
                    f"node group {g.name} matches no priority regex (CA never expands it); it is kept at priority 0"
                )
        if "priority" not in expander.split(","):
            notes.append(f"--expander={expander}: the priority ConfigMap was read although CA does not use it")
    else:
        if "priority" in expander.split(","):
            notes.append(
                f"--expander={expander} but no {PRIORITY_CONFIGMAP} ConfigMap given: every pool gets priority 0"
            )
        elif expander != "random":
            notes.append(f"--expander={expander}: growth picks the cheapest pool that fits within a priority tier")

    # Shared pool config: network, firewall, SSH key.
    shared: dict[str, Any] = {}
    for env_name, key in (("HCLOUD_NETWORK", "networks"), ("HCLOUD_FIREWALL", "firewalls")):
        ref = _ref(ca.env, env_name, key, notes)
        if ref is not None:
            shared[ref[0]] = ref[1]
    if ca.env.get("HCLOUD_SSH_KEY"):
        shared["ssh_keys"] = [ca.env["HCLOUD_SSH_KEY"]]  # growth takes ids or names
    for env_name in ("HCLOUD_PUBLIC_IPV4", "HCLOUD_PUBLIC_IPV6"):
        if env_name in ca.env and not _go_bool(ca.env[env_name], env_name):
            notes.append(f"{env_name}=false not carried over: growth's servers get the API's default public IPs")
    if ca.env.get("HCLOUD_SUBNET"):
        notes.append("HCLOUD_SUBNET not carried over: growth attaches the network without a fixed subnet")

    # Scale-down flags become each group's scaleDown; loop flags the worker's autoscaler settings.
    scale_down: dict[str, Any] = {}
    loop: dict[str, Any] = {}
    for flag, values in flags.items():
        value = values[-1]
        if flag in _GROUP_FLAGS:
            key = _GROUP_FLAGS[flag]
            if key == "enabled":
                scale_down[key] = _go_bool(value, f"--{flag}")
            elif key == "utilizationThreshold":
                scale_down[key] = value
            else:
                try:  # refused here, naming the flag, not later on the group
                    _duration_s(value, f"--{flag}")
                except InvalidSpec as e:
                    raise MigrationError(f"--{flag}", e.message) from None
                scale_down[key] = value
        elif flag in _LOOP_FLAGS:
            key = _LOOP_FLAGS[flag]
            try:
                if key.endswith("_s"):
                    loop[key] = _duration_s(value, f"--{flag}")
                elif key == "enforce_min_nodes":
                    loop[key] = _go_bool(value, f"--{flag}")
                else:
                    loop[key] = int(value)
            except InvalidSpec as e:
                raise MigrationError(f"--{flag}", e.message) from None
            except ValueError:
                raise MigrationError(f"--{flag}", f"not an integer: {value!r}") from None
        elif flag not in _SILENT_FLAGS:
            notes.append(f"--{flag}={value} has no growth equivalent and was not carried over")
    if loop.get("max_nodes_total") == 0:
        del loop["max_nodes_total"]  # CA: 0 = no limit
    if "enforce_min_nodes" not in loop:
        loop["enforce_min_nodes"] = False  # CA's default; growth's is true
    timeout = ca.env.get("HCLOUD_SERVER_CREATION_TIMEOUT", "")
    if timeout.isdigit() and int(timeout) > 0 and "readiness_timeout_s" not in loop:
        loop["readiness_timeout_s"] = float(int(timeout) * 60)

    # CA groups with the same labels and taints become one NodeGroupWithPriority.
    by_shape: dict[str, list[_CaGroup]] = {}
    for g in groups:
        by_shape.setdefault(json.dumps([g.labels, g.taints], sort_keys=True), []).append(g)
    out_groups: list[dict[str, Any]] = []
    taken: set[str] = set()
    for members in by_shape.values():
        members.sort(key=lambda g: -g.priority)  # stable: flag order within a priority
        name = _group_name(members[0].name, taken, notes)
        pools: list[dict[str, Any]] = []
        by_type: dict[str, dict[str, Any]] = {}
        for g in members:
            entry = by_type.get(g.server_type)
            if entry is not None:
                entry["config"]["locations"].append(g.location)
                entry["minNodes"] += g.min_size
                entry["maxNodes"] += g.max_size
                notes.append(
                    f"node groups {entry['_from'][0]} and {g.name} ({g.server_type}) became one pool trying "
                    f"{', '.join(entry['config']['locations'])} in that order, with their sizes added"
                )
                entry["_from"].append(g.name)
                continue
            pool_config: dict[str, Any] = {"locations": [g.location], **shared}
            arch = _arch(g.server_type)
            image = images.get(arch)
            if image:
                pool_config["image"] = image
            elif images:
                notes.append(f"node group {g.name}: {g.server_type} is {arch} and imagesForArch has no {arch} image")
            if g.placement_group:
                if g.placement_group.isdigit():
                    pool_config["placement_group"] = int(g.placement_group)
                else:
                    notes.append(
                        f"nodeConfigs.{g.name}.placementGroup {g.placement_group!r} is a name: growth needs its id"
                    )
            entry = {
                "provider": PROVIDER,
                "serverType": [g.server_type],
                "priority": g.priority,
                "minNodes": g.min_size,
                "maxNodes": g.max_size,
                "config": pool_config,
                "_from": [g.name],
            }
            by_type[g.server_type] = entry
            pools.append(entry)
        sources = [n for p in pools for n in p.pop("_from")]
        spec: dict[str, Any] = {"pools": pools}
        if members[0].labels:
            spec["labels"] = members[0].labels
        if members[0].taints:
            spec["taints"] = members[0].taints
        if scale_down:
            spec["scaleDown"] = dict(scale_down)
        obj = {
            "apiVersion": f"{CRD_GROUP}/{CRD_VERSION}",
            "kind": KIND,
            "metadata": {"name": name, "annotations": {MIGRATED_FROM: ", ".join(sources)}},
            "spec": spec,
        }
        try:
            parse_node_group(obj, {PROVIDER})  # what we write must be what growth accepts
        except InvalidSpec as e:
            raise MigrationError(f"node group {name}: {e.field}", e.message) from None
        out_groups.append(obj)

    hetzner: dict[str, Any] = {"token_env": "HCLOUD_TOKEN"}
    source = ca.env_from_secrets.get("HCLOUD_TOKEN")
    if source:
        notes.append(f"HCLOUD_TOKEN: give the worker the same env from {source} (the value is never copied)")
    elif ca.env.get("HCLOUD_TOKEN"):
        notes.append("HCLOUD_TOKEN was set literally: move it into a Secret; it was not copied")
    else:
        notes.append("HCLOUD_TOKEN: set it on the worker from a Secret, or token_file (never in these files)")
    if ca.env.get("HCLOUD_ENDPOINT"):
        hetzner["api_endpoint"] = ca.env["HCLOUD_ENDPOINT"]
    locations = list(dict.fromkeys(g.location for g in groups))
    hetzner["locations"] = locations
    if images.get("amd64"):
        hetzner["image"] = images["amd64"]
    return Migration(
        node_groups=out_groups, worker_settings={"providers": {PROVIDER: hetzner}, "autoscaler": loop}, notes=notes
    )
