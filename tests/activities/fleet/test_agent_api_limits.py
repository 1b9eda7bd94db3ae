"""Hostile and oversized input at the agent API: refused in kas-fleet-manager's error shape
before any workflow sees it, and the cluster's workflow keeps serving its real agent.

Upstream facts ported here: pkg/errors/errors.go (codes 7 NotFound/404, 9 General/5xx,
10 NotImplemented/405, 21 BadRequest for any other 4xx; href /api/kafkas_mgmt/v1/errors/<n>);
the generated private model (internal/kafka/internal/api/private/
model_data_plane_cluster_update_status_request_capacity.go: MaxUnits int32), which Go's
encoding/json fills: it refuses true, "18", 18.0 and 2**31, ignores unknown fields and leaves a
field at zero for null."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from temporalio.testing import WorkflowEnvironment

from activities.fleet.agent_api import MAX_BODY_BYTES, PREFIX, create_app
from activities.fleet.settings import AgentApiSettings
from activities.fleet.tokens import AgentTokens
from scaling.fleet import contracts
from scaling.fleet.contracts import MAX_MESSAGE_CHARS, AgentStatusReport
from scaling.fleet.lifecycle import DataPlaneClusterState
from scaling.fleet.models import ClusterPhase
from tests.activities.fleet.test_agent_api import api, body, waiting_cluster
from tests.polling import until
from tests.workflows.fleet.stubs import FleetWorld
from tests.workflows.fleet.test_cluster import cluster_input, in_phase, running
from workflows.fleet.cluster import DataPlaneClusterWorkflow

FIVE_MB = 5 * 1024 * 1024


def upstream_error(resp: httpx.Response, status: int, code: int) -> str:
    """The reason of an error answered in kas-fleet-manager's shape with `status` and `code`."""
    assert resp.status_code == status, resp.text
    assert resp.headers["content-type"] == "application/json"
    err = resp.json()
    assert err == {
        "kind": "Error",
        "id": str(code),
        "href": f"/api/kafkas_mgmt/v1/errors/{code}",
        "code": f"KAFKAS-MGMT-{code}",
        "reason": err["reason"],
    }
    return err["reason"]


async def still_serving(handle: Any, http: httpx.AsyncClient) -> None:
    """The real agent's next report is taken: the workflow was never harmed."""
    assert (await http.put("/status", json=body(max_units=12, remaining=9))).status_code == 204
    assert await in_phase(handle, ClusterPhase.READY)


async def test_oversized_bodies_are_413_unread_and_the_cluster_keeps_serving(
    env: WorkflowEnvironment, settings: AgentApiSettings
) -> None:
    async with waiting_cluster(env, settings) as (handle, http):
        huge = body()
        huge["conditions"][0]["message"] = "x" * FIVE_MB
        reason = upstream_error(await http.put("/status", json=huge), 413, 21)
        assert "1 MiB" in reason

        async def chunks() -> Any:  # no Content-Length: counted while read
            for _ in range(5):
                yield b" " * (1024 * 1024)

        upstream_error(await http.put("/status", content=chunks()), 413, 21)
        upstream_error(await http.put("/kafkas/status", content=b"{" + b" " * FIVE_MB), 413, 21)
        # under the body limit, but decoded ({} -> a condition of four fields) over the update's
        many_empty = b'{"conditions": [' + b",".join([b"{}"] * 300_000) + b"]}"
        assert len(many_empty) < MAX_BODY_BYTES
        reason = upstream_error(await http.put("/status", content=many_empty), 413, 21)
        assert "once decoded" in reason
        st: DataPlaneClusterState = await handle.query(DataPlaneClusterWorkflow.status)
        assert st.reports == 0
        await still_serving(handle, http)
        await handle.terminate()


async def test_free_text_is_cut_before_it_reaches_the_workflow(
    env: WorkflowEnvironment, settings: AgentApiSettings
) -> None:
    long = body(ready=False)
    long["conditions"][0]["message"] = "m" * 500_000
    long["conditions"][0]["reason"] = "r" * 10_000
    parsed = AgentStatusReport.model_validate(long)
    assert len(parsed.conditions[0].message) == MAX_MESSAGE_CHARS
    assert len(parsed.conditions[0].reason) == contracts.MAX_NAME_CHARS
    async with waiting_cluster(env, settings) as (handle, http):
        assert (await http.put("/status", json=long)).status_code == 204
        history = await handle.fetch_history()
        assert len(history.to_json()) < 100_000  # the half-megabyte message was never sent
        await still_serving(handle, http)
        await handle.terminate()


@pytest.mark.parametrize(
    "value",
    [True, "18", 18.0, 18.5, 2**31, 2**70, -1, [18], {"n": 18}],
    ids=["bool", "string", "float", "fraction", "int32+1", "2**70", "negative", "list", "object"],
)
async def test_integers_decode_as_go_does(env: WorkflowEnvironment, settings: AgentApiSettings, value: Any) -> None:
    async with api(env, settings, "any-cluster") as http:
        bad = {"capacity": {"standard": {"maxUnits": value, "remainingUnits": 0}}}
        reason = upstream_error(await http.put("/status", json=bad), 400, 17)
        assert reason.startswith("capacity.standard.maxUnits"), reason


