"""From Cluster Autoscaler's Hetzner provider to growth: CA's settings as CA users keep them in,
NodeGroupWithPriority objects and worker settings out, with notes on what did not carry over.

What CA reads (cluster-autoscaler/cloudprovider/hetzner, hetzner_manager.go,
hetzner_cloud_provider.go, hetzner_node_group.go, and expander/priority), read as CA reads it
(scaling.nodes.ca_config: Go's JSON, booleans, integers, base64 and RE2):
- `--nodes=<min>:<max>:<type>:<location>:<name>`, split on the first four colons; min and max
  are strconv.Atoi integers; type and location are lower-cased.
- `HCLOUD_CLUSTER_CONFIG` (base64 JSON) wins over `HCLOUD_CLUSTER_CONFIG_FILE` (plain JSON):
  imagesForArch, defaultSubnetIPRange and nodeConfigs {<name>: cloudInit, labels, taints,
  placementGroup, serverLabels, imagesForArch, subnetIPRange, firewalls}. With either, every
  `--nodes` name needs a nodeConfigs entry (CA stops otherwise). Without them, the legacy
  `HCLOUD_CLOUD_INIT` and `HCLOUD_IMAGE` (default `ubuntu-20.04`) apply to every node group.
- `HCLOUD_NETWORK`, `HCLOUD_FIREWALL`, `HCLOUD_SSH_KEY` (id or name), `HCLOUD_PUBLIC_IPV4/IPV6`
  (Go booleans, unset or "" = true), `HCLOUD_ENDPOINT`, `HCLOUD_SERVER_CREATION_TIMEOUT`
  (minutes, bounds the create call; CA waits for the Node separately, `--max-node-provision-time`).
- The priority expander's ConfigMap `cluster-autoscaler-priority-expander`, key `priorities`.
- A placement group whose groups' max sizes add up past 10 stops CA (Hetzner's spread limit).

How growth maps them: CA node groups whose nodes carry the same labels and taints become one
NodeGroupWithPriority; every CA group is its own pool in it (config.name = the CA group's name),
never merged, so each keeps its min/max, location, placement group, images, subnet, server
labels and priority, and growth tries the pools in the priority expander's order (a higher
priority first; equal priorities share a tier, as CA hands ties to its next expander).
`config.ca_node_group` lets growth adopt the servers CA made for the group (scaling.nodes.adoption).
Secrets never reach the output: the token stays where it is (`token_env: HCLOUD_TOKEN`, the
same Secret), and cloud-init is not copied (it usually holds a join token).
"""

from __future__ import annotations

import ipaddress
import json
import re
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, Field

from scaling.nodes.ca_config import (
    CaClusterConfig,
    CaImageList,
    CaSettingError,
    go_atoi,
    go_base64,
    go_env_bool,
    go_parse_bool,
    go_parse_duration,
    parse_cluster_config,
    parse_priorities,
)
from scaling.nodes.catalogue import catalogue_index, lookup
from scaling.nodes.models import CRD_GROUP, CRD_VERSION
from scaling.nodes.nodegroups import KIND, InvalidSpec, _duration_s, parse_node_group
from scaling.nodes.providers.hetzner import PROVIDER, SPREAD_GROUP_MAX
from scaling.nodes.providers.kwok import kwok_catalogue
from scaling.nodes.settings import MAX_BULK_SOFT_TAINT_COUNT

