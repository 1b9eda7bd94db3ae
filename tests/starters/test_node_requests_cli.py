"""`growth nodes request | approvals | approve | deny | cancel-request` with batch, member and old
request ids, on the dev server (search attributes registered). The requests are stand-ins that
keep the shared interface (type names, `describe`, `approve`/`deny` with validators, the
GrowthCluster and GrowthPhase attributes), so the CLI is tested apart from the loop."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from temporalio import workflow
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from activities.settings import Settings, TemporalSettings
from scaling.approvals import ApprovalState, decision_refused
from scaling.nodes.models import RequestPhase
from scaling.nodes.scale_up.requests import (
    NODE_REQUEST_BATCH_WORKFLOW,
    NODE_REQUEST_WORKFLOW,
    NodeRequestBatchStatus,
    NodeRequestStatus,
    member_id,
)
from starters.cli import MISSING, REFUSED, CliError, invoke
from tests.cli import growth
from tests.polling import until
from tests.workflows.workers import new_worker
from workflows.nodes.autoscaler import autoscaler_id
from workflows.search import CLUSTER, PHASE


def _decide(approval: ApprovalState | None, awaiting: bool, approve: bool, note: str) -> str:
    refused = decision_refused(awaiting, approval, workflow.info().workflow_id)
    if refused:
        raise ValueError(refused)
    assert approval is not None
    approval.decision, approval.by, approval.note = ("approved" if approve else "denied"), "operator", note
    return f"{workflow.info().workflow_id}: {approval.decision}"


@workflow.defn(name=NODE_REQUEST_BATCH_WORKFLOW, sandboxed=False)
class StandInBatch:
    @workflow.init
    def __init__(self, status: NodeRequestBatchStatus) -> None:
        self.status = status

    @workflow.query
    def describe(self) -> NodeRequestBatchStatus:
        return self.status

    def _awaiting(self) -> bool:
        return self.status.approval is not None and not self.status.approval.decision

    @workflow.update
    def approve(self, note: str = "") -> str:
        return self._decision(True, note)

    @approve.validator
    def _validate_approve(self, note: str = "") -> None:
        self._refuse()

    @workflow.update
    def deny(self, note: str = "") -> str:
        return self._decision(False, note)

    @deny.validator
    def _validate_deny(self, note: str = "") -> None:
        self._refuse()

    def _refuse(self) -> None:
        refused = decision_refused(self._awaiting(), self.status.approval, workflow.info().workflow_id)
        if refused:
            raise ValueError(refused)

    def _decision(self, approve: bool, note: str) -> str:
        text = _decide(self.status.approval, True, approve, note)
        for m in self.status.members:
            m.phase = RequestPhase.PROVISIONING if approve else RequestPhase.UNMET
        return text

    @workflow.run
    async def run(self, status: NodeRequestBatchStatus) -> None:
        workflow.upsert_search_attributes([CLUSTER.value_set(status.cluster), PHASE.value_set(status.members[0].phase)])
        await workflow.wait_condition(lambda: not self._awaiting())
        workflow.upsert_search_attributes([PHASE.value_set(self.status.members[0].phase.value)])
        await workflow.wait_condition(lambda: False)  # until the test terminates it


@workflow.defn(name=NODE_REQUEST_WORKFLOW, sandboxed=False)
class StandInRequest:
    @workflow.init
    def __init__(self, status: NodeRequestStatus) -> None:
        self.status = status

    @workflow.query
    def describe(self) -> NodeRequestStatus:
        return self.status

    @workflow.update
    def approve(self, note: str = "") -> str:
        return _decide(self.status.approval, self.status.phase == RequestPhase.AWAITING_APPROVAL, True, note)

    @workflow.update
    def deny(self, note: str = "") -> str:
        return _decide(self.status.approval, self.status.phase == RequestPhase.AWAITING_APPROVAL, False, note)

    @workflow.run
    async def run(self, status: NodeRequestStatus) -> None:
        cluster = status.id.split("/")[1]
        workflow.upsert_search_attributes([CLUSTER.value_set(cluster), PHASE.value_set(status.phase.value)])
        await workflow.wait_condition(lambda: False)


@workflow.defn(name="NodeAutoscaler", sandboxed=False)
class StandInLoop:
    """The loop's `cancel_request` update: what id reached it."""

    def __init__(self) -> None:
        self.cancelled: list[str] = []

    @workflow.update
    def cancel_request(self, request_id: str) -> str:
        self.cancelled.append(request_id)
        return f"cancel sent to {request_id}"

    @workflow.query
    def cancelled_ids(self) -> list[str]:
        return self.cancelled

    @workflow.run
    async def run(self) -> None:
        await workflow.wait_condition(lambda: False)


def _member(batch_id: str, index: int, phase: RequestPhase, **fields: object) -> NodeRequestStatus:
    return NodeRequestStatus(
        id=member_id(batch_id, index),
        group="web",
        phase=phase,
        current_pool="kwok-cx22",
        server_type="cx22",
        provider="kwok",
        pods={"shape-a": 3},
        started_at=datetime(2026, 11, 26, 10, 0, tzinfo=UTC),
        **fields,  # type: ignore[arg-type]
    )


def _wait(step: str) -> ApprovalState:
    deadline = datetime.now(UTC) + timedelta(hours=1)
    return ApprovalState(
        reason="3 nodes for group web in one loop (approval above 0)", step=step, deadline=deadline, default="deny"
    )


