"""The agent API over HTTP (httpx against the ASGI app) backed by a real Temporal test server and
the DataPlaneCluster workflow, OCM replaced by the stubs under the contract's activity names."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx
from temporalio.client import WorkflowHandle
from temporalio.testing import WorkflowEnvironment

from activities.fleet.agent_api import PREFIX, create_app
from activities.fleet.settings import AgentApiSettings
from activities.fleet.tokens import AgentTokens
from scaling.fleet.contracts import AgentClusterView
from scaling.fleet.lifecycle import DataPlaneClusterState
from scaling.fleet.models import ClusterPhase
from tests.polling import until
from tests.workflows.fleet.stubs import FleetWorld
from tests.workflows.fleet.test_cluster import cluster_input, in_phase, report, running
from workflows.fleet.cluster import DataPlaneClusterWorkflow


def api(env: WorkflowEnvironment, settings: AgentApiSettings, cluster_id: str) -> httpx.AsyncClient:
    token = AgentTokens(settings).token_for(cluster_id)
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=create_app(env.client, settings)),
        base_url=f"http://agent-api{PREFIX}/{cluster_id}",
        headers={"Authorization": f"Bearer {token}"},
    )


@asynccontextmanager
async def waiting_cluster(
    env: WorkflowEnvironment, settings: AgentApiSettings
) -> AsyncIterator[tuple[WorkflowHandle, httpx.AsyncClient]]:
    """A DataPlaneCluster waiting for its agent, and the agent API client of that cluster."""
    inp = cluster_input()
    async with running(env, FleetWorld(), inp) as handle, api(env, settings, inp.cluster_id) as http:
        await until(lambda: in_phase(handle, ClusterPhase.WAITING))
        yield handle, http


def body(**kw: object) -> dict:
    return report(**kw).model_dump(by_alias=True)


async def test_reports_drive_the_cluster_and_reads_come_from_its_workflow(
    env: WorkflowEnvironment, settings: AgentApiSettings
) -> None:
    async with waiting_cluster(env, settings) as (handle, http):
        config = (await http.get("")).json()
        assert config["spec"]["capacity"] == {"standard": {"maxNodes": 18}}
        assert (await http.get("/kafkas")).json()["items"] == []  # reserved only once ready

        resp = await http.put("/status", json=body(max_units=12, remaining=9))
        assert resp.status_code == 204, resp.text
        view: AgentClusterView = await handle.query(DataPlaneClusterWorkflow.agent_view)
        assert view.phase == ClusterPhase.READY
        assert (view.capacity["standard"].max_units, view.capacity["standard"].remaining_units) == (12, 9)
        (item,) = (await http.get("/kafkas")).json()["items"]
        assert item["metadata"]["name"] == item["metadata"]["namespace"] == "reserved-kafka-standard-1"
        assert item["metadata"]["labels"]["bf2.org/kafkaInstanceProfileType"] == "standard"
        assert item["metadata"]["labels"]["bf2.org/kafkaInstanceProfileQuotaConsumed"] == "1"

        assert (await http.put("/status", json=body(ready=False))).status_code == 204
        assert await in_phase(handle, ClusterPhase.WAITING)
        await handle.terminate()


async def test_bad_bodies_and_refused_reports_are_400_naming_the_field(
    env: WorkflowEnvironment, settings: AgentApiSettings
) -> None:
    async with waiting_cluster(env, settings) as (handle, http):
        bad = body()
        bad["capacity"]["standard"]["remainingUnits"] = 99  # > maxUnits: the model refuses it
        resp = await http.put("/status", json=bad)
        assert resp.status_code == 400 and "capacity" in resp.json()["reason"]
        resp = await http.put("/status", json={"capacity": {"standard": {"maxUnits": -1, "remainingUnits": 0}}})
        assert resp.status_code == 400 and "capacity.standard.maxUnits" in resp.json()["reason"]
        resp = await http.put("/status", content=b"not json")
        assert resp.status_code == 400
        not_bool = body()
        not_bool["conditions"][0]["status"] = "Maybe"  # the workflow's validator refuses it
        resp = await http.put("/status", json=not_bool)
        assert resp.status_code == 400 and resp.json()["reason"].startswith("conditions[0].status")
        st: DataPlaneClusterState = await handle.query(DataPlaneClusterWorkflow.status)
        assert st.reports == 0 and st.phase == ClusterPhase.WAITING
        await handle.terminate()


async def test_unknown_cluster(env: WorkflowEnvironment, settings: AgentApiSettings) -> None:
    async with api(env, settings, "no-such-cluster") as http:
        resp = await http.put("/status", json=body())
        assert resp.status_code == 400
        assert resp.json()["reason"] == "cluster agent with ID 'no-such-cluster' not found"
        assert (await http.get("")).status_code == 400


async def test_each_agent_reports_only_for_its_own_cluster(
    env: WorkflowEnvironment, settings: AgentApiSettings
) -> None:
    inp = cluster_input()
    async with running(env, FleetWorld(), inp) as handle:
        await until(lambda: in_phase(handle, ClusterPhase.WAITING))
        async with api(env, settings, "some-other-cluster") as other:
            other.base_url = f"http://agent-api{PREFIX}/{inp.cluster_id}"
            assert (await other.put("/status", json=body())).status_code == 403
            assert (await other.get("/kafkas")).status_code == 403
            assert (await other.put("/status", json=body(), headers={"Authorization": ""})).status_code == 401
            assert (await other.get("", headers={"Authorization": "Basic abc"})).status_code == 401
        st: DataPlaneClusterState = await handle.query(DataPlaneClusterWorkflow.status)
        assert st.reports == 0 and st.phase == ClusterPhase.WAITING
        await handle.terminate()


async def test_no_secret_configured_refuses_every_token(env: WorkflowEnvironment, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.delenv("GROWTH_AGENT_TOKEN_SECRET", raising=False)
    app = create_app(env.client, AgentApiSettings())
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://x") as http:
        resp = await http.get(f"{PREFIX}/c1", headers={"Authorization": "Bearer gat_anything"})
        assert resp.status_code == 403
