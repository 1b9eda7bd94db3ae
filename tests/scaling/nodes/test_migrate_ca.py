"""Migration from Cluster Autoscaler's Hetzner provider, fed with CA's own documentation."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from activities.nodes.providers.hetzner import HetznerSettings
from scaling.nodes.ca_config import go_parse_duration
from scaling.nodes.migrate_ca import CaSettings, MigrationError, flag_values, migrate
from scaling.nodes.nodegroups import flatten_pools, load_node_groups, priority_tiers
from scaling.nodes.settings import AutoscalerSettings
from starters.migrate_ca import main

# kubernetes/autoscaler cluster-autoscaler/cloudprovider/hetzner/README.md: the HCLOUD_CLUSTER_CONFIG
# example, without its `//` comments (they are annotations: CA's encoding/json would refuse them).
README_CLUSTER_CONFIG = """
{
    "imagesForArch": {
        "arm64": "",
        "amd64": ""
    },
    "nodeConfigs": {
        "pool1": {
            "cloudInit": "",
            "labels": {
                "node.kubernetes.io/role": "autoscaler-node"
            },
            "taints":
            [
                {
                    "key": "node.kubernetes.io/role",
                    "value": "autoscaler-node",
                    "effect": "NoExecute"
                }
            ]
        }
    }
}
"""
# The same README: "Multiple flags will create multiple node pools".
README_NODES = ["--nodes=1:10:CPX51:FSN1:pool1", "--nodes=1:10:CPX51:NBG1:pool2", "--nodes=1:10:CX41:NBG1:pool3"]

# kubernetes/autoscaler cluster-autoscaler/cloudprovider/hetzner/examples/cluster-autoscaler-run-on-master.yaml
# (the Deployment document, as published; the RBAC documents before it are left out).
EXAMPLE_DEPLOYMENT = """
apiVersion: apps/v1
kind: Deployment
metadata:
  name: cluster-autoscaler
  namespace: kube-system
  labels:
    app: cluster-autoscaler
spec:
  replicas: 1
  selector:
    matchLabels:
      app: cluster-autoscaler
  template:
    metadata:
      labels:
        app: cluster-autoscaler
    spec:
      serviceAccountName: cluster-autoscaler
      containers:
        - image: registry.k8s.io/autoscaling/cluster-autoscaler:latest  # or your custom image
          name: cluster-autoscaler
          command:
            - ./cluster-autoscaler
            - --cloud-provider=hetzner
            - --stderrthreshold=info
            - --nodes=1:10:CPX11:FSN1:pool1
          env:
          - name: HCLOUD_TOKEN
            valueFrom:
                secretKeyRef:
                  name: hcloud
                  key: token
          - name: HCLOUD_CLOUD_INIT
            value: <your-cloud-init-data-base64-encoded>
"""

# kubernetes/autoscaler cluster-autoscaler/expander/priority/priority-expander-configmap.yaml
PRIORITY_CONFIGMAP = """
apiVersion: v1
kind: ConfigMap
metadata:
  name: cluster-autoscaler-priority-expander
data:
  priorities: |-
    10:
      - .*t2\\.large.*
      - .*t3\\.large.*
    50:
      - .*m4\\.4xlarge.*