def test_go_leniency_is_kept() -> None:
    """What Go's decoder accepts, growth accepts: unknown fields, nulls (zero), 2**31 - 1."""
    report = AgentStatusReport.model_validate_json(
        b'{"conditions": null, "capacity": {"standard": {"maxUnits": 2147483647, "remainingUnits": null,'
        b' "futureField": 1}}, "strimzi": [{"version": "0.3", "ready": true, "kafkaVersions": null}],'
        b' "nodeInfo": {"ceiling": "anything"}}'
    )
    assert report.conditions == [] and report.capacity["standard"].max_units == 2**31 - 1
    assert report.capacity["standard"].remaining_units == 0 and report.strimzi[0].kafka_versions == []
    with pytest.raises(ValueError, match="ready"):
        AgentStatusReport.model_validate_json(b'{"strimzi": [{"version": "0.3", "ready": "true"}]}')


async def test_framework_answers_are_in_upstream_shape(env: WorkflowEnvironment, settings: AgentApiSettings) -> None:
    async with api(env, settings, "c1") as http:
        assert "doesn't exist" in upstream_error(await http.get("/no-such-path"), 404, 7)
        upstream_error(await http.post("/status", json={}), 405, 10)
        upstream_error(await http.delete(""), 405, 10)
        reason = upstream_error(
            await http.put("/status", content=b"<xml/>", headers={"Content-Type": "application/xml"}), 415, 21
        )
        assert "application/json" in reason
        upstream_error(await http.put("/status", content=b"not json"), 400, 17)


async def test_unexpected_failure_is_a_500_in_upstream_shape(settings: AgentApiSettings) -> None:
    class Broken:
        def get_workflow_handle(self, _: str) -> None:
            raise RuntimeError("bug")

    app = create_app(Broken(), settings)  # type: ignore[arg-type]
    token = AgentTokens(settings).token_for("c1")
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://x") as http:
        resp = await http.get(f"{PREFIX}/c1", headers={"Authorization": f"Bearer {token}"})
        assert upstream_error(resp, 500, 9) == "Unspecified error"


async def test_a_workflow_that_cannot_answer_is_a_json_503(
    env: WorkflowEnvironment, settings: AgentApiSettings
) -> None:
    """No worker polls the cluster's task queue: the update and the query time out."""
    inp = cluster_input()
    await env.client.start_workflow(
        contracts.CLUSTER_WORKFLOW, inp, id=contracts.cluster_workflow_id(inp.cluster_id), task_queue="nobody-polls"
    )
    quick = settings.model_copy(update={"temporal_timeout_s": 1.0})
    async with api(env, quick, inp.cluster_id) as http:
        reason = upstream_error(await http.put("/status", json=body()), 503, 9)
        assert inp.cluster_id in reason and "try again" in reason
        upstream_error(await http.get(""), 503, 9)


async def test_a_deleted_cluster_is_400_on_every_endpoint_without_a_replay(
    env: WorkflowEnvironment, settings: AgentApiSettings
) -> None:
    inp = cluster_input()
    async with running(env, FleetWorld(), inp) as handle:
        await until(lambda: in_phase(handle, ClusterPhase.WAITING))
        await handle.terminate()
    # the worker is gone: an answer that needed the closed workflow replayed would time out
    quick = settings.model_copy(update={"temporal_timeout_s": 2.0})
    async with api(env, quick, inp.cluster_id) as http:
        want = f"cluster agent with ID '{inp.cluster_id}' not found"
        assert upstream_error(await http.get(""), 400, 21) == want
        assert upstream_error(await http.get("/kafkas"), 400, 21) == want
        assert upstream_error(await http.put("/status", json=body()), 400, 21) == want
        assert upstream_error(await http.put("/kafkas/status", json={}), 400, 21) == want
        statuses = {"k1": {"conditions": [{"type": "Ready", "status": "True"}]}}
        assert upstream_error(await http.put("/kafkas/status", json=statuses), 400, 21) == want


async def test_tokens_are_revoked_per_cluster(
    env: WorkflowEnvironment, settings: AgentApiSettings, tmp_path: Path
) -> None:
    revoked = tmp_path / "revoked.yaml"
    with_list = settings.model_copy(update={"revoked_clusters_file": str(revoked)})
    async with api(env, with_list, "c1") as http:
        assert (await http.get("")).status_code == 400  # accepted; no such cluster
        revoked.write_text("- c1\n")
        assert "revoked" in upstream_error(await http.get(""), 403, 4)
    assert not AgentTokens(with_list).revoked("c2")


def test_secret_rotation_accepts_the_old_tokens_within_the_window(tmp_path: Path) -> None:
    (tmp_path / "old").write_text("old-secret")
    (tmp_path / "new").write_text("new-secret")
    old = AgentTokens(AgentApiSettings(token_secret_file=str(tmp_path / "old"))).token_for("c1")
    rotated = AgentApiSettings(
        token_secret_file=str(tmp_path / "new"),
        previous_token_secret_file=str(tmp_path / "old"),
        previous_secret_until=datetime.now(UTC) + timedelta(hours=1),
    )
    tokens = AgentTokens(rotated)
    assert tokens.token_for("c1") != old  # new clusters get the new secret's token
    assert tokens.verify("c1", old) and tokens.verify("c1", tokens.token_for("c1"))
    assert not tokens.verify("c2", old)
    expired = AgentTokens(
        rotated.model_copy(update={"previous_secret_until": datetime.now(UTC) - timedelta(seconds=1)})
    )
    assert not expired.verify("c1", old) and expired.verify("c1", tokens.token_for("c1"))
