"""One worker, many clusters: the activities the worker registers take the cluster from their
input and act on that cluster's API server, resolved from the settings' `clusters:` map. Two
simulated clusters, each its own API server with its own token."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client
from temporalio import activity
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from activities.nodes import build_activities
from activities.settings import Settings, load_settings
from scaling.nodes import contracts
from scaling.nodes.contracts import (
    CreateNodeInput,
    DeleteNodeInput,
    MarkNodeInput,
    NodeRef,
    WaitReadyInput,
)
from scaling.nodes.models import LABEL_CLUSTER, LABEL_GROUP, Pool
from sim.cluster import FakeCluster

POOL = Pool(group="general", name="kwok-cx22", provider="kwok", server_type="cx22", priority=10)


@pytest.fixture
def two_clusters(tmp_path: Path) -> Iterator[dict[str, FakeCluster]]:
    with FakeCluster(node_ready_delay=0.1) as east, FakeCluster(node_ready_delay=0.1) as west:
        yield {"east": east, "west": west}


@pytest.fixture
def settings(two_clusters: dict[str, FakeCluster], tmp_path: Path) -> Settings:
    # Written and read the way the worker reads its file: kubeconfig paths relative to it.
    for name, sim in two_clusters.items():
        sim.write_kubeconfig(tmp_path / f"{name}.kubeconfig")
    config = tmp_path / "growth.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "clusters": {name: {"kubeconfig": f"{name}.kubeconfig"} for name in two_clusters},
                "providers": {"kwok": {}},
            }
        )
    )
    return load_settings(str(config))


def by_name(settings: Settings) -> dict[str, Callable[..., Any]]:
    """The worker's node-loop activities, by their registered names."""
    return {activity._Definition.must_from_callable(fn).name: fn for fn in build_activities(settings)}


def nodes_of(sim: FakeCluster) -> list[str]:
    api = sim.api_client()
    try:
        return sorted(n.metadata.name for n in client.CoreV1Api(api).list_node().items)
    finally:
        api.close()


async def test_each_clusters_activities_reach_its_own_api_server(
    two_clusters: dict[str, FakeCluster], settings: Settings
) -> None:
    acts = by_name(settings)
    env = ActivityEnvironment()
    made = {}
    for name in ("east", "west"):
        inp = CreateNodeInput(cluster=name, request_id=f"nodes/{name}/request/000001-aa", attempt=0, pool=POOL)
        made[name] = await env.run(acts[contracts.CREATE_NODE], inp)
        assert made[name].outcome == "created"
    # KWOK is per cluster: each Node is written into the cluster its request is for, and only there.
    assert nodes_of(two_clusters["east"]) == [made["east"].node_name]
    assert nodes_of(two_clusters["west"]) == [made["west"].node_name]
    assert made["east"].node_name != made["west"].node_name

    for name in ("east", "west"):
        node = made[name].node_name
        labels = {LABEL_GROUP: f"seen-by-{name}"}  # the wait labels the node once Ready
        ready = WaitReadyInput(cluster=name, node_name=node, timeout_s=30, poll_s=0.05, labels=labels)
        assert await env.run(acts[contracts.WAIT_NODE_READY], ready) is True
        obs = env.run(acts[contracts.OBSERVE_CLUSTER], name)
        assert obs.demand.nodes.total == 1
        assert [c.group for c in obs.demand.nodes.groups] == [f"seen-by-{name}"]
        api = two_clusters[name].api_client()
        try:
            assert client.CoreV1Api(api).read_node(node).metadata.labels[LABEL_CLUSTER] == name
        finally:
            api.close()
        machines = await env.run(acts[contracts.LIST_PROVIDER_MACHINES], name)
        assert [m.name for m in machines] == [node]
        assert env.run(acts[contracts.LIST_NODE_PROVIDER_IDS], name) == [made[name].provider_id]

    # A node name that exists only in west, acted on as east: east answers "gone", west is untouched.
    west_node = made["west"].node_name
    assert (
        env.run(
            acts[contracts.MARK_NODE_FOR_SCALE_DOWN], MarkNodeInput(cluster="east", node=west_node, scale_down_at="x")
        )
        is False
    )
    env.run(acts[contracts.DELETE_NODE_OBJECT], NodeRef(cluster="east", node=west_node))
    assert nodes_of(two_clusters["west"]) == [west_node]
    # The same calls as west act on west.
    assert (
        env.run(
            acts[contracts.MARK_NODE_FOR_SCALE_DOWN], MarkNodeInput(cluster="west", node=west_node, scale_down_at="x")
        )
        is True
    )
    await env.run(acts[contracts.DELETE_NODE], DeleteNodeInput(cluster="west", provider="kwok", node_name=west_node))
    assert nodes_of(two_clusters["west"]) == []
    assert nodes_of(two_clusters["east"]) == [made["east"].node_name]


async def test_a_cluster_missing_from_the_settings_is_a_non_retryable_error(settings: Settings) -> None:
    acts = by_name(settings)
    env = ActivityEnvironment()
    with pytest.raises(ApplicationError) as err:
        env.run(acts[contracts.OBSERVE_CLUSTER], "north")
    assert err.value.non_retryable and err.value.type == "UnknownCluster"
    assert "'north'" in str(err.value) and "east, west" in str(err.value)
    with pytest.raises(ApplicationError) as err:
        await env.run(
            acts[contracts.CREATE_NODE], CreateNodeInput(cluster="north", request_id="r", attempt=0, pool=POOL)
        )
    assert err.value.non_retryable and "'north'" in str(err.value)


def test_without_a_clusters_map_the_kubernetes_section_serves_every_name(
    two_clusters: dict[str, FakeCluster], tmp_path: Path
) -> None:
    """Backwards compatible: one-cluster settings (only `kubernetes:`) answer any cluster name."""
    kubeconfig = two_clusters["east"].write_kubeconfig(tmp_path / "only.kubeconfig")
    settings = Settings.model_validate({"kubernetes": {"kubeconfig": str(kubeconfig)}})
    acts = by_name(settings)
    env = ActivityEnvironment()
    assert env.run(acts[contracts.OBSERVE_CLUSTER], "demo").nodes == []
    assert env.run(acts[contracts.OBSERVE_CLUSTER], "anything").nodes == []