DEFAULT_LEGACY_IMAGE = "ubuntu-20.04"  # what CA uses when HCLOUD_IMAGE is unset
DEFAULT_CREATE_TIMEOUT_S = 300.0  # CA's serverCreateTimeoutDefault (5 minutes)
DEFAULT_PROVISION_TIME_S = 900.0  # CA's --max-node-provision-time default (15 minutes)
PRIORITY_CONFIGMAP = "cluster-autoscaler-priority-expander"
MIGRATED_FROM = f"{CRD_GROUP}/migrated-from"
_DNS = re.compile(r"[^a-z0-9.-]+")
_LABEL = re.compile(r"[^a-z0-9-]+")
# Every variable CA's Hetzner provider reads; another HCLOUD_* is noted as unread.
_CA_ENV = {
    "HCLOUD_TOKEN",
    "HCLOUD_CLOUD_INIT",
    "HCLOUD_IMAGE",
    "HCLOUD_CLUSTER_CONFIG",
    "HCLOUD_CLUSTER_CONFIG_FILE",
    "HCLOUD_NETWORK",
    "HCLOUD_FIREWALL",
    "HCLOUD_SSH_KEY",
    "HCLOUD_PUBLIC_IPV4",
    "HCLOUD_PUBLIC_IPV6",
    "HCLOUD_ENDPOINT",
    "HCLOUD_SERVER_CREATION_TIMEOUT",
}
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
    "max-bulk-soft-taint-count": "max_bulk_soft_taint_count",
    "max-bulk-soft-taint-time": "max_bulk_soft_taint_time_s",
    "node-deletion-candidate-ttl": "node_deletion_candidate_ttl_s",
}
# Flags that only say what CA is (or are growth's behaviour anyway): nothing to carry.
_SILENT_FLAGS = {"cloud-provider", "expander", "nodes", "v", "logtostderr", "stderrthreshold", "alsologtostderr"}
_SILENT_FLAGS |= {"startup-taint", "ignore-taint"}  # carried into startupTaints (_startup_taint_keys)


MigrationError = CaSettingError  # CA settings CA itself would refuse; `field` names the setting


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
    server_labels: dict[str, str] = Field(default_factory=dict)
    images: dict[str, str] = Field(default_factory=dict)  # arch -> image (the pool's, else the global)
    subnet_ip_range: str = ""
    firewalls: list[str] = Field(default_factory=list)


def parse_nodes_flag(value: str) -> _CaGroup:
    """`<min>:<max>:<type>:<location>:<name>`, as CA's createNodePoolSpec reads it."""
    tokens = value.split(":", 4)
    if len(tokens) != 5:
        raise MigrationError("--nodes", f"expected <min>:<max>:<type>:<location>:<name>, got {value!r}")
    sizes = []
    for what, token in (("min", tokens[0]), ("max", tokens[1])):
        size = go_atoi(token)
        if size is None:
            raise MigrationError("--nodes", f"{what} size {token!r} of {value!r} is not an integer CA reads (int64)")
        sizes.append(size)
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


def cluster_config(ca: CaSettings) -> CaClusterConfig | None:
    """The decoded new-format config, or None when only the legacy variables are set."""
    b64 = ca.env.get("HCLOUD_CLUSTER_CONFIG", "")
    if b64:
        field = "HCLOUD_CLUSTER_CONFIG"
        text: str | bytes = go_base64(b64, field)
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
    return parse_cluster_config(text, field)


def _arch(server_type: str) -> str:
    t = lookup(catalogue_index(kwok_catalogue(PROVIDER)), PROVIDER, server_type)
    return t.arch if t is not None else ("arm64" if server_type.startswith("cax") else "amd64")


def _ref(value: str) -> int | str:
    """An id stays a number, a name a string: growth's provider resolves names at create."""
    return int(value) if value.isdigit() else value


def _unique(raw: str, pattern: re.Pattern[str], limit: int, taken: set[str], fallback: str) -> str:
    name = pattern.sub("-", raw.lower()).strip("-.")[:limit].strip("-.") or fallback
    base, n = name, 2
    while name in taken:
        suffix = f"-{n}"
        name, n = f"{base[: limit - len(suffix)]}{suffix}", n + 1
    taken.add(name)
    return name


def _cidr(value: str, field: str) -> str:
    """net.ParseCIDR: host bits may be set; CA keeps the network it names."""
    try:
        return str(ipaddress.ip_network(value, strict=False))
    except ValueError as e:
        raise MigrationError(field, f"not a CIDR range (CA stops): {e}") from None


