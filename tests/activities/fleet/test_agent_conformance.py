"""The agent API against the bodies kas-fleet-manager's own tests and OpenAPI hold (under
`upstream/`, each naming its upstream path): what a real kas-fleetshard or a generated Go client
sends is taken, and growth answers as upstream does."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from temporalio.testing import WorkflowEnvironment

from activities.fleet.settings import AgentApiSettings
from scaling.fleet.contracts import SIGNAL_DEPROVISION, SIGNAL_INSTANCE_PLACED, SIGNAL_INSTANCE_RELEASED
from scaling.fleet.lifecycle import DataPlaneClusterState
from scaling.fleet.models import ClusterPhase, ManagedInstance
from tests.activities.fleet.test_agent_api import api
from tests.polling import until
from tests.workflows.fleet.stubs import FleetWorld
from tests.workflows.fleet.test_cluster import cluster_input, in_phase, running
from workflows.fleet.cluster import DataPlaneClusterWorkflow

UPSTREAM = Path(__file__).parent / "upstream"


def upstream(name: str) -> Any:
    return yaml.safe_load((UPSTREAM / name).read_text())


async def status(handle) -> DataPlaneClusterState:  # type: ignore[no-untyped-def]
    return await handle.query(DataPlaneClusterWorkflow.status)


async def test_go_client_report_with_an_extra_type_and_omitted_zero_makes_the_cluster_ready(
    env: WorkflowEnvironment, settings: AgentApiSettings
) -> None:
    inp = cluster_input()
    async with running(env, FleetWorld(), inp) as handle, api(env, settings, inp.cluster_id) as http:
        await until(lambda: in_phase(handle, ClusterPhase.WAITING))
        config = (await http.get("")).json()
        schema = upstream("agent_config_schema.yaml")
        assert set(config) == set(schema) and set(config["spec"]) == set(schema["spec"])
        assert config["spec"]["capacity"] == schema["spec"]["capacity"]

        resp = await http.put("/status", json=upstream("agent_status_standard_developer.yaml"))
        assert resp.status_code == 204, resp.text  # developer is ignored, not refused
        st = await status(handle)
        assert st.phase == ClusterPhase.READY
        assert set(st.capacity) == {"standard"}
        cap = st.capacity["standard"]
        assert (cap.max_nodes, cap.max_units, cap.remaining_units) == (18, 4, 0)  # omitted = 0

        resp = await http.put("/status", json=upstream("agent_status_with_strimzi.yaml"))
        assert resp.status_code == 204, resp.text
        st = await status(handle)
        assert st.strimzi_versions == ["strimzi-cluster-operator.v0.23.0-0", "strimzi-cluster-operator.v0.21.0-0"]
        assert (st.capacity["standard"].max_units, st.capacity["standard"].remaining_units) == (5, 3)

        # No Ready condition: not ready (upstream reads it so), taken with 204.
        resp = await http.put("/status", json={"capacity": {"standard": {"maxUnits": 5}}})
        assert resp.status_code == 204, resp.text
        st = await status(handle)
        assert st.phase == ClusterPhase.WAITING and st.capacity["standard"].remaining_units == 3  # not stored
        await handle.terminate()


@pytest.mark.parametrize(
    ("entry", "field"),
    [
        ({"version": "", "ready": True, "kafkaVersions": ["3.6.0"], "kafkaIbpVersions": ["3.6"]}, "version"),
        ({"version": "v1", "ready": True, "kafkaIbpVersions": ["3.6"]}, "kafkaVersions"),
        ({"version": "v1", "ready": True, "kafkaVersions": ["3.6.0"], "kafkaIbpVersions": []}, "kafkaIbpVersions"),
    ],
)
async def test_strimzi_entries_are_validated_as_upstream_does(
    env: WorkflowEnvironment, settings: AgentApiSettings, entry: dict, field: str
) -> None:
    inp = cluster_input()
    async with running(env, FleetWorld(), inp) as handle, api(env, settings, inp.cluster_id) as http:
        await until(lambda: in_phase(handle, ClusterPhase.WAITING))
        good = {"version": "v0", "ready": True, "kafkaVersions": ["3.5.0"], "kafkaIbpVersions": ["3.5"]}
        body = {**upstream("agent_status_standard_developer.yaml"), "strimzi": [good, entry]}
        resp = await http.put("/status", json=body)
        assert resp.status_code == 400
        err = resp.json()
        # services' FieldValidationError (pkg/errors/errors.go: code 37)
        assert err["code"] == "KAFKAS-MGMT-37" and err["kind"] == "Error"
        assert err["reason"] == f"Field validation failed: .status.strimzi[1].{field} cannot be empty"
        st = await status(handle)
        assert st.reports == 0 and st.phase == ClusterPhase.WAITING
        await handle.terminate()


async def test_reports_while_deprovisioning_are_taken_and_change_nothing(
    env: WorkflowEnvironment, settings: AgentApiSettings
) -> None:
    inp = cluster_input()
    async with running(env, FleetWorld(), inp) as handle, api(env, settings, inp.cluster_id) as http:
        await until(lambda: in_phase(handle, ClusterPhase.WAITING))
        assert (await http.put("/status", json=upstream("agent_status_standard_developer.yaml"))).status_code == 204
        await handle.signal(SIGNAL_DEPROVISION)
        await until(lambda: in_phase(handle, ClusterPhase.DEPROVISIONING))
        before = await status(handle)
        not_ready = {"conditions": [{"type": "Ready", "status": "False"}], "capacity": {"standard": {"maxUnits": 1}}}
        for body in (not_ready, upstream("agent_status_with_strimzi.yaml")):
            resp = await http.put("/status", json=body)
            assert resp.status_code == 204, resp.text
        after = await status(handle)
        assert after.phase == ClusterPhase.DEPROVISIONING
        assert (after.capacity, after.agent_ready, after.strimzi_versions, after.reports) == (
            before.capacity,
            before.agent_ready,
            before.strimzi_versions,
            before.reports,
        )
        await handle.terminate()


def test_the_fake_agent_sends_kas_fleetshards_shape() -> None:
    """sim/fleet's agent reads spec.capacity and sends what kas-fleetshard's sync sends."""
    from sim.fleet.agent import FakeAgent

    agent = FakeAgent("http://127.0.0.1:9", "c1", "t", units_per_node={"standard": 0.5})
    try:
        config = upstream("agent_config_schema.yaml")
        config["spec"]["capacity"] = {"standard": {"maxNodes": 8}}
        labels = {"bf2.org/kafkaInstanceProfileType": "standard", "bf2.org/kafkaInstanceProfileQuotaConsumed": "4"}
        body = agent.status(config, [{"metadata": {"labels": labels}}])
        shape = upstream("fleetshard_agent_status.yaml")
        assert set(body) == set(shape)
        assert body["capacity"] == {"standard": {"maxUnits": 4, "remainingUnits": 0}}
        assert set(body["conditions"][0]) == set(shape["conditions"][0])
        assert set(body["strimzi"][0]) == set(shape["strimzi"][0])
        assert all(s["version"] and s["kafkaVersions"] and s["kafkaIbpVersions"] for s in body["strimzi"])
    finally:
        agent.stop()


async def test_kas_fleetshards_report_is_taken(env: WorkflowEnvironment, settings: AgentApiSettings) -> None:
    inp = cluster_input()
    async with running(env, FleetWorld(), inp) as handle, api(env, settings, inp.cluster_id) as http:
        await until(lambda: in_phase(handle, ClusterPhase.WAITING))
        resp = await http.put("/status", json=upstream("fleetshard_agent_status.yaml"))
        assert resp.status_code == 204, resp.text
        st = await status(handle)
        assert st.phase == ClusterPhase.READY and set(st.capacity) == {"standard"}
        assert (st.capacity["standard"].max_units, st.capacity["standard"].remaining_units) == (6, 0)
        await handle.terminate()


def keys(d: dict, prefix: str = "") -> set[str]:
    out: set[str] = set()
    for k, v in d.items():
        out.add(prefix + k)
        if isinstance(v, dict) and k not in ("annotations", "labels"):
            out |= keys(v, prefix + k + ".")
    return out


async def test_instances_move_placed_ready_deleted_on_the_agents_reports(
    env: WorkflowEnvironment, settings: AgentApiSettings
) -> None:
    inp = cluster_input()
    async with running(env, FleetWorld(), inp) as handle, api(env, settings, inp.cluster_id) as http:
        await until(lambda: in_phase(handle, ClusterPhase.WAITING))
        assert (await http.put("/status", json=upstream("agent_status_with_strimzi.yaml"))).status_code == 204
        await handle.signal(
            SIGNAL_INSTANCE_PLACED,
            ManagedInstance(id="k1", instance_type="standard", size="x2", units=2, quota=3, cluster_id=inp.cluster_id),
        )
        await until(lambda: _has_instance(handle, "k1"))

        items = {i["id"]: i for i in (await http.get("/kafkas")).json()["items"]}
        example = upstream("managed_kafka_example.yaml")
        real, reserved = items["k1"], items["reserved-kafka-standard-1"]
        for item in (real, reserved):
            assert keys(example) <= keys(item)
            assert item["metadata"]["annotations"]["bf2.org/id"] == item["id"]
            assert item["spec"]["versions"] == {
                "kafka": "2.7.0",
                "strimzi": "strimzi-cluster-operator.v0.23.0-0",
                "kafkaIbp": "2.7",
            }
        assert real["metadata"]["labels"]["bf2.org/kafkaInstanceProfileQuotaConsumed"] == "3"  # quota, not units
        assert reserved["metadata"]["labels"]["bf2.org/kafkaInstanceProfileQuotaConsumed"] == "1"  # no quota: units
        assert "bf2.org/deployment" not in real["metadata"]["labels"] and real["spec"]["deleted"] is False
        assert reserved["metadata"]["labels"]["bf2.org/deployment"] == "reserved"
        assert reserved["metadata"]["annotations"]["bf2.org/placementId"] == "reserved-kafka-standard-1"

        statuses = upstream("kafka_statuses.yaml")
        body = {"k1": statuses["ready"], "reserved-kafka-standard-1": statuses["ready"], "no-such": statuses["ready"]}
        assert (await http.put("/kafkas/status", json=body)).status_code == 200
        (k1,) = (await status(handle)).instances
        assert k1.phase == "ready" and k1.versions.kafka == "2.7.0"

        await handle.signal(SIGNAL_INSTANCE_RELEASED, "k1")
        await until(lambda: _instance_deleting(handle, "k1"))
        (item,) = [i for i in (await http.get("/kafkas")).json()["items"] if i["id"] == "k1"]
        assert item["spec"]["deleted"] is True
        assert (await http.put("/kafkas/status", json={"k1": statuses["deleted"]})).status_code == 200
        st = await status(handle)
        assert st.instances == [] and st.deleted_instances == ["k1"]
        assert (await http.put("/kafkas/status", content=b"[]")).status_code == 400
        await handle.terminate()


async def _has_instance(handle, iid: str) -> bool:  # type: ignore[no-untyped-def]
    return any(i.id == iid for i in (await status(handle)).instances)


async def _instance_deleting(handle, iid: str) -> bool:  # type: ignore[no-untyped-def]
    return any(i.id == iid and i.deleted for i in (await status(handle)).instances)
