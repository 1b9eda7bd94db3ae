"""sim/kube/kubelet.py: a booted machine joins the cluster the way kubeadm join + kubelet do."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from sim.cluster import FakeCluster
from sim.kube.kubelet import Kubelet, Machine, parse_join
from tests.sim.conftest import ready_nodes

JOIN = "abcdef.0123456789abcdef"


def user_data(token: str = JOIN, ca_hash: str | None = None) -> str:
    pin = f"--discovery-token-ca-cert-hash {ca_hash}" if ca_hash else "--discovery-token-unsafe-skip-ca-verification"
    return (
        "#cloud-config\n"
        "write_files:\n"
        "  - path: /etc/default/kubelet\n"
        "    content: |\n"
        '      KUBELET_EXTRA_ARGS="--node-labels=team=data,growth.autoscaling.dev/pool=p1 '
        '--register-with-taints=dedicated=data:NoSchedule,gpu:NoExecute"\n'
        "runcmd:\n"
        f"  - kubeadm join 10.0.0.1:6443 --token {token} --node-name m1 {pin}\n"
    )


def machine(name: str = "m1", **kw: Any) -> Machine:
    return Machine(
        name=name,
        provider_id=f"fake://{name}",
        user_data=kw.pop("user_data", user_data()),
        cpu_cores=4,
        memory_bytes=8 * 1024**3,
        disk_gb=80,
        arch="arm64",
        serial=7,
        cloud_labels={"node.kubernetes.io/instance-type": "cax21"},
        **kw,
    )


def test_join_command_and_kubelet_flags_are_parsed() -> None:
    config = parse_join(user_data(ca_hash="sha256:" + "ab" * 32))
    assert config.token == JOIN and config.ca_cert_hash == "sha256:" + "ab" * 32
    assert config.labels == {"team": "data", "growth.autoscaling.dev/pool": "p1"}
    assert config.taints == [
        {"key": "dedicated", "value": "data", "effect": "NoSchedule"},
        {"key": "gpu", "effect": "NoExecute"},
    ]


def test_pinned_join_registers_a_node_that_becomes_ready(cluster: FakeCluster, core: client.CoreV1Api) -> None:
    kubelet = Kubelet(cluster.url, cluster.token, join_token=JOIN)
    assert kubelet.join(machine(user_data=user_data(ca_hash=cluster.certs.ca_cert_hash()))) == "joined"
    assert kubelet.ca_pem == cluster.certs.ca_pem  # discovered from kube-public/cluster-info
    ready_nodes(core, "m1")
    node = core.read_node("m1")
    assert node.spec.provider_id == "fake://m1"
    assert node.metadata.labels["team"] == "data"
    assert node.metadata.labels["kubernetes.io/arch"] == "arm64"
    assert node.metadata.labels["node.kubernetes.io/instance-type"] == "cax21"
    assert [(t.key, t.value, t.effect) for t in node.spec.taints] == [
        ("dedicated", "data", "NoSchedule"),
        ("gpu", None, "NoExecute"),
    ]
    assert node.status.capacity["cpu"] == "4" and node.status.allocatable["cpu"] == "3900m"
    assert node.status.node_info.architecture == "arm64"


def test_a_wrong_token_or_ca_pin_never_gets_a_node(cluster: FakeCluster, core: client.CoreV1Api) -> None:
    kubelet = Kubelet(cluster.url, cluster.token, join_token=JOIN)
    assert kubelet.join(machine("stolen", user_data=user_data(token="stolen.0000000000000000"))) == "refused"
    assert kubelet.join(machine("mitm", user_data=user_data(ca_hash="sha256:" + "00" * 32))) == "refused"
    assert "bootstrap token" in kubelet.refused["stolen"] and "ca-cert-hash" in kubelet.refused["mitm"]
    for name in ("stolen", "mitm"):
        with pytest.raises(ApiException) as err:
            core.read_node(name)
        assert err.value.status == 404


def test_deleted_machine_loses_its_node_and_an_unreachable_cluster_is_retried(
    cluster: FakeCluster, core: client.CoreV1Api
) -> None:
    kubelet = Kubelet(cluster.url, cluster.token, join_token=JOIN)
    assert kubelet.join(machine()) == "joined"
    assert kubelet.join(machine()) == "joined"  # a second registration finds its Node (409)
    assert kubelet.machine_deleted("m1")
    with pytest.raises(ApiException) as err:
        core.read_node("m1")
    assert err.value.status == 404
    nowhere = Kubelet("https://127.0.0.1:9", cluster.token, join_token=JOIN, timeout=2)
    assert nowhere.join(machine()) == "retry" and not nowhere.refused
