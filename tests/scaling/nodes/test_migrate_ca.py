"""Migration from Cluster Autoscaler's Hetzner provider, fed with CA's own documentation."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from activities.nodes.providers.hetzner import HetznerSettings
from scaling.nodes.migrate_ca import CaSettings, MigrationError, flag_values, migrate
from scaling.nodes.nodegroups import load_node_groups
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
        "config": {"locations": ["fsn1"]},
    }
    assert any("imagesForArch names no image" in n for n in result.notes)
    # The file form holds the same JSON, not base64.
    from_file = migrate(CaSettings(args=README_NODES[:1], cluster_config_file=README_CLUSTER_CONFIG))
    assert from_file.node_groups == result.node_groups


def test_readme_flags_in_legacy_mode_become_one_group_with_fallback_locations() -> None:
    result = migrate(
        CaSettings(args=README_NODES, env={"HCLOUD_CLOUD_INIT": b64("#cloud-config"), "HCLOUD_IMAGE": "debian-12"})
    )
    valid(result)
    [group] = result.node_groups  # no labels or taints tell them apart
    assert group["metadata"]["annotations"]["growth.autoscaling.dev/migrated-from"] == "pool1, pool2, pool3"
    cpx51, cx41 = group["spec"]["pools"]
    assert cpx51["serverType"] == ["cpx51"] and cpx51["config"]["locations"] == ["fsn1", "nbg1"]
    assert (cpx51["minNodes"], cpx51["maxNodes"]) == (2, 20)
    assert cx41["config"] == {"locations": ["nbg1"], "image": "debian-12"}
    assert result.worker_settings["providers"]["hetzner"]["locations"] == ["fsn1", "nbg1"]
    assert any("HCLOUD_CLOUD_INIT not copied" in n for n in result.notes)
    assert any("pool1 and pool2" in n for n in result.notes)


def test_example_deployment_through_the_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    deployment = tmp_path / "ca.yaml"
    deployment.write_text(EXAMPLE_DEPLOYMENT)
    assert main(["--deployment", str(deployment), "--out", str(tmp_path / "out")]) == 0
    groups = list(yaml.safe_load_all((tmp_path / "out" / "node-groups.yaml").read_text()))
    settings = yaml.safe_load((tmp_path / "out" / "worker-settings.yaml").read_text())
    assert [g["spec"]["pools"][0]["serverType"] for g in groups] == [["cpx11"]]
    assert groups[0]["spec"]["pools"][0]["config"]["image"] == "ubuntu-20.04"  # CA's legacy default
    assert settings["providers"]["hetzner"]["token_env"] == "HCLOUD_TOKEN"
    assert settings["autoscaler"] == {"enforce_min_nodes": False}  # CA's default, not growth's
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
        "NodeConfigs": {"arm": {"PlacementGroup": "42"}, "x86": {"labels": {"a": "b"}, "subnetIPRange": "10.0.1.0/24"}},
    }
    env = {
        "HCLOUD_CLUSTER_CONFIG": b64(json.dumps(config)),
        "HCLOUD_NETWORK": "1234",
        "HCLOUD_FIREWALL": "k8s-nodes",
        "HCLOUD_SSH_KEY": "ops",
        "HCLOUD_PUBLIC_IPV4": "false",
    }
    result = migrate(CaSettings(args=["--nodes=0:3:cax11:hel1:arm", "--nodes=0:3:cx22:hel1:x86"], env=env))
    valid(result)
    pools = {p["serverType"][0]: p["config"] for g in result.node_groups for p in g["spec"]["pools"]}
    assert pools["cax11"]["image"] == "ubuntu-24.04-arm" and pools["cx22"]["image"] == "ubuntu-24.04"
    assert pools["cax11"]["placement_group"] == 42 and "placement_group" not in pools["cx22"]
    assert pools["cx22"]["networks"] == [1234] and pools["cx22"]["ssh_keys"] == ["ops"]
    assert "firewalls" not in pools["cx22"]  # a name: growth needs the id, and says so
    assert any("HCLOUD_FIREWALL='k8s-nodes' is a name" in n for n in result.notes)
    assert any("HCLOUD_PUBLIC_IPV4=false not carried over" in n for n in result.notes)
    assert any("nodeConfigs.x86.subnetIPRange is not a field" in n for n in result.notes)
    assert [g["spec"].get("labels") for g in result.node_groups] == [None, {"a": "b"}]  # two label sets, two groups


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
    }
    assert any("--balance-similar-node-groups=true has no growth equivalent" in n for n in result.notes)


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
        (CaSettings(args=["--nodes=1:2:cx22:fsn1:p"], priorities="10:\n  - 'pool[' \n"), "priorities[10][0]"),
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
