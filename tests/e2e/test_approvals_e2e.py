"""End to end: approval gates on the nodes loop, steered with `growth nodes approvals | approve | deny`.

Dev server (search attributes registered) + simulated cluster + the real worker. Group `gated`
asks for approval for any scale-up (nodesAbove 0); group `free` has no gate, and gets its node
while `gated` waits: nothing else waits behind a gate.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable

from kubernetes import client
from temporalio.client import Client, WorkflowHandle

from scaling.nodes.models import AttemptResult, RequestPhase
from scaling.nodes.scale_up.requests import split_request_id
from scaling.nodes.status import AutoscalerStatus
from starters.kube import apply_node_group, deployment, node_group
from tests.cli import growth
from tests.e2e.conftest import LocalCluster
from tests.polling import until
from workflows.nodes.autoscaler import NodeAutoscalerWorkflow, autoscaler_id

CLUSTER = "e2e-approvals"


async def cli(lc: LocalCluster, *args: str, expect: int = 0) -> str:
    proc = await growth("--config", str(lc.config_path), "nodes", "--cluster", CLUSTER, *args, expect=expect)
    return proc.stdout + proc.stderr


async def test_a_gated_scale_up_waits_for_approve_and_deny(local_cluster: Callable[..., LocalCluster]) -> None:
    lc = local_cluster({"kwok": {}})
    pool = [{"provider": "kwok", "serverType": ["cx22"], "priority": 100}]
    gate = {"nodesAbove": 0, "timeout": "1h", "default": "deny"}
    apply_node_group(lc.api, node_group("gated", pool, labels={"tier": "gated"}, approval=gate))
    apply_node_group(lc.api, node_group("free", pool, labels={"tier": "free"}))
    tc: Client = await lc.temporal.client()
    handle: WorkflowHandle = tc.get_workflow_handle(autoscaler_id(CLUSTER))

    async def status() -> AutoscalerStatus:
        return await handle.query(NodeAutoscalerWorkflow.status)

    async def awaiting() -> list[dict]:
        return json.loads(await cli(lc, "approvals", "-o", "json"))["approvals"]

    ids: list[str] = []
    try:
        await cli(lc, "start", "--scan-interval", "0.5", "--request-ttl", "30", "--search-attributes")
        assert await cli(lc, "approvals") == "nothing awaits approval\n"
        apps = client.AppsV1Api(lc.api)
        for name, tier in (("web", "gated"), ("batch", "free")):
            body = deployment(name, 1, "500m", "512Mi", nodeSelector={"tier": tier})
            await asyncio.to_thread(apps.create_namespaced_deployment, "default", body)

        [first] = await until(awaiting, 60, "a NodeRequest of group gated awaiting approval")
        ids.append(first["id"])
        assert "1 nodes for group gated in one loop (approval above 0)" in first["reason"]
        # A NodeRequestBatch (or, from a loop recorded before batches, a NodeRequest): listed once.
        assert first["default"] == "deny" and first["what"].startswith("NodeRequest")
        assert "cx22" in first["what"] and "for group gated, pool kwok-cx22" in first["what"]
        table = await cli(lc, "approvals")
        assert first["id"] in table and "deny at" in table
        # The free group's pod got its node meanwhile; the gated one's pod is held, not planned twice.
        free = await until(lambda: _finished_in(status, "free", RequestPhase.READY), 60, "group free's node")
        ids.append(free.id)
        s = await status()
        gated = [r for r in s.in_flight if r.group == "gated"]
        assert [(split_request_id(r.id)[0], r.phase) for r in gated] == [(first["id"], RequestPhase.AWAITING_APPROVAL)]
        events = await asyncio.to_thread(client.CoreV1Api(lc.api).list_namespaced_event, "default")
        assert any(e.reason == "ScaleUpAwaitingApproval" and first["id"] in e.message for e in events.items)

        # Refused with exit code 2: an unknown id; then deny it, and a second decision is refused too.
        assert "not a running workflow awaiting approval" in await cli(lc, "approve", "000999-none", expect=2)
        short = first["id"].rsplit("/", 1)[1]
        assert f"{first['id']}: denied" in await cli(lc, "deny", short, "--note", "not now")
        assert "already denied (by operator)" in await cli(lc, "approve", short, expect=2)
        denied = await until(lambda: _finished_in(status, "gated", RequestPhase.UNMET), 60, "the denial")
        assert [a.result for a in denied.attempts] == [AttemptResult.DENIED]
        assert denied.message.startswith("Denied by operator: not now")
        # The denied pool backs off (5 min): later loops do not ask again for the same pod.
        later = (await status()).iterations + 3
        s = await until(lambda: _after_loop(status, later), 60, "three more loops")
        assert "gated/kwok-cx22" in s.backoff_until
        assert not [r for r in s.in_flight if r.group == "gated"]

        # Approved: a second gated workload (its own group, so no backoff) gets its node.
        apply_node_group(lc.api, node_group("gated2", pool, labels={"tier": "gated2"}, approval=gate))
        body = deployment("api", 1, "500m", "512Mi", nodeSelector={"tier": "gated2"})
        await asyncio.to_thread(apps.create_namespaced_deployment, "default", body)
        second = await until(
            lambda: _waiting_in(awaiting, "gated2"), 60, "a NodeRequest of group gated2 awaiting approval"
        )
        ids.append(second["id"])
        assert f"{second['id']}: approved" in await cli(lc, "approve", second["id"])
        ready = await until(lambda: _finished_in(status, "gated2", RequestPhase.READY), 60, "the approved node")
        assert ready.approval is not None and ready.approval.by == "operator"
    finally:
        s = None
        try:
            s = await status()
        except Exception:  # noqa: BLE001 - the loop may be gone
            pass
        if s is not None:
            ids += [split_request_id(r.id)[0] for r in s.in_flight + s.recent]
        for wf_id in [autoscaler_id(CLUSTER), *set(ids)]:
            try:
                await tc.get_workflow_handle(wf_id).terminate("test over")
            except Exception:  # noqa: BLE001 - already finished is fine
                pass


async def _after_loop(status: Callable, iterations: int) -> AutoscalerStatus | None:
    s: AutoscalerStatus = await status()
    return s if s.iterations >= iterations else None


async def _finished_in(status: Callable, group: str, phase: RequestPhase):  # noqa: ANN202
    s: AutoscalerStatus = await status()
    return next((r for r in s.recent if r.group == group and r.phase == phase), None)


async def _waiting_in(awaiting: Callable, group: str) -> dict | None:
    return next((a for a in await awaiting() if f"for group {group}," in a["what"]), None)