async def test_request_approvals_decisions_and_cancel_with_batch_and_member_ids(
    search_env: WorkflowEnvironment,
) -> None:
    client: Client = search_env.client
    cluster = f"cli-{uuid.uuid4().hex[:6]}"
    tq = f"node-requests-cli-{uuid.uuid4().hex[:6]}"
    settings = Settings(temporal=TemporalSettings(task_queue=tq))
    prefix = f"{autoscaler_id(cluster)}/request"
    batch_id, old_id, done_id = f"{prefix}/000001-ab12", f"{prefix}/000002-cd34", f"{prefix}/000003-ef56"

    async def cli(*argv: str) -> str:
        return await invoke(client, settings, ["nodes", "--cluster", cluster, *argv])

    batch = NodeRequestBatchStatus(
        id=batch_id,
        cluster=cluster,
        group="web",
        members=[_member(batch_id, i, RequestPhase.AWAITING_APPROVAL) for i in range(3)],
        approval=_wait("kwok-cx22"),
    )
    old = _member(old_id, 0, RequestPhase.AWAITING_APPROVAL, approval=_wait("kwok-cx32")).model_copy(
        update={"id": old_id, "server_type": "cx32"}
    )
    ready = NodeRequestBatchStatus(
        id=done_id,
        cluster=cluster,
        group="web",
        members=[
            _member(done_id, 0, RequestPhase.READY, node_name="n-0"),
            _member(done_id, 1, RequestPhase.PROVISIONING),
        ],
    )
    started = []
    async with new_worker(client, tq, workflows=[StandInBatch, StandInRequest, StandInLoop]):
        try:
            for wf, arg, wf_id in (
                (StandInBatch.run, batch, batch_id),
                (StandInRequest.run, old, old_id),
                (StandInBatch.run, ready, done_id),
                (StandInLoop.run, None, autoscaler_id(cluster)),
            ):
                args = [] if arg is None else [arg]
                started.append(await client.start_workflow(wf, *args, id=wf_id, task_queue=tq))

            # describe: a batch with every member, one member by its short id, an old request.
            whole = json.loads(await cli("request", "000003-ef56", "-o", "json"))
            assert whole["kind"] == "NodeRequestBatch" and whole["member"] is None and whole["batch_size"] == 2
            assert [m["id"] for m in whole["members"]] == [f"{done_id}#0", f"{done_id}#1"]
            text = await cli("request", "000003-ef56")
            assert f"NodeRequestBatch {done_id}: 2 node(s)" in text
            assert f"{done_id}#0  pool kwok-cx22  Ready  node n-0  3 pod(s)" in text and f"{done_id}#1" in text
            one = json.loads(await cli("request", "000003-ef56#1", "-o", "json"))
            assert one["member"] == 1 and [m["id"] for m in one["members"]] == [f"{done_id}#1"]
            assert one["members"][0]["phase"] == "Provisioning" and one["batch_size"] == 2
            assert f"{done_id}#0" not in await cli("request", f"{done_id}#1")  # the full member id too
            plain = json.loads(await cli("request", "000002-cd34", "-o", "json"))
            assert plain["kind"] == "NodeRequest" and [m["id"] for m in plain["members"]] == [old_id]
            with pytest.raises(CliError, match="no member #7 in") as err:
                await cli("request", "000003-ef56#7")
            assert err.value.code == MISSING
            with pytest.raises(CliError, match="is a NodeRequest, it has no member #0") as err:
                await cli("request", "000002-cd34#0")
            assert err.value.code == REFUSED
            with pytest.raises(CliError, match="no NodeRequest or NodeRequestBatch") as err:
                await cli("request", "000999-none")
            assert err.value.code == MISSING

            # approvals: the batch (once, for all its members) beside the old request.
            async def both_listed() -> list[dict] | None:
                found = json.loads(await cli("approvals", "-o", "json"))["approvals"]
                return found if len(found) == 2 else None

            waits = await until(both_listed, 30, "the batch and the old request awaiting approval")
            assert [w["id"] for w in waits] == [batch_id, old_id]
            assert waits[0]["what"] == (
                "NodeRequestBatch 3 × cx22 for group web, pool kwok-cx22 (one decision covers every member)"
            )
            assert waits[1]["what"] == "NodeRequest cx32 for group web, pool kwok-cx32"
            assert "awaiting approval" in await cli("request", "000001-ab12#2")

            # A member's id approves its whole batch, and says so; a second decision is refused.
            out = await cli("approve", "000001-ab12#2", "--note", "go")
            assert out == f"{batch_id}: approved (the decision covers every member of batch {batch_id})"
            view = json.loads(await cli("request", "000001-ab12", "-o", "json"))
            assert {m["phase"] for m in view["members"]} == {"Provisioning"}
            assert view["approval"]["decision"] == "approved" and view["approval"]["note"] == "go"
            with pytest.raises(CliError, match="already approved") as err:
                await cli("deny", batch_id)
            assert err.value.code == REFUSED
            with pytest.raises(CliError, match="not a running workflow awaiting approval") as err:
                await cli("deny", "000999-none#1")
            assert err.value.code == REFUSED
            # The old request's decision reads as before (as an operator runs it, in its own process).
            server = ["--address", client.service_client.config.target_host, "--task-queue", tq]
            proc = await growth(*server, "nodes", "--cluster", cluster, "deny", "000002-cd34")
            assert proc.stdout.strip() == f"{old_id}: denied"

            async def only_none_left() -> bool:
                return await cli("approvals") == "nothing awaits approval"

            await until(only_none_left, 30, "nothing left awaiting approval")

            # cancel-request hands member, batch and old ids (short or full) to the loop unchanged.
            for given, full in (("000003-ef56#1", f"{done_id}#1"), (done_id, done_id), ("000002-cd34", old_id)):
                assert await cli("cancel-request", given) == f"cancel sent to {full}"
            loop = client.get_workflow_handle(autoscaler_id(cluster))
            assert await loop.query(StandInLoop.cancelled_ids) == [f"{done_id}#1", done_id, old_id]
        finally:
            for handle in started:
                await handle.terminate("test over")
