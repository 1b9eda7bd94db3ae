"""The DataPlaneCluster lifecycle with nothing stubbed on growth's side: the real OCM activities
over HTTP against the fake OCM (with faults), growth's agent API served by uvicorn, and the fake
agent that the fake OCM's fleetshard addon "installs", reporting with its own token. On the dev
server, in real time (the sim's clocks and the agent are real-time threads)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import pytest
from temporalio.client import WorkflowHandle
from temporalio.testing import WorkflowEnvironment

from activities.answers import verified_context
from activities.fleet import build_activities
from activities.fleet.agent_api import serve
from activities.fleet.settings import AgentApiSettings, FleetSettings, IdentityProviderSettings, OcmSettings
from activities.fleet.tokens import AgentTokens
from scaling.fleet import contracts
from scaling.fleet.lifecycle import ClusterTimeouts, DataPlaneClusterState
from scaling.fleet.models import ClusterPhase
from sim.clouds.ocm import API, FakeOcm, Timings
from sim.fleet.agent import AgentFleet, FakeAgent
from starters.processes import free_port
from tests.activities.fleet.conftest import AGENT_SECRET, IDP_SECRET, OCM_TOKEN
from tests.polling import until
from tests.workflows.fleet.test_cluster import cluster_input
from tests.workflows.workers import new_worker
from workflows.fleet.cluster import DataPlaneClusterWorkflow

UNITS_PER_NODE = 0.5
FAST = Timings(pending_s=0.3, installing_s=0.5, uninstalling_s=0.5, addon_install_s=0.3)


@pytest.fixture
def ocm() -> Iterator[FakeOcm]:
    with FakeOcm(OCM_TOKEN, timings=Timings(**vars(FAST))) as sim:
        yield sim


@pytest.fixture
def world_settings(ocm: FakeOcm, tmp_path: Path) -> FleetSettings:
    for name, value in (("ocm-token", OCM_TOKEN), ("idp-secret", IDP_SECRET), ("agent-secret", AGENT_SECRET)):
        (tmp_path / name).write_text(value)
    return FleetSettings(
        ocm=OcmSettings(base_url=ocm.url, token_file=str(tmp_path / "ocm-token"), timeout_s=5),
        identity_provider=IdentityProviderSettings(client_secret_file=str(tmp_path / "idp-secret")),
        agent_api=AgentApiSettings(bind=f"127.0.0.1:{free_port()}", token_secret_file=str(tmp_path / "agent-secret")),
    )


@asynccontextmanager
async def world(
    env: WorkflowEnvironment, ocm: FakeOcm, settings: FleetSettings, tq: str = ""
) -> AsyncIterator[tuple[str, AgentFleet]]:
    """The agent API, the agents the fleetshard addon starts, and a worker with the real activities."""
    stop = asyncio.Event()
    api = asyncio.create_task(serve(env.client, settings.agent_api, stop))
    agents = AgentFleet(ocm.addon_installations, units_per_node={"standard": UNITS_PER_NODE}, interval_s=0.5, scan_s=0.2).start()  # fmt: skip
    tq = tq or f"fleet-world-{uuid.uuid4().hex[:6]}"
    try:
        async with new_worker(env.client, tq, workflows=[DataPlaneClusterWorkflow], activities=build_activities(settings)):  # fmt: skip
            yield tq, agents
    finally:
        agents.stop()
        stop.set()
        await api


async def start(env: WorkflowEnvironment, tq: str, **timeouts: float) -> WorkflowHandle:
    inp = cluster_input(**timeouts)
    inp.timeouts = ClusterTimeouts(**{**inp.timeouts.model_dump(), "poll_s": 0.3, **timeouts})
    return await env.client.start_workflow(
        DataPlaneClusterWorkflow.run, inp, id=contracts.cluster_workflow_id(inp.cluster_id), task_queue=tq
    )


async def state(handle: WorkflowHandle) -> DataPlaneClusterState:
    return await handle.query(DataPlaneClusterWorkflow.status)


async def test_lifecycle_through_faults_with_the_real_agent(
    dev_env: WorkflowEnvironment, ocm: FakeOcm, world_settings: FleetSettings
) -> None:
    ocm.rate_limit(1, retry_after_s=1, method="POST", path="^/clusters$")  # the create is refused once,
    ocm.lose_create_responses(1)  # then made but its answer lost,
    ocm.inject_fault(503, 1, method="GET", path="/ingresses")  # and the DNS lookup fails once
    async with world(dev_env, ocm, world_settings) as (tq, agents):
        handle = await start(dev_env, tq)
        await until(lambda: _phase_is(handle, ClusterPhase.READY), timeout=90)
        # Reserved instances are served once the cluster is ready; the agent's next report counts them.
        await until(lambda: _remaining_is_max_minus(handle, 1), timeout=60)
        st = await state(handle)
        cap = st.capacity["standard"]
        assert cap.max_units == int(cap.max_nodes * UNITS_PER_NODE) and cap.max_units > 0
        assert st.steps_done == ["machine_pools", "ingress_dns", "identity_provider", "cluster_resources", "addons"]
        assert st.dns_name.startswith("apps.") and ocm.stats()["clusters_created"] == 1
        agent = agents.agents[st.cluster_id]
        assert agent.stats.refused == {}
        # An agent holding another cluster's token cannot report for this one.
        url = world_settings.agent_api.url()
        impostor = FakeAgent(url, st.cluster_id, AgentTokens(world_settings.agent_api).token_for("another-cluster"))
        try:
            assert await asyncio.to_thread(impostor.report) == 403  # off the loop the API runs on
            assert impostor.stats.reports == 0
        finally:
            impostor.stop()
        agent.set_ready(False)
        await until(lambda: _phase_is(handle, ClusterPhase.WAITING), timeout=60)
        agent.set_ready(True)
        await until(lambda: _phase_is(handle, ClusterPhase.READY), timeout=60)
        await handle.signal(DataPlaneClusterWorkflow.deprovision)
        await handle.signal(DataPlaneClusterWorkflow.delete)
        final: DataPlaneClusterState = await asyncio.wait_for(handle.result(), 90)
    assert final.phase == ClusterPhase.DELETED and final.cleaned_up
    stats = ocm.stats()
    assert stats["clusters_created"] == 1 and stats["clusters_deleted"] == 1 and stats["clusters_live"] == 0
    assert stats["lost_responses"] == 1 and stats["clusters_leaked"] == 0


async def test_cluster_in_error_fails_and_is_removed(
    dev_env: WorkflowEnvironment, ocm: FakeOcm, world_settings: FleetSettings
) -> None:
    ocm.clusters_end_in_error(1, "no quota")
    async with world(dev_env, ocm, world_settings) as (tq, _agents):
        handle = await start(dev_env, tq)
        final: DataPlaneClusterState = await asyncio.wait_for(handle.result(), 90)
    assert final.phase == ClusterPhase.FAILED and "no quota" in final.message and final.cleaned_up
    stats = ocm.stats()
    assert stats["clusters_created"] == 1 and stats["clusters_deleted"] == 1 and stats["clusters_live"] == 0


async def test_addon_that_never_gets_ready_fails_the_cluster_after_the_step_timeout(
    dev_env: WorkflowEnvironment, ocm: FakeOcm, world_settings: FleetSettings
) -> None:
    ocm.timings.addon_install_s = 3600  # installs forever
    async with world(dev_env, ocm, world_settings) as (tq, _agents):
        handle = await start(dev_env, tq, step_s=4.0)
        final: DataPlaneClusterState = await asyncio.wait_for(handle.result(), 90)
    assert final.phase == ClusterPhase.FAILED and final.failed_step == "addons" and final.cleaned_up
    assert ocm.stats()["clusters_live"] == 0


async def test_worker_restart_mid_terraforming_makes_one_cluster(
    dev_env: WorkflowEnvironment, ocm: FakeOcm, world_settings: FleetSettings
) -> None:
    """The worker stops while the workflow waits (a durable timer) between polls of the strimzi
    addon, four terraforming steps done; a new worker replays the history and goes on without
    redoing a step or creating anything twice."""
    ocm.timings.addon_install_s = 3600  # hold terraforming at the addons step
    async with world(dev_env, ocm, world_settings) as (tq, _agents):
        handle = await start(dev_env, tq)
        await until(lambda: _addons_installing(handle), timeout=60)
        st = await state(handle)
        assert st.phase == ClusterPhase.PROVISIONED and len(st.steps_done) == 4
    # The first worker is gone; a new one (same task queue, no cached workflow) picks it up.
    ocm.timings.addon_install_s = 0.3
    async with world(dev_env, ocm, world_settings, tq):
        await until(lambda: _phase_is(handle, ClusterPhase.READY), timeout=90)
        await handle.signal(DataPlaneClusterWorkflow.deprovision)
        await handle.signal(DataPlaneClusterWorkflow.delete)
        assert (await asyncio.wait_for(handle.result(), 90)).phase == ClusterPhase.DELETED
    stats = ocm.stats()
    assert stats["clusters_created"] == 1 and stats["clusters_leaked"] == 0 and stats["clusters_live"] == 0
    assert _posts(ocm) == {"clusters": 1, "machine_pools": 1, "identity_providers": 1, "syncsets": 1, "addons": 2}


async def test_worker_stopped_during_an_ocm_call_makes_one_machine_pool(
    dev_env: WorkflowEnvironment, ocm: FakeOcm, world_settings: FleetSettings
) -> None:
    """The worker stops while its machine-pool create is in flight: OCM made the pool, the
    answer never came back. The new worker's retry finds that pool (409, then read): one pool,
    one cluster, and the lifecycle completes."""
    # OCM applies the create and holds its answer longer than the test; the HTTP client waits
    # longer still, so only the worker's stop can end that first attempt.
    ocm.slow_responses(600, 1, method="POST", path="/machine_pools$")
    patient = world_settings.model_copy(update={"ocm": world_settings.ocm.model_copy(update={"timeout_s": 900})})
    async with world(dev_env, ocm, patient) as (tq, _agents):
        handle = await start(dev_env, tq)
        await until(lambda: _pools_at_ocm_is(ocm, 1), timeout=60)
        st = await state(handle)
        assert st.phase == ClusterPhase.PROVISIONED and st.steps_done == []
    async with world(dev_env, ocm, patient, tq):
        await until(lambda: _phase_is(handle, ClusterPhase.READY), timeout=120)
        st = await state(handle)
        assert st.steps_done == ["machine_pools", "ingress_dns", "identity_provider", "cluster_resources", "addons"]
        await handle.signal(DataPlaneClusterWorkflow.deprovision)
        await handle.signal(DataPlaneClusterWorkflow.delete)
        assert (await asyncio.wait_for(handle.result(), 90)).phase == ClusterPhase.DELETED
    stats = ocm.stats()
    assert stats["clusters_created"] == 1 and stats["clusters_leaked"] == 0 and stats["clusters_live"] == 0
    # The pool create was sent twice (the lost one and the retry, which found the pool).
    assert _posts(ocm)["machine_pools"] == 2 and _posts(ocm)["clusters"] == 1


def _posts(ocm: FakeOcm) -> dict[str, int]:
    """POSTs the fake OCM received, per kind of resource."""
    out: dict[str, int] = {}
    for route, n in ocm.stats()["requests_by_route"].items():
        method, path = route.split(" ", 1)
        if method == "POST":
            kind = path.rstrip("/").rsplit("/", 1)[-1]
            out[kind] = out.get(kind, 0) + n
    return out


async def _pools_at_ocm(ocm: FakeOcm) -> int:
    """Machine pools the fake OCM holds (asked over its API, as anyone would)."""
    async with httpx.AsyncClient(
        base_url=ocm.url + API, headers={"Authorization": f"Bearer {OCM_TOKEN}"}, verify=verified_context()
    ) as http:
        n = 0
        for c in ocm.clusters():
            resp = await http.get(f"/clusters/{c['id']}/machine_pools")
            n += len(resp.json().get("items") or [])
        return n


async def _pools_at_ocm_is(ocm: FakeOcm, n: int) -> bool:
    return await _pools_at_ocm(ocm) == n


async def _phase_is(handle: WorkflowHandle, want: ClusterPhase) -> bool:
    return (await state(handle)).phase == want


async def _remaining_is_max_minus(handle: WorkflowHandle, units: int) -> bool:
    cap = (await state(handle)).capacity["standard"]
    return cap.max_units is not None and cap.remaining_units == cap.max_units - units


async def _addons_installing(handle: WorkflowHandle) -> bool:
    return bool((await state(handle)).addons)
