"""Each scale-down blocker, from real API objects: pods and nodes made in the simulated cluster,
read by the scale-down observation activity over HTTP, judged by the rules."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from activities.kube.client import api_client
from activities.nodes.scale_down import ScaleDownActivities
from activities.settings import KubeSettings
from scaling.nodes.models import LABEL_GROUP, LABEL_POOL
from scaling.nodes.scale_down.candidates import plan_from_input
from scaling.nodes.scale_down.models import ScaleDownInput
from sim.cluster import FakeCluster
from starters.kube import apply_crds, apply_node_group, node_group
from tests.polling import eventually

RS_OWNER = [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "rs-uid", "controller": True}]


@pytest.fixture
def api(tmp_path: Path) -> Iterator[client.ApiClient]:
    with FakeCluster(node_ready_delay=0.05, pod_start_delay=0.05, scheduler_interval=0.05) as sim:
        yield api_client(KubeSettings(kubeconfig=str(sim.write_kubeconfig(tmp_path / "kubeconfig"))))


def make_node(core: client.CoreV1Api, name: str, annotations: dict[str, str] | None = None) -> None:
    q = {"cpu": "2", "memory": "4Gi", "pods": "110"}
    core.create_node(
        {
            "metadata": {
                "name": name,
                "labels": {LABEL_GROUP: "g", LABEL_POOL: "kwok-cx22"},
                "annotations": {"kwok.x-k8s.io/node": "fake", **(annotations or {})},
            },
            "spec": {"providerID": f"kwok://{name}"},
            "status": {"allocatable": q, "capacity": q},
        }
    )


def make_pod(
    core: client.CoreV1Api,
    name: str,
    node: str,
    namespace: str = "default",
    owners: list | None = None,
    annotations: dict[str, str] | None = None,
    volumes: list | None = None,
) -> None:
    spec: dict[str, Any] = {
        "nodeName": node,
        "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}],
    }
    if volumes:
        spec["volumes"] = volumes
    core.create_namespaced_pod(
        namespace,
        {
            "metadata": {"name": name, "ownerReferences": owners or [], "annotations": annotations or {}},
            "spec": spec,
        },
    )


def test_each_blocker_is_read_from_the_cluster_and_named(api: client.ApiClient) -> None:
    core = client.CoreV1Api(api)
    apply_crds(api)
    apply_node_group(
        api,
        node_group(
            "g",
            [{"provider": "kwok", "serverType": ["cx22"], "priority": 1}],
            scaleDown={"unneededTime": "0s", "delayAfterAdd": "0s"},
        ),
    )
    for n in ("n-ste", "n-bare", "n-local", "n-sys", "n-off", "n-lift", "spare"):
        make_node(core, n, {"cluster-autoscaler.kubernetes.io/scale-down-disabled": "true"} if n == "n-off" else None)
    make_pod(
        core, "ste", "n-ste", owners=RS_OWNER, annotations={"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"}
    )
    make_pod(core, "bare", "n-bare")
    make_pod(core, "local", "n-local", owners=RS_OWNER, volumes=[{"name": "scratch", "emptyDir": {}}])
    make_pod(core, "sys", "n-sys", namespace="kube-system", owners=RS_OWNER)
    make_pod(core, "off", "n-off", owners=RS_OWNER)
    # "true" lifts the no-controller and local-storage blocks.
    make_pod(
        core,
        "lift",
        "n-lift",
        annotations={"cluster-autoscaler.kubernetes.io/safe-to-evict": "true"},
        volumes=[{"name": "scratch", "emptyDir": {}}],
    )
    make_pod(core, "spare-load", "spare", owners=RS_OWNER)  # keeps the spare node in use, with room

    acts = ScaleDownActivities(api, known_providers=["kwok"])
    obs = eventually(
        lambda: (o := acts.observe_scale_down("c")) and sum(p.phase == "Running" for p in o.pods) == 7 and o,
        timeout=60,
        message="all pods running",
    )
    plan = plan_from_input(
        ScaleDownInput(
            nodes=obs.nodes, pods=obs.pods, pdbs=obs.pdbs, groups=obs.groups, storage=obs.storage, now=time.time()
        )
    )
    reasons = {name: d.reason for name, d in plan.decisions.items()}
    assert reasons["n-ste"] == "NotSafeToEvictAnnotation"
    assert reasons["n-bare"] == "NotReplicated"
    assert reasons["n-local"] == "LocalStorageRequested"
    assert reasons["n-sys"] == "UnmovableKubeSystemPod"
    assert reasons["n-off"] == "ScaleDownDisabledAnnotation"
    assert reasons["n-lift"] is None  # nothing blocks it
    assert "n-lift" in {r.name for r in plan.to_remove}
    blocked = {r.name for r in plan.to_remove} & {"n-ste", "n-bare", "n-local", "n-sys", "n-off"}
    assert not blocked
    messages = {name: " ".join(b.message for b in d.reasons) for name, d in plan.decisions.items()}
    assert "ste" in messages["n-ste"] and "bare" in messages["n-bare"]  # the message names the pod


def test_a_pdb_that_would_be_violated_blocks_the_node(api: client.ApiClient) -> None:
    core = client.CoreV1Api(api)
    apply_crds(api)
    apply_node_group(
        api,
        node_group(
            "g",
            [{"provider": "kwok", "serverType": ["cx22"], "priority": 1}],
            scaleDown={"unneededTime": "0s", "delayAfterAdd": "0s"},
        ),
    )
    for n in ("n-pdb", "spare"):
        make_node(core, n)
    make_pod(core, "db", "n-pdb", owners=RS_OWNER)
    make_pod(core, "spare-load", "spare", owners=RS_OWNER)
    core.patch_namespaced_pod("db", "default", {"metadata": {"labels": {"app": "db"}}})
    client.PolicyV1Api(api).create_namespaced_pod_disruption_budget(
        "default", {"metadata": {"name": "db"}, "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "db"}}}}
    )
    acts = ScaleDownActivities(api, known_providers=["kwok"])
    obs = eventually(
        lambda: (o := acts.observe_scale_down("c")) and all(p.phase == "Running" for p in o.pods) and o.pdbs and o,
        timeout=60,
        message="pods running and the PDB read",
    )
    plan = plan_from_input(
        ScaleDownInput(nodes=obs.nodes, pods=obs.pods, pdbs=obs.pdbs, groups=obs.groups, now=time.time())
    )
    assert plan.decisions["n-pdb"].reason == "NotEnoughPdb"
    assert "n-pdb" not in {r.name for r in plan.to_remove}