def _read_node_configs(config: CaClusterConfig, groups: list[_CaGroup], names: list[str], notes: list[str]) -> None:
    """Each group's labels, taints, placement group, server labels, images, subnet and firewalls."""
    if not config.node_configs:
        raise MigrationError("nodeConfigs", "the cluster config has no node configs (CA stops without them)")
    for key in config.unknown():
        notes.append(f"{key} is not a field of CA's cluster config; not carried over")
    default_subnet = (
        _cidr(config.default_subnet_ip_range, "defaultSubnetIPRange") if config.default_subnet_ip_range else ""
    )
    for g in groups:
        nc = config.node_configs.get(g.name)
        if nc is None:
            raise MigrationError(f"nodeConfigs.{g.name}", "missing: CA needs one per --nodes group")
        g.labels = dict(nc.labels)
        for i, t in enumerate(nc.taints):
            if not t.key:
                raise MigrationError(f"nodeConfigs.{g.name}.taints[{i}].key", "is required")
            if not t.effect:
                notes.append(f"nodeConfigs.{g.name}.taints[{i}] has no effect: growth registers it as NoSchedule")
            g.taints.append({"key": t.key, "value": t.value, "effect": t.effect or "NoSchedule"})
        g.placement_group = nc.placement_group
        g.server_labels = dict(nc.server_labels)
        images = nc.images_for_arch if nc.images_for_arch is not None else config.images_for_arch
        g.images = {arch: image for arch, image in (("amd64", images.amd64), ("arm64", images.arm64)) if image}
        if nc.subnet_ip_range:
            g.subnet_ip_range = _cidr(nc.subnet_ip_range, f"nodeConfigs.{g.name}.subnetIPRange")
        else:
            g.subnet_ip_range = default_subnet
        g.firewalls = list(nc.firewalls)
        for key in nc.unknown():
            notes.append(f"nodeConfigs.{g.name}.{key} is not a field CA's Hetzner provider reads; not carried over")
        if nc.cloud_init:
            notes.append(
                f"nodeConfigs.{g.name}.cloudInit not copied: growth writes its own join user-data "
                "(kubelet labels and taints included); give the worker the join endpoint and put the join "
                "token in a file (join_token_file) or GROWTH_JOIN_TOKEN"
            )
    for extra in sorted(set(config.node_configs) - set(names)):
        notes.append(f"nodeConfigs.{extra} matches no --nodes group (CA ignores it too)")


def _check_placement_groups(groups: list[_CaGroup]) -> None:
    """CA stops when a placement group's groups may grow past Hetzner's spread limit together."""
    totals: dict[str, list[_CaGroup]] = {}
    for g in groups:
        if g.placement_group:
            totals.setdefault(g.placement_group, []).append(g)
    for ref, members in totals.items():
        total = sum(g.max_size for g in members)
        if total > SPREAD_GROUP_MAX:
            raise MigrationError(
                f"nodeConfigs.{members[0].name}.placementGroup",
                f"placement group {ref!r} holds at most {SPREAD_GROUP_MAX} servers but its groups "
                f"({', '.join(g.name for g in members)}) may grow to {total}; CA refuses this too",
            )


def _priorities(ca: CaSettings, flags: dict[str, list[str]], groups: list[_CaGroup], notes: list[str]) -> None:
    expander = (flags.get("expander") or ["random"])[-1]
    chain = expander.split(",")
    if ca.priorities is not None and "priority" in chain:
        table = parse_priorities(ca.priorities)
        for g in groups:
            # The highest priority whose regexes match anywhere in the name (FindStringIndex).
            g.priority = next((p for p, regexes in table if any(r.search(g.name) for r in regexes)), -1)
        if all(g.priority < 0 for g in groups):
            notes.append("no node group matches a priority regex: CA filters nothing, every pool gets priority 0")
        for g in groups:
            if g.priority < 0:
                g.priority = 0
                notes.append(
                    f"node group {g.name} matches no priority regex (CA never expands it); it is kept at priority 0"
                )
        tail = [e for e in chain[chain.index("priority") + 1 :] if e]
        if tail and tail[0] != "least-waste":
            notes.append(f"--expander={expander}: within a priority growth picks the cheapest pool that fits")
    elif ca.priorities is not None:
        notes.append(f"--expander={expander}: CA does not use the priority ConfigMap, so neither does growth")
    elif "priority" in chain:
        notes.append(f"--expander={expander} but no {PRIORITY_CONFIGMAP} ConfigMap given: every pool gets priority 0")
    elif expander != "random":
        notes.append(f"--expander={expander}: growth picks the cheapest pool that fits within a priority tier")