"""
PRIORITIES = yaml.safe_load(PRIORITY_CONFIGMAP)["data"]["priorities"]


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def valid(result: Any) -> None:
    """What the migration writes is what growth accepts: groups and worker settings."""
    groups, problems = load_node_groups(result.node_groups, {"hetzner"})
    assert problems == [] and len(groups) == len(result.node_groups)
    HetznerSettings(**result.worker_settings["providers"]["hetzner"])
    AutoscalerSettings(cluster="c", **result.worker_settings["autoscaler"])


def test_readme_cluster_config_needs_a_node_config_per_group_as_ca_does() -> None:
    ca = CaSettings(args=README_NODES, env={"HCLOUD_CLUSTER_CONFIG": b64(README_CLUSTER_CONFIG)})
    with pytest.raises(MigrationError) as e:
        migrate(ca)
    assert e.value.field == "nodeConfigs.pool2"


def test_readme_cluster_config_carries_labels_and_taints() -> None:
    ca = CaSettings(args=README_NODES[:1], env={"HCLOUD_CLUSTER_CONFIG": b64(README_CLUSTER_CONFIG)})
    result = migrate(ca)
    valid(result)
    [group] = result.node_groups
    assert group["metadata"]["name"] == "pool1"
    assert group["spec"]["labels"] == {"node.kubernetes.io/role": "autoscaler-node"}
    assert group["spec"]["taints"] == [
        {"key": "node.kubernetes.io/role", "value": "autoscaler-node", "effect": "NoExecute"}
    ]
    [pool] = group["spec"]["pools"]
    assert pool == {
        "provider": "hetzner",
        "serverType": ["cpx51"],
        "priority": 0,
        "minNodes": 1,
        "maxNodes": 10,
        "config": {"name": "pool1", "ca_node_group": "pool1", "locations": ["fsn1"]},
    }
    assert any("imagesForArch names no image" in n for n in result.notes)
    # The file form holds the same JSON, not base64.
    from_file = migrate(CaSettings(args=README_NODES[:1], cluster_config_file=README_CLUSTER_CONFIG))
    assert from_file.node_groups == result.node_groups


def test_startup_taint_flags_move_the_taints_they_name_into_startup_taints() -> None:
    """CA's --startup-taint (and its older name --ignore-taint): a node carrying that taint is not ready
    yet, and CA's templates leave it out. The nodeConfigs taint it names becomes the group's
    startupTaints (registered as before, never read on a planned node); a key no group registers with
    is noted, not carried over."""
    config = json.loads(README_CLUSTER_CONFIG)
    cilium = {"key": "node.cilium.io/agent-not-ready", "value": "true", "effect": "NoExecute"}
    config["nodeConfigs"]["pool1"]["taints"].append(cilium)
    args = [*README_NODES[:1], "--startup-taint=node.cilium.io/agent-not-ready", "--ignore-taint=example.com/gone"]
    result = migrate(CaSettings(args=args, env={"HCLOUD_CLUSTER_CONFIG": b64(json.dumps(config))}))
    valid(result)
    [group] = result.node_groups
    assert group["spec"]["taints"] == [
        {"key": "node.kubernetes.io/role", "value": "autoscaler-node", "effect": "NoExecute"}
    ]
    assert group["spec"]["startupTaints"] == [cilium]
    assert any("--ignore-taint=example.com/gone" in n for n in result.notes)
    assert not any("has no growth equivalent" in n and "startup-taint" in n for n in result.notes)


def test_readme_flags_in_legacy_mode_keep_every_ca_group_apart() -> None:
    result = migrate(
        CaSettings(args=README_NODES, env={"HCLOUD_CLOUD_INIT": b64("#cloud-config"), "HCLOUD_IMAGE": "debian-12"})
    )
    valid(result)
    [group] = result.node_groups  # no labels or taints tell them apart: one group, a pool each
    assert group["metadata"]["annotations"]["growth.autoscaling.dev/migrated-from"] == "pool1, pool2, pool3"
    pools = group["spec"]["pools"]
    assert [(p["config"]["name"], p["serverType"], p["config"]["locations"]) for p in pools] == [
        ("pool1", ["cpx51"], ["fsn1"]),
        ("pool2", ["cpx51"], ["nbg1"]),
        ("pool3", ["cx41"], ["nbg1"]),
    ]
    # CA keeps min/max per group: so does each pool (1:10 in each location, not 2:20 merged).
    assert [(p["minNodes"], p["maxNodes"]) for p in pools] == [(1, 10)] * 3
    assert pools[2]["config"]["images_for_arch"] == {"amd64": "debian-12"}
    assert result.worker_settings["providers"]["hetzner"]["locations"] == ["fsn1", "nbg1"]
    assert any("HCLOUD_CLOUD_INIT not copied" in n for n in result.notes)
    [parsed], _ = load_node_groups(result.node_groups, {"hetzner"})
    assert [p.name for p in flatten_pools(parsed)] == ["pool1", "pool2", "pool3"]


def test_example_deployment_through_the_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    deployment = tmp_path / "ca.yaml"
    deployment.write_text(EXAMPLE_DEPLOYMENT)
    assert main(["--deployment", str(deployment), "--out", str(tmp_path / "out")]) == 0
    groups = list(yaml.safe_load_all((tmp_path / "out" / "node-groups.yaml").read_text()))
    settings = yaml.safe_load((tmp_path / "out" / "worker-settings.yaml").read_text())
    assert [g["spec"]["pools"][0]["serverType"] for g in groups] == [["cpx11"]]
    assert groups[0]["spec"]["pools"][0]["config"]["images_for_arch"] == {"amd64": "ubuntu-20.04"}  # CA's default
    assert settings["providers"]["hetzner"]["token_env"] == "HCLOUD_TOKEN"
    # CA's defaults, not growth's: min sizes not enforced, 15 minutes for a Node to register.
    assert settings["autoscaler"] == {"enforce_min_nodes": False, "readiness_timeout_s": 900.0}
    err = capsys.readouterr().err
    assert "from secret hcloud, key token (the value is never copied)" in err


def test_priority_expander_configmap_sets_pool_priorities() -> None:
    args = [
        "--expander=priority",
        "--nodes=0:5:cpx31:fsn1:workers-m4.4xlarge",
        "--nodes=0:5:cx32:fsn1:workers-t3.large",
        "--nodes=0:5:cax21:fsn1:workers-other",
    ]
    result = migrate(CaSettings(args=args, priorities=PRIORITIES))
    valid(result)
    [group] = result.node_groups
    assert [(p["serverType"], p["priority"]) for p in group["spec"]["pools"]] == [
        (["cpx31"], 50),
        (["cx32"], 10),
        (["cax21"], 0),
    ]
    assert any("workers-other matches no priority regex" in n for n in result.notes)


def test_images_per_arch_and_references_go_to_each_pool() -> None:
    config = {
        "imagesForArch": {"arm64": "ubuntu-24.04-arm", "amd64": "ubuntu-24.04"},
        # Go's encoding/json matches keys case-insensitively, so CA reads these too.
        "NodeConfigs": {
            "arm": {"PlacementGroup": "42"},
            "x86": {"labels": {"a": "b"}, "subnetIPRange": "10.0.1.0/24", "placementGroup": "pg-x86"},
        },
    }
    env = {
        "HCLOUD_CLUSTER_CONFIG": b64(json.dumps(config)),
        "HCLOUD_NETWORK": "1234",
        "HCLOUD_FIREWALL": "k8s-nodes",
        "HCLOUD_SSH_KEY": "ops",
        "HCLOUD_PUBLIC_IPV4": "false",
        "HCLOUD_PUBLIC_IPV6": "",  # Go: "" is unset, the default (true)
    }
    result = migrate(CaSettings(args=["--nodes=0:3:cax11:hel1:arm", "--nodes=0:3:cx22:hel1:x86"], env=env))
    valid(result)
    pools = {p["serverType"][0]: p["config"] for g in result.node_groups for p in g["spec"]["pools"]}
    assert pools["cax11"]["images_for_arch"] == {"arm64": "ubuntu-24.04-arm"}
    assert pools["cx22"]["images_for_arch"] == {"amd64": "ubuntu-24.04"}
    # Names are kept as names: growth's provider looks them up (and caches them) at create, as CA does.
    assert pools["cax11"]["placement_group"] == 42 and pools["cx22"]["placement_group"] == "pg-x86"
    assert pools["cx22"]["networks"] == [1234] and pools["cx22"]["ssh_keys"] == ["ops"]
    assert pools["cx22"]["firewalls"] == ["k8s-nodes"]
    assert pools["cx22"]["public_ipv4"] is False and "public_ipv6" not in pools["cx22"]
    assert pools["cx22"]["subnet_ip_range"] == "10.0.1.0/24" and "subnet_ip_range" not in pools["cax11"]
    assert [g["spec"].get("labels") for g in result.node_groups] == [None, {"a": "b"}]  # two label sets, two groups


# The README's HCLOUD_CLUSTER_CONFIG as it reads at CA 1.36 (cluster-autoscaler/cloudprovider/hetzner/README.md
# at cluster-autoscaler-1.36.0, `//` comments removed) plus the per-pool imagesForArch of 1.34's README
# section "The global imagesForArch configuration can be overridden on a per-nodepool basis".
README_136_CLUSTER_CONFIG = {
    "imagesForArch": {"arm64": "", "amd64": ""},
    "defaultSubnetIPRange": "10.0.0.0/16",
    "nodeConfigs": {
        "pool1": {
            "cloudInit": "",
            "labels": {"node.kubernetes.io/role": "autoscaler-node"},
            "serverLabels": {"my-label": "my-value"},
            "taints": [{"key": "node.kubernetes.io/role", "value": "autoscaler-node", "effect": "NoExecute"}],
            "subnetIPRange": "10.0.0.0/24",
            "imagesForArch": {"amd64": "pool1-image", "arm64": ""},
        },
        "pool2": {"labels": {"node.kubernetes.io/role": "autoscaler-node"}},
    },
}


def test_readme_136_config_keeps_per_pool_images_subnets_and_server_labels() -> None:
    env = {"HCLOUD_CLUSTER_CONFIG": b64(json.dumps(README_136_CLUSTER_CONFIG)), "HCLOUD_NETWORK": "my-network"}
    result = migrate(CaSettings(args=["--nodes=1:10:CPX51:FSN1:pool1", "--nodes=0:5:CPX51:NBG1:pool2"], env=env))
    valid(result)
    [pool1], [pool2] = [g["spec"]["pools"] for g in result.node_groups]  # pool1's taints set it apart
    assert pool1["config"]["images_for_arch"] == {"amd64": "pool1-image"}  # the pool's own, not the global
    assert pool1["config"]["server_labels"] == {"my-label": "my-value"}
    assert pool1["config"]["subnet_ip_range"] == "10.0.0.0/24"
    assert pool2["config"]["subnet_ip_range"] == "10.0.0.0/16"  # defaultSubnetIPRange
    assert pool1["config"]["networks"] == ["my-network"]
    assert "server_labels" not in pool2["config"] and "images_for_arch" not in pool2["config"]


def test_groups_ca_kept_apart_stay_apart_with_their_placement_groups_sizes_and_priorities() -> None:
    # The usual way past a spread group's 10 servers: two CA groups of one type and location,
    # each with its own placement group; a third in another location with its own sizes.
    config = {
        "imagesForArch": {"amd64": "ubuntu-24.04"},
        "nodeConfigs": {
            "workers-a": {"placementGroup": "spread-a"},
            "workers-b": {"placementGroup": "spread-b"},
            "workers-nbg": {},
        },
    }
    priorities = "10:\n  - workers-a\n20:\n  - workers-b\n5:\n  - nbg\n"
    args = [
        "--expander=priority",
        "--nodes=0:10:cpx31:fsn1:workers-a",
        "--nodes=0:10:cpx31:fsn1:workers-b",
        "--nodes=2:4:cpx31:nbg1:workers-nbg",
    ]
    result = migrate(
        CaSettings(args=args, env={"HCLOUD_CLUSTER_CONFIG": b64(json.dumps(config))}, priorities=priorities)
    )
    valid(result)
    [group] = result.node_groups
    pools = group["spec"]["pools"]
    # The priority expander's order: 20 before 10 before 5.
    assert [(p["config"]["name"], p["priority"]) for p in pools] == [
        ("workers-b", 20),
        ("workers-a", 10),
        ("workers-nbg", 5),
    ]
    assert [p["config"].get("placement_group") for p in pools] == ["spread-b", "spread-a", None]
    assert [(p["minNodes"], p["maxNodes"]) for p in pools] == [(0, 10), (0, 10), (2, 4)]
    [parsed], _ = load_node_groups(result.node_groups, {"hetzner"})
    tiers = priority_tiers(flatten_pools(parsed))
    assert [[p.name for p in tier] for tier in tiers] == [["workers-b"], ["workers-a"], ["workers-nbg"]]


def test_a_placement_group_past_ten_servers_is_refused_as_ca_does() -> None:
    # hetzner_cloud_provider.go BuildHetzner: placementGroupTotals[name] += maxSize, > 10 is fatal.
    config = {"nodeConfigs": {"a": {"placementGroup": "pg"}, "b": {"placementGroup": "pg"}}}
    env = {"HCLOUD_CLUSTER_CONFIG": b64(json.dumps(config))}
    ok = migrate(CaSettings(args=["--nodes=0:6:cx22:fsn1:a", "--nodes=0:4:cx22:fsn1:b"], env=env))
    valid(ok)
    with pytest.raises(MigrationError) as e:
        migrate(CaSettings(args=["--nodes=0:6:cx22:fsn1:a", "--nodes=0:5:cx22:fsn1:b"], env=env))
    assert e.value.field == "nodeConfigs.a.placementGroup" and "may grow to 11" in str(e.value)


def test_base64_wrapped_at_76_columns_decodes_as_go_does() -> None:
    # `base64 config.json` (GNU coreutils) wraps at 76 columns; Go's StdEncoding skips \r and \n.
    text = json.dumps(README_136_CLUSTER_CONFIG)
    flat = b64(text)
    wrapped = "\n".join(flat[i : i + 76] for i in range(0, len(flat), 76)) + "\n"
    assert len(wrapped.splitlines()) > 1
    args = ["--nodes=1:10:CPX51:FSN1:pool1", "--nodes=0:5:CPX51:NBG1:pool2"]
    from_flat = migrate(CaSettings(args=args, env={"HCLOUD_CLUSTER_CONFIG": flat}))
    from_wrapped = migrate(CaSettings(args=args, env={"HCLOUD_CLUSTER_CONFIG": wrapped.replace("\n", "\r\n")}))
    assert from_wrapped.node_groups == from_flat.node_groups
    with pytest.raises(MigrationError) as e:  # a space is not skipped by Go
        migrate(CaSettings(args=args, env={"HCLOUD_CLUSTER_CONFIG": flat[:8] + " " + flat[8:]}))
    assert e.value.field == "HCLOUD_CLUSTER_CONFIG"


@pytest.mark.parametrize(
    ("value", "default_kept"),
    [
        ("", True),
        ("1", True),
        ("t", True),
        ("TRUE", True),
        ("True", True),
        ("0", False),
        ("F", False),
        ("false", False),
    ],
)
def test_public_ip_switches_read_as_go_parse_bool(value: str, default_kept: bool) -> None:
    result = migrate(CaSettings(args=["--nodes=0:2:cx22:fsn1:p"], env={"HCLOUD_PUBLIC_IPV4": value}))
    config = result.node_groups[0]["spec"]["pools"][0]["config"]
    assert ("public_ipv4" not in config) is default_kept
    if not default_kept:
        assert config["public_ipv4"] is False


@pytest.mark.parametrize(
    ("config", "field"),
    [
        ({"nodeConfigs": {"p": {"labels": ["a=b"]}}}, "nodeConfigs.p.labels"),
        ({"nodeConfigs": {"p": {"labels": {"a": 1}}}}, "nodeConfigs.p.labels.a"),
        ({"nodeConfigs": {"p": {"taints": {"key": "a"}}}}, "nodeConfigs.p.taints"),
        ({"nodeConfigs": {"p": {"taints": [{"key": 5}]}}}, "nodeConfigs.p.taints[0].key"),
        ({"nodeConfigs": {"p": {"taints": ["a"]}}}, "nodeConfigs.p.taints[0]"),
        ({"imagesForArch": "ubuntu-24.04", "nodeConfigs": {"p": {}}}, "imagesForArch"),
        ({"imagesForArch": {"amd64": 7}, "nodeConfigs": {"p": {}}}, "imagesForArch.amd64"),
        ({"nodeConfigs": {"p": {"imagesForArch": "x"}}}, "nodeConfigs.p.imagesForArch"),
        ({"nodeConfigs": {"p": {"placementGroup": 42}}}, "nodeConfigs.p.placementGroup"),
        ({"nodeConfigs": {"p": {"serverLabels": []}}}, "nodeConfigs.p.serverLabels"),
        ({"nodeConfigs": {"p": {"cloudInit": True}}}, "nodeConfigs.p.cloudInit"),
        ({"nodeConfigs": {"p": {"subnetIPRange": "10.0.0.0/33"}}}, "nodeConfigs.p.subnetIPRange"),
        ({"nodeConfigs": {"p": {"firewalls": "fw"}}}, "nodeConfigs.p.firewalls"),
        ({"nodeConfigs": {"p": "x"}}, "nodeConfigs.p"),
        ({"nodeConfigs": ["p"]}, "nodeConfigs"),
        ({"defaultSubnetIPRange": 10, "nodeConfigs": {"p": {}}}, "defaultSubnetIPRange"),
    ],
)
def test_every_json_type_error_is_refused_naming_the_setting(
    config: dict[str, Any], field: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(MigrationError) as e:
        migrate(CaSettings(args=["--nodes=0:2:cx22:fsn1:p"], cluster_config_file=json.dumps(config)))
    assert e.value.field == field
    # Through the command: exit 2, the setting named, no traceback.
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    assert main(["--arg=--nodes=0:2:cx22:fsn1:p", "--cluster-config-file", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"refused: {field}:" in err and "Traceback" not in err


def test_null_and_unknown_keys_are_read_as_go_reads_them() -> None:
    config = {"imagesForArch": None, "nodeConfigs": {"p": {"labels": None, "taints": None, "Extra": 1}}, "x": 2}
    result = migrate(CaSettings(args=["--nodes=0:2:cx22:fsn1:p"], cluster_config_file=json.dumps(config)))
    valid(result)
    assert "labels" not in result.node_groups[0]["spec"]
    assert any("nodeConfigs.p.Extra is not a field" in n for n in result.notes)
    assert any(n.startswith("x is not a field") for n in result.notes)


def test_ca_flags_become_scale_down_and_loop_settings() -> None:
    args = [
        "--nodes=0:5:cx22:fsn1:p",
        "--scale-down-unneeded-time=5m",
        "--scale-down-delay-after-add",
        "2m0s",
        "--scale-down-utilization-threshold=0.6",
        "--max-nodes-total=30",
        "--scan-interval=20s",
        "--balance-similar-node-groups",
        "--max-bulk-soft-taint-count=0",
        "--max-bulk-soft-taint-time=1s500ms",
        "--node-deletion-candidate-ttl=1h",
    ]
    assert flag_values(args)["scale-down-delay-after-add"] == ["2m0s"]
    result = migrate(CaSettings(args=args))
    valid(result)
    assert result.node_groups[0]["spec"]["scaleDown"] == {
        "unneededTime": "5m",
        "delayAfterAdd": "2m0s",
        "utilizationThreshold": "0.6",
    }
    assert result.worker_settings["autoscaler"] == {
        "max_nodes_total": 30,
        "scan_interval_s": 20.0,
        "enforce_min_nodes": False,
        "readiness_timeout_s": 900.0,
        "max_bulk_soft_taint_count": 0,  # CA: 0 turns its soft taints off; growth reads it so too
        "max_bulk_soft_taint_time_s": 1.5,
        "node_deletion_candidate_ttl_s": 3600.0,
    }
    assert any("--balance-similar-node-groups=true has no growth equivalent" in n for n in result.notes)


# go/src/time/time_test.go parseDurationTests and parseDurationErrorTests (those a Python str can hold)
GO_DURATIONS = [
    ("0", 0.0),
    ("5s", 5.0),
    ("1478s", 1478.0),
    ("-5s", -5.0),
    ("+5s", 5.0),
    ("-0", 0.0),
    ("+0", 0.0),
    ("5.0s", 5.0),
    ("5.6s", 5.6),
    ("5.s", 5.0),
    (".5s", 0.5),
    ("1.004s", 1.004),
    ("100.00100s", 100.001),
    ("10ns", 1e-8),
    ("11us", 11e-6),
    ("12\u00b5s", 12e-6),
    ("12\u03bcs", 12e-6),
    ("13ms", 0.013),
    ("15m", 900.0),
    ("16h", 57600.0),
    ("3h30m", 12600.0),
    ("10.5s4m", 250.5),
    ("-2m3.4s", -123.4),
    ("1h2m3s4ms5us6ns", 3723.004005006),
    ("39h9m14.425s", 140954.425),
    ("52763797000ns", 52.763797),
    ("0.3333333333333333333h", 1200.0),
    ("9007199254740993ns", 9007199.254740993),
    ("9223372036854775807ns", 9223372036.854775807),
    ("-9223372036854775808ns", -9223372036.854775808),
    ("-2562047h47m16.854775808s", -9223372036.854775808),
    ("0.100000000000000000000h", 360.0),
    ("0.830103483285477580700h", 2988.372539827),
]
GO_DURATION_ERRORS = [
    "",
    "3",
    "-",
    "s",
    ".",
    "-.",
    ".s",
    "+.s",
    "1d",
    "\ufffd",
    "\ufffd hello \ufffd world",
    "9223372036854775810ns",
    "9223372036854775808ns",
    "-9223372036854775809ns",
    "9223372036854776us",
    "3000000h",
    "9223372036854775.808us",
    "9223372036854ms775us808ns",
]


@pytest.mark.parametrize(("value", "seconds"), GO_DURATIONS)
def test_ca_durations_read_as_go_parse_duration(value: str, seconds: float) -> None:
    assert go_parse_duration(value, "--f") == pytest.approx(seconds, abs=1e-9)


@pytest.mark.parametrize("value", GO_DURATION_ERRORS)
def test_ca_durations_go_refuses_are_refused_naming_the_flag(value: str) -> None:
    with pytest.raises(MigrationError) as e:
        migrate(CaSettings(args=["--nodes=0:5:cx22:fsn1:p", f"--scale-down-unneeded-time={value}"]))
    assert e.value.field == "--scale-down-unneeded-time"


def test_a_duration_ca_takes_and_the_group_spells_otherwise_carries_in_seconds() -> None:
    """A bare 0 (--scale-down-delay-after-add=0, common) and microseconds are Go durations the
    group's field does not spell; a negative one CA reads as no wait. Each carries, and the groups
    and settings written are valid."""
    args = [
        "--nodes=0:5:cx22:fsn1:p",
        "--scale-down-delay-after-add=0",
        "--scale-down-unneeded-time=1500us",
        "--scale-down-unready-time=-1m",
        "--node-deletion-candidate-ttl=-1h",
    ]
    result = migrate(CaSettings(args=args))
    valid(result)
    assert result.node_groups[0]["spec"]["scaleDown"] == {"delayAfterAdd": "0s", "unneededTime": 0.0015}
    loop = result.worker_settings["autoscaler"]
    assert "scale_down_unready_time_s" not in loop and "node_deletion_candidate_ttl_s" not in loop
    assert any("--scale-down-unready-time=-1m is negative" in n for n in result.notes)
    negative = migrate(CaSettings(args=["--nodes=0:5:cx22:fsn1:p", "--scale-down-unneeded-time=-5m"]))
    valid(negative)
    assert negative.node_groups[0]["spec"]["scaleDown"] == {"unneededTime": "0s"}
    assert any("--scale-down-unneeded-time=-5m is negative: carried over as 0s" in n for n in negative.notes)


def test_a_soft_taint_count_above_growths_bound_is_carried_at_the_bound() -> None:
    """CA takes any int; growth's evaluation names each change in the loop's history, so at most 100."""
    result = migrate(CaSettings(args=["--nodes=0:5:cx22:fsn1:p", "--max-bulk-soft-taint-count=5000"]))
    valid(result)
    assert result.worker_settings["autoscaler"]["max_bulk_soft_taint_count"] == 100
    assert any("--max-bulk-soft-taint-count=5000 is above growth's 100" in n for n in result.notes)
    AutoscalerSettings(cluster="c", **result.worker_settings["autoscaler"])  # the worker takes it


def test_secrets_never_reach_the_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    token = "hcloud-token-d41d8cd98f00b204e9800998ecf8427e"
    join = "abcdef.0123456789abcdef"
    cloud_init = f"#cloud-config\nruncmd:\n  - kubeadm join 10.0.0.2:6443 --token {join}\n"
    config = {"imagesForArch": {"amd64": "ubuntu-24.04"}, "nodeConfigs": {"p": {"cloudInit": cloud_init}}}
    env_file = tmp_path / "ca.env"
    env_file.write_text(f"HCLOUD_TOKEN={token}\nHCLOUD_CLUSTER_CONFIG={b64(json.dumps(config))}\n")
    out = tmp_path / "out"
    assert main(["--env-file", str(env_file), "--arg=--nodes=0:2:cx22:fsn1:p", "--out", str(out)]) == 0
    written = (out / "node-groups.yaml").read_text() + (out / "worker-settings.yaml").read_text()
    printed = capsys.readouterr()
    for secret in (token, join):
        assert secret not in written and secret not in printed.out and secret not in printed.err
    assert "HCLOUD_TOKEN was set literally: move it into a Secret" in printed.err


@pytest.mark.parametrize(
    ("ca", "field"),
    [
        (CaSettings(args=["--nodes=1:x:cx22:fsn1:p"]), "--nodes"),
        (CaSettings(args=["--nodes=1:10:cx22:fsn1"]), "--nodes"),
        (CaSettings(args=["--nodes=3:2:cx22:fsn1:p"]), "--nodes"),
        (CaSettings(args=["--cloud-provider=aws", "--nodes=1:2:m5.large:eu:p"]), "--cloud-provider"),
        (
            CaSettings(args=["--nodes=1:2:cx22:fsn1:p"], env={"HCLOUD_CLUSTER_CONFIG": "not base64!"}),
            "HCLOUD_CLUSTER_CONFIG",
        ),
        (CaSettings(args=["--nodes=1:2:cx22:fsn1:p"], cluster_config_file="{nope"), "HCLOUD_CLUSTER_CONFIG_FILE"),
        (CaSettings(args=["--nodes=1:2:cx22:fsn1:p"], env={"HCLOUD_PUBLIC_IPV6": "maybe"}), "HCLOUD_PUBLIC_IPV6"),
        (
            CaSettings(args=["--expander=priority", "--nodes=1:2:cx22:fsn1:p"], priorities="10:\n  - 'pool[' \n"),
            "priorities[10][0]",
        ),
        # RE2 (Go's regexp) refuses lookahead and backreferences: CA ignores the whole ConfigMap.
        (
            CaSettings(args=["--expander=priority", "--nodes=1:2:cx22:fsn1:p"], priorities="10:\n  - 'p(?=1)'\n"),
            "priorities[10][0]",
        ),
        (
            CaSettings(args=["--expander=priority", "--nodes=1:2:cx22:fsn1:p"], priorities="10:\n  - '(p)\\1'\n"),
            "priorities[10][0]",
        ),
        (
            CaSettings(args=["--expander=priority", "--nodes=1:2:cx22:fsn1:p"], priorities="10:\n  - 7\n"),
            "priorities[10][0]",
        ),
        # strconv.Atoi on CA's 64-bit builds.
        (CaSettings(args=["--nodes=0:9223372036854775808:cx22:fsn1:p"]), "--nodes"),
        (CaSettings(args=["--nodes=0:1_0:cx22:fsn1:p"]), "--nodes"),
        (CaSettings(args=["--nodes=0: 10:cx22:fsn1:p"]), "--nodes"),
        (CaSettings(args=["--nodes=1:2:cx22:fsn1:p", "--scale-down-unneeded-time=soon"]), "--scale-down-unneeded-time"),
        (
            CaSettings(
                args=["--nodes=1:2:cx22:fsn1:p"], env_from_secrets={"HCLOUD_CLUSTER_CONFIG": "secret ca, key c"}
            ),
            "HCLOUD_CLUSTER_CONFIG",
        ),
    ],
)
def test_settings_ca_would_refuse_are_refused_naming_the_setting(ca: CaSettings, field: str) -> None:
    with pytest.raises(MigrationError) as e:
        migrate(ca)
    assert e.value.field == field


def test_the_command_exits_2_naming_the_setting(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--arg=--nodes=1:x:cx22:fsn1:p"]) == 2
    assert "refused: --nodes: max size 'x'" in capsys.readouterr().err


def test_growth_nodes_migrate_from_ca_is_the_same_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from starters.cli import run_cli

    out = tmp_path / "out"
    assert run_cli(["nodes", "migrate-from-ca", "--arg=--nodes=0:2:cx22:fsn1:p", "--out", str(out)]) == 0
    assert "kind: NodeGroupWithPriority" in (out / "node-groups.yaml").read_text()
    assert run_cli(["nodes", "migrate-from-ca", "--arg=--nodes=1:x:cx22:fsn1:p"]) == 2
    assert "refused: --nodes: max size 'x'" in capsys.readouterr().err


def test_priority_regexes_are_re2_posix_classes_included() -> None:
    # expander/priority/priority.go compiles each entry with Go's regexp (RE2) and matches it anywhere
    # in the group's name; [[:digit:]] is a POSIX class there (Python's re reads it as a set of
    # characters followed by a literal "]" and would leave workers5 at priority 0).
    priorities = "30:\n  - '^workers[[:digit:]]$'\n10:\n  - workers\n"
    args = ["--expander=priority,least-waste", "--nodes=0:5:cx22:fsn1:workers5", "--nodes=0:5:cx22:fsn1:workersx"]
    result = migrate(CaSettings(args=args, priorities=priorities))
    pools = result.node_groups[0]["spec"]["pools"]
    assert [(p["config"]["name"], p["priority"]) for p in pools] == [("workers5", 30), ("workersx", 10)]


@pytest.mark.parametrize(
    ("option", "text"),
    [
        ("--deployment", "kind: Deployment\nspec: [unclosed\n"),
        ("--priority-configmap", "- a list\n"),
        ("--priority-configmap", "metadata: {name: cluster-autoscaler-priority-expander}\ndata: [1]\n"),
    ],
)
def test_unreadable_files_are_refused_naming_the_option(
    option: str, text: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "file.yaml"
    path.write_text(text)
    assert main(["--arg=--nodes=0:2:cx22:fsn1:p", option, str(path)]) == 2
    err = capsys.readouterr().err
    assert f"refused: {option}:" in err and "Traceback" not in err


@pytest.mark.parametrize(
    ("timeout", "args", "create_s", "ready_s"),
    [
        # CA bounds the create call with HCLOUD_SERVER_CREATION_TIMEOUT (minutes) and waits for the
        # Node separately: --max-node-provision-time, 15 minutes by default.
        ("2", [], 120.0, 900.0),
        ("2", ["--max-node-provision-time=25m"], 120.0, 1500.0),
        ("0", [], None, 900.0),  # strconv.Atoi 0: CA keeps its 5 minutes
        ("soon", [], None, 900.0),  # not a number: the same
    ],
)
def test_creation_timeout_bounds_the_create_and_provision_time_the_readiness(
    timeout: str, args: list[str], create_s: float | None, ready_s: float
) -> None:
    env = {"HCLOUD_SERVER_CREATION_TIMEOUT": timeout}
    result = migrate(CaSettings(args=["--nodes=0:2:cx22:fsn1:p", *args], env=env))
    valid(result)
    assert result.worker_settings["providers"]["hetzner"].get("create_timeout_s") == create_s
    assert result.worker_settings["autoscaler"]["readiness_timeout_s"] == ready_s
