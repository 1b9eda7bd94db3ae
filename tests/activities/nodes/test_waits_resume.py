"""The long waits (node Ready, pods gone) against the simulated cluster: a retry keeps the
deadline its first attempt heartbeated, and a wait hands itself back when its worker shuts down."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from activities.heartbeat import WORKER_SHUTDOWN
from activities.kube.client import api_client
from activities.nodes.kube import KubeActivities
from activities.nodes.providers.kwok import KwokProvider
from activities.nodes.scale_down import ScaleDownActivities
from activities.settings import KubeSettings
from scaling.nodes.contracts import CreateNodeInput, WaitPodsGoneInput, WaitReadyInput
from scaling.nodes.models import Pool
from sim.cluster import FakeCluster


@pytest.fixture
def api(tmp_path: Path) -> Iterator[client.ApiClient]:
    with FakeCluster(node_ready_delay=0.3, pod_start_delay=0.05, scheduler_interval=0.05) as sim:
        sim.control_request("POST", "/sim/v1/faults", {"never_ready_nodes": ["*-stuck-*"]})
        yield api_client(KubeSettings(kubeconfig=str(sim.write_kubeconfig(tmp_path / "kubeconfig"))))


async def stuck_node(api: client.ApiClient) -> str:
    pool = Pool(group="general", name="kwok-stuck-cx22", provider="kwok", server_type="cx22", priority=10)
    made = await KwokProvider(api).create_node(CreateNodeInput(cluster="c1", request_id="r1", attempt=0, pool=pool))
    return made.node_name


async def test_a_retried_node_wait_keeps_its_first_attempts_deadline(api: client.ApiClient) -> None:
    node = await stuck_node(api)
    env = ActivityEnvironment()
    beats: list = []
    env.on_heartbeat = lambda *details: beats.append(details)
    # The attempt before this one (on a worker since killed) had 0.5 s left of its 600 s wait.
    env.info = dataclasses.replace(env.info, attempt=2, heartbeat_details=[{"deadline": time.time() + 0.5}])
    kube = KubeActivities(api, known_providers=["kwok"])
    wait = WaitReadyInput(cluster="c1", node_name=node, timeout_s=600, poll_s=0.05)
    assert await asyncio.wait_for(env.run(kube.wait_node_ready, wait), timeout=30) is False
    # Each beat carries the deadline on for the next retry.
    assert beats and beats[0][0]["deadline"] == env.info.heartbeat_details[0]["deadline"]


async def test_a_node_wait_without_a_previous_attempt_heartbeats_its_own_deadline(api: client.ApiClient) -> None:
    node = await stuck_node(api)
    env = ActivityEnvironment()
    beats: list = []
    env.on_heartbeat = lambda *details: beats.append(details)
    kube = KubeActivities(api, known_providers=["kwok"])
    started = time.time()
    assert await env.run(kube.wait_node_ready, WaitReadyInput(cluster="c1", node_name=node, timeout_s=0.3)) is False
    assert started + 0.3 <= beats[0][0]["deadline"] <= time.time() + 0.3


async def test_waits_hand_back_on_worker_shutdown(api: client.ApiClient) -> None:
    node = await stuck_node(api)
    kube = KubeActivities(api, known_providers=["kwok"])
    down = ScaleDownActivities(api, known_providers=["kwok"])
    core = client.CoreV1Api(api)
    core.create_namespaced_pod(
        "default",
        {"metadata": {"name": "p"}, "spec": {"nodeName": node, "containers": [{"name": "c", "image": "i"}]}},
    )
    waits = [
        (kube.wait_node_ready, WaitReadyInput(cluster="c1", node_name=node, timeout_s=600, poll_s=0.05)),
        (
            down.wait_pods_gone,
            WaitPodsGoneInput(cluster="c1", node=node, pods=["default/p"], timeout_s=600, poll_s=0.05),
        ),
    ]
    for fn, arg in waits:
        env = ActivityEnvironment()
        beats = asyncio.Event()
        env.on_heartbeat = lambda *_, beats=beats: beats.set()
        running = asyncio.create_task(env.run(fn, arg))
        await asyncio.wait_for(beats.wait(), timeout=30)  # it is waiting
        env.worker_shutdown()
        with pytest.raises(ApplicationError) as err:
            await asyncio.wait_for(running, timeout=30)
        assert err.value.type == WORKER_SHUTDOWN and not err.value.non_retryable