def _group_duration(value: str, seconds: float, flag: str, notes: list[str]) -> str | float:
    """A CA duration as the group's scaleDown takes it: as written when it reads the same there
    ("5m", "1h30m"), else in seconds ("0", "1500us"); a negative one, which CA reads as no wait, as 0s."""
    if seconds < 0:
        notes.append(f"--{flag}={value} is negative: carried over as 0s")
        return "0s"
    try:
        if _duration_s(value, flag) == seconds:
            return value
    except InvalidSpec:
        pass
    return f"{int(seconds)}s" if seconds.is_integer() else seconds


def _flags(flags: dict[str, list[str]], notes: list[str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Scale-down flags become each group's scaleDown; loop flags the worker's autoscaler settings."""
    scale_down: dict[str, Any] = {}
    loop: dict[str, Any] = {}
    for flag, values in flags.items():
        value = values[-1]
        if flag in _GROUP_FLAGS:
            key = _GROUP_FLAGS[flag]
            if key == "enabled":
                scale_down[key] = go_parse_bool(value, f"--{flag}")
            elif key == "utilizationThreshold":
                scale_down[key] = value
            else:  # refused here as CA refuses it, naming the flag, not later on the group
                scale_down[key] = _group_duration(value, go_parse_duration(value, f"--{flag}"), flag, notes)
        elif flag in _LOOP_FLAGS:
            key = _LOOP_FLAGS[flag]
            try:
                if key.endswith("_s"):
                    seconds = go_parse_duration(value, f"--{flag}")
                    if seconds < 0:
                        notes.append(f"--{flag}={value} is negative: not carried over (growth's default)")
                        continue
                    loop[key] = seconds
                elif key == "enforce_min_nodes":
                    loop[key] = go_parse_bool(value, f"--{flag}")
                else:
                    n = go_atoi(value)
                    if n is None:
                        raise MigrationError(f"--{flag}", f"not an integer CA reads (int64): {value!r}")
                    if key == "max_bulk_soft_taint_count" and n > MAX_BULK_SOFT_TAINT_COUNT:
                        notes.append(f"--{flag}={value} is above growth's {MAX_BULK_SOFT_TAINT_COUNT}: set to that")
                        n = MAX_BULK_SOFT_TAINT_COUNT
                    loop[key] = n
            except InvalidSpec as e:
                raise MigrationError(f"--{flag}", e.message) from None
        elif flag not in _SILENT_FLAGS:
            notes.append(f"--{flag}={value} has no growth equivalent and was not carried over")
    if loop.get("max_nodes_total") == 0:
        del loop["max_nodes_total"]  # CA: 0 = no limit
    loop.setdefault("enforce_min_nodes", False)  # CA's default; growth's is true
    # CA waits this long for a created server's Node (--max-node-provision-time, 15m by default).
    loop.setdefault("readiness_timeout_s", DEFAULT_PROVISION_TIME_S)
    return scale_down, loop


def _pool(g: _CaGroup, name: str, shared: dict[str, Any], notes: list[str]) -> dict[str, Any]:
    config: dict[str, Any] = {"name": name, "ca_node_group": g.name, "locations": [g.location]}
    arch = _arch(g.server_type)
    if g.images.get(arch):
        config["images_for_arch"] = {arch: g.images[arch]}
    elif g.images:
        notes.append(f"node group {g.name}: {g.server_type} is {arch} and imagesForArch has no {arch} image")
    if g.placement_group:
        config["placement_group"] = _ref(g.placement_group)
        if g.placement_group.lower() == "spread":
            notes.append(
                f"nodeConfigs.{g.name}.placementGroup 'spread' is growth's word for groups it makes itself; "
                "give the group's id instead"
            )
    config.update({k: list(v) if isinstance(v, list) else v for k, v in shared.items()})
    firewalls = list(dict.fromkeys([*map(str, shared.get("firewalls", [])), *g.firewalls]))
    if firewalls:
        config["firewalls"] = [_ref(f) for f in firewalls]
    if g.server_labels:
        config["server_labels"] = dict(g.server_labels)
    if g.subnet_ip_range:
        if shared.get("networks"):
            config["subnet_ip_range"] = g.subnet_ip_range
        else:
            notes.append(f"node group {g.name}: a subnet IP range without HCLOUD_NETWORK is ignored (as by CA)")
    return {
        "provider": PROVIDER,
        "serverType": [g.server_type],
        "priority": g.priority,
        "minNodes": g.min_size,
        "maxNodes": g.max_size,
        "config": config,
    }


def _startup_taint_keys(flags: dict[str, list[str]], groups: list[_CaGroup], notes: list[str]) -> set[str]:
    """CA's --startup-taint (and its older name --ignore-taint) keys: taints CA reads as a node's
    unreadiness and leaves out of its templates. The nodeConfigs taints they name become startupTaints;
    a key no group registers with is noted (an agent of the cluster's own adds it)."""
    named = {k: flag for flag in ("startup-taint", "ignore-taint") for k in flags.get(flag, []) if k}
    registered = {t["key"] for g in groups for t in g.taints}
    for key in sorted(set(named) - registered):
        notes.append(
            f"--{named[key]}={key}: no node group registers with it, so nothing was carried over; a node "
            "carrying it counts as Ready to growth unless its group lists it in startupTaints"
        )
    return set(named)


def _split_startup(taints: list[dict[str, Any]], startup_keys: set[str]) -> tuple[list, list]:
    return [t for t in taints if t["key"] not in startup_keys], [t for t in taints if t["key"] in startup_keys]


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

    # Images, cloud-init, labels, taints and the rest: the new format or the legacy variables.
    config = cluster_config(ca)
    global_images: dict[str, str] = {}
    if config is not None:
        _read_node_configs(config, groups, names, notes)
        gi: CaImageList = config.images_for_arch
        global_images = {arch: image for arch, image in (("amd64", gi.amd64), ("arm64", gi.arm64)) if image}
        if not any(g.images for g in groups):
            notes.append("imagesForArch names no image: the worker's default image applies to every pool")
        for legacy in ("HCLOUD_CLOUD_INIT", "HCLOUD_IMAGE"):
            if ca.env.get(legacy):
                notes.append(f"{legacy} ignored: the cluster config replaces it (as in CA)")
    else:
        image = ca.env.get("HCLOUD_IMAGE") or DEFAULT_LEGACY_IMAGE
        global_images = {"amd64": image, "arm64": image}
        for g in groups:
            g.images = dict(global_images)
        if ca.env.get("HCLOUD_CLOUD_INIT") or ca.env_from_secrets.get("HCLOUD_CLOUD_INIT"):
            notes.append(
                "HCLOUD_CLOUD_INIT not copied: growth writes its own join user-data; give the worker the join "
                "endpoint and put the join token in a file (join_token_file) or GROWTH_JOIN_TOKEN"
            )
    for env_name in sorted({*ca.env, *ca.env_from_secrets}):
        if env_name.startswith("HCLOUD_") and env_name not in _CA_ENV:
            notes.append(f"{env_name} is not read by CA's Hetzner provider; not carried over")
    _check_placement_groups(groups)
    _priorities(ca, flags, groups, notes)

    # Shared pool config: network, firewall, SSH key (ids or names), public addresses.
    shared: dict[str, Any] = {}
    if ca.env.get("HCLOUD_NETWORK"):
        shared["networks"] = [_ref(ca.env["HCLOUD_NETWORK"])]
    if ca.env.get("HCLOUD_FIREWALL"):
        shared["firewalls"] = [_ref(ca.env["HCLOUD_FIREWALL"])]
    if ca.env.get("HCLOUD_SSH_KEY"):
        shared["ssh_keys"] = [ca.env["HCLOUD_SSH_KEY"]]
    for env_name, key in (("HCLOUD_PUBLIC_IPV4", "public_ipv4"), ("HCLOUD_PUBLIC_IPV6", "public_ipv6")):
        if not go_env_bool(ca.env, env_name):
            shared[key] = False

    startup_keys = _startup_taint_keys(flags, groups, notes)
    scale_down, loop = _flags(flags, notes)
    hetzner: dict[str, Any] = {"token_env": "HCLOUD_TOKEN"}
    timeout = ca.env.get("HCLOUD_SERVER_CREATION_TIMEOUT", "")
    minutes = go_atoi(timeout)
    if minutes is not None and minutes != 0:
        hetzner["create_timeout_s"] = float(minutes * 60)
    elif timeout:
        notes.append(f"HCLOUD_SERVER_CREATION_TIMEOUT={timeout!r} is not minutes CA reads: CA's 5 minutes apply")
    if hetzner.get("create_timeout_s", DEFAULT_CREATE_TIMEOUT_S) <= 0:
        raise MigrationError("HCLOUD_SERVER_CREATION_TIMEOUT", f"must be a positive number of minutes, got {timeout!r}")

    # CA groups with the same labels and taints share a NodeGroupWithPriority; each is a pool.
    by_shape: dict[str, list[_CaGroup]] = {}
    for g in groups:
        by_shape.setdefault(json.dumps([g.labels, g.taints], sort_keys=True), []).append(g)
    out_groups: list[dict[str, Any]] = []
    taken: set[str] = set()
    for members in by_shape.values():
        members.sort(key=lambda g: -g.priority)  # stable: flag order within a priority
        name = _unique(members[0].name, _DNS, 253, taken, "ca-nodes")
        if name != members[0].name:
            notes.append(
                f"node group {members[0].name!r} is named {name!r} (NodeGroupWithPriority names are DNS names)"
            )
        pool_names: set[str] = set()
        pools = [_pool(g, _unique(g.name, _LABEL, 63, pool_names, "pool"), shared, notes) for g in members]
        spec: dict[str, Any] = {"pools": pools}
        if members[0].labels:
            spec["labels"] = members[0].labels
        taints, startup = _split_startup(members[0].taints, startup_keys)
        if taints:
            spec["taints"] = taints
        if startup:
            spec["startupTaints"] = startup
        if scale_down:
            spec["scaleDown"] = dict(scale_down)
        obj = {
            "apiVersion": f"{CRD_GROUP}/{CRD_VERSION}",
            "kind": KIND,
            "metadata": {"name": name, "annotations": {MIGRATED_FROM: ", ".join(g.name for g in members)}},
            "spec": spec,
        }
        try:
            parse_node_group(obj, {PROVIDER})  # what we write must be what growth accepts
        except InvalidSpec as e:
            raise MigrationError(f"node group {name}: {e.field}", e.message) from None
        out_groups.append(obj)

    source = ca.env_from_secrets.get("HCLOUD_TOKEN")
    if source:
        notes.append(f"HCLOUD_TOKEN: give the worker the same env from {source} (the value is never copied)")
    elif ca.env.get("HCLOUD_TOKEN"):
        notes.append("HCLOUD_TOKEN was set literally: move it into a Secret; it was not copied")
    else:
        notes.append("HCLOUD_TOKEN: set it on the worker from a Secret, or token_file (never in these files)")
    if ca.env.get("HCLOUD_ENDPOINT"):
        hetzner["api_endpoint"] = ca.env["HCLOUD_ENDPOINT"]
    hetzner["locations"] = list(dict.fromkeys(g.location for g in groups))
    if global_images.get("amd64"):
        hetzner["image"] = global_images["amd64"]
    return Migration(
        node_groups=out_groups, worker_settings={"providers": {PROVIDER: hetzner}, "autoscaler": loop}, notes=notes
    )
