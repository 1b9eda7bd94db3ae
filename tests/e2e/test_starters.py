"""End to end: `growth nodes` steering a real NodeAutoscaler.

Dev server + simulated cluster + the real worker (fixtures in conftest.py); every command runs
as a subprocess with the same settings file as the worker, exactly as an operator would.
Nodes of pool kwok-cx32 never become Ready here, so a request on that pool stays in flight
long enough to be cancelled.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
from collections.abc import Callable
from typing import Any

import pytest
import yaml
from kubernetes import client
from temporalio.client import Client, WorkflowHandle

from activities.settings import load_settings
from scaling.nodes.explain import ExplainNodeInput, when
from scaling.nodes.models import AttemptResult, RequestPhase
from scaling.nodes.scale_up.requests import split_request_id
from scaling.nodes.status import AutoscalerStatus
from starters.cli import CliError, invoke
from starters.kube import apply_node_group, deployment, node_group
from tests.cli import growth
from tests.e2e.conftest import LocalCluster
from tests.polling import until
from tests.workflows.nodes.test_web_ui import web_ui
from workflows.nodes.autoscaler import NodeAutoscalerWorkflow, autoscaler_id

CLUSTER = "e2e-starters"


async def cli(
    lc: LocalCluster, *args: str, expect: int = 0, cluster: str = CLUSTER
) -> subprocess.CompletedProcess[str]:
    return await growth("--config", str(lc.config_path), "nodes", "--cluster", cluster, *args, expect=expect)


async def explain(lc: LocalCluster, tc: Client, *args: str) -> str:
    """`growth nodes explain ...` in this process."""
    argv = ["nodes", "--cluster", CLUSTER, "explain", *args]
    return await invoke(tc, load_settings(str(lc.config_path)), argv)


async def test_starter_cli_steers_the_autoscaler(local_cluster: Callable[..., LocalCluster]) -> None:
    lc = local_cluster({"kwok": {}}, ["--node-ready-delay", "1", "--never-ready", "*-kwok-cx32-*"])
    apply_node_group(
        lc.api,
        node_group(
            "general",
            [
                {"provider": "kwok", "serverType": ["cx22"], "priority": 100},
                {"provider": "kwok", "serverType": ["cx32"], "priority": 50},
            ],
            # A half-used node is below this: `explain node` names what holds it (blocker or timer).
            scaleDown={"utilizationThreshold": "0.9"},
        ),
    )
    tc: Client = await lc.temporal.client()
    handle: WorkflowHandle = tc.get_workflow_handle(autoscaler_id(CLUSTER))

    async def status() -> AutoscalerStatus:
        return await handle.query(NodeAutoscalerWorkflow.status)

    request_ids: list[str] = []
    try:
        # The cx32 request below must still be waiting when the test cancels it: under load (CI
        # at load 20) the CLI calls in between took over a minute, and a 60 s readiness timeout
        # ended it first (Unmet by timeout, then "not an in-flight NodeRequest" for the cancel).
        out = (
            await cli(lc, "start", "--scan-interval", "0.5", "--readiness-timeout", "600", "--request-ttl", "5")
        ).stdout
        assert f"started NodeAutoscaler {autoscaler_id(CLUSTER)}" in out
        assert lc.task_queue in out
        assert "already running" in (await cli(lc, "start")).stdout  # idempotent
        missing = await cli(lc, "status", cluster="no-such-cluster", expect=1)
        assert "no running NodeAutoscaler nodes/no-such-cluster" in missing.stderr

        await until(lambda: _loops_done(status), 60, "a first loop")
        # The Web UI reads without a query: the list's summary, the page's current details.
        summary, _, details = await web_ui(handle)
        assert summary == f"NodeAutoscaler of cluster {CLUSTER}, every 0.5 s"
        # The details repeat the summary first (it is lost at continue-as-new), then where the loop stands.
        assert details.splitlines()[0] == summary and details.splitlines()[1].startswith("running: loop ")
        as_json = json.loads((await cli(lc, "status", "-o", "json")).stdout)
        assert as_json["cluster"] == CLUSTER and as_json["paused"] is False
        as_yaml = yaml.safe_load((await cli(lc, "-o", "yaml", "status")).stdout)
        assert as_yaml["cluster"] == CLUSTER and as_yaml["iterations"] >= 1

        # pause / resume are signals: the workflow's own state changes.
        assert "pause sent" in (await cli(lc, "pause")).stdout
        await until(lambda: _paused(status, True), 60, "paused")
        assert "PAUSED" in (await cli(lc, "status")).stdout
        await cli(lc, "resume")
        await until(lambda: _paused(status, False), 60, "resumed")

        # Bad input is refused by the update validators, and the CLI says so with exit code 2.
        refused = await cli(lc, "ban-pool", "no-slash", expect=2)
        # exit code 2 also for what never reaches the workflow: a usage error names the option
        assert "--output" in (await cli(lc, "status", "-o", "xml", expect=2)).stderr
        assert "refused" in refused.stderr and "group_pool" in refused.stderr
        refused = await cli(lc, "cancel-request", "000999-none", expect=2)
        assert "not an in-flight NodeRequest" in refused.stderr

        # Ban the preferred pool: the workload's request must go to the next tier (kwok-cx32).
        banned = json.loads((await cli(lc, "ban-pool", "general/kwok-cx22", "-o", "json")).stdout)
        assert banned["data"]["banned_pools"] == ["general/kwok-cx22"]
        apps = client.AppsV1Api(lc.api)
        await asyncio.to_thread(apps.create_namespaced_deployment, "default", deployment("cli", 2, "500m", "512Mi"))
        stuck = await until(lambda: _in_flight_on(status, "kwok-cx32", RequestPhase.PROVISIONING), 60, "a cx32 request")
        request_ids.append(stuck.id)
        # Its workflow: a NodeRequestBatch of one member (`<batch id>#0`), or a NodeRequest.
        summary, _, details = await web_ui(tc.get_workflow_handle(split_request_id(stuck.id)[0]))
        assert summary in (
            "NodeRequest cx32 for 2 pods of general, pool kwok-cx32",
            "NodeRequestBatch 1 × cx32 for 2 pods of general, pool kwok-cx32",
        )
        assert f"Provisioning: pool kwok-cx32, node {stuck.node_name}" in details
        # `request` shows the member, by its short id.
        text = (await cli(lc, "request", stuck.id.rsplit("/", 1)[1])).stdout
        assert f"{stuck.id}  pool kwok-cx32  Provisioning  node {stuck.node_name}  2 pod(s)" in text
        text = (await cli(lc, "status")).stdout
        assert stuck.id in text and "banned pools: general/kwok-cx22" in text

        # explain pod: the CLI reads the pod from the cluster and the loop names its request.
        core = client.CoreV1Api(lc.api)
        pods = await asyncio.to_thread(core.list_namespaced_pod, "default", label_selector="app=cli")
        waiting = f"default/{pods.items[0].metadata.name}"
        text = (await cli(lc, "explain", "pod", waiting)).stdout
        assert f"pod {waiting}: InFlight" in text and stuck.id in text and "pool kwok-cx32" in text
        # The rest in-process (the same run_command; a subprocess costs seconds each).
        explained = json.loads(await explain(lc, tc, "pod", waiting, "-o", "json"))
        assert explained["requests"][0]["id"] == stuck.id and explained["requests"][0]["group"] == "general"
        with pytest.raises(CliError, match="no pod default/nope") as err:
            await explain(lc, tc, "pod", "default/nope")
        assert err.value.code == 1

        # Unban first (the in-flight request still covers the pods), then cancel it by its short id:
        # the request ends Unmet/Cancelled and the autoscaler plans again on the preferred pool.
        assert (await cli(lc, "unban-pool", "general/kwok-cx22")).stdout.strip().endswith("none")
        short_id = stuck.id.rsplit("/", 1)[1]
        assert f"cancel sent to {stuck.id}" in (await cli(lc, "cancel-request", short_id)).stdout
        final = await until(lambda: _finished(status, stuck.id), 60, "the cancelled request to finish")
        assert final.phase == RequestPhase.UNMET
        assert final.attempts[-1].pool == "kwok-cx32" and final.attempts[-1].result == AttemptResult.CANCELLED

        ready = await until(lambda: _ready_on(status, "kwok-cx22"), 60, "a Ready request on kwok-cx22")
        request_ids.append(ready.id)
        assert (await status()).banned_pools == []

        # explain node: the loop's last scale-down evaluation says what holds growth's new node.
        node = ready.node_name
        why = await until(lambda: _explained_node(handle, node), 60, "a scale-down evaluation of the node")
        text = (await cli(lc, "explain", "node", node)).stdout
        assert f"node {node}: {why.outcome}" in text and f"made by {ready.id}" in text
        if why.outcome == "Kept":  # a blocker (no other node takes its pods), named
            assert why.candidate.state == "Blocked" and why.candidate.reason in text
        else:  # its pods fit elsewhere: the group's unneeded timer runs
            assert f"removal at {when(why.removable_at)}" in text
        assert f"pod {waiting} is scheduled on node" in await explain(lc, tc, "pod", waiting)
        with pytest.raises(CliError, match="no node no-such-node") as err:
            await explain(lc, tc, "node", "no-such-node")
        assert err.value.code == 1

        # Scale-down overrides on the node growth just made.
        assert node in (await cli(lc, "protect-node", node)).stdout
        assert (await status()).protected_nodes == [node]
        assert f"protected nodes: {node}" in (await cli(lc, "status")).stdout
        assert (await cli(lc, "unprotect-node", node)).stdout.strip().endswith("none")
        assert "is not protected" in (await cli(lc, "unprotect-node", node, expect=2)).stderr
        assert "does not exist" in (await cli(lc, "remove-node", "no-such-node", expect=2)).stderr
    finally:
        s = await _status_or_none(status)
        if s is not None:
            request_ids += [r.id for r in s.in_flight + s.recent]
            request_ids += [d.workflow_id for d in s.scale_downs if d.workflow_id]
        for wf_id in [autoscaler_id(CLUSTER), *set(request_ids)]:
            try:
                await tc.get_workflow_handle(wf_id).terminate("test over")
            except Exception:  # noqa: BLE001 - already finished is fine
                pass


async def _status_or_none(status: Callable[[], Any]) -> AutoscalerStatus | None:
    try:
        return await status()
    except Exception:  # noqa: BLE001
        return None


async def _explained_node(handle: WorkflowHandle, node: str) -> Any:
    e = await handle.query(NodeAutoscalerWorkflow.explain_node, ExplainNodeInput(name=node, managed=True))
    return e if e.candidate is not None and e.outcome in ("Kept", "UnneededWaiting") else None


async def _loops_done(status: Callable[[], Any]) -> bool:
    return (await status()).iterations >= 1


async def _paused(status: Callable[[], Any], want: bool) -> bool:
    return (await status()).paused is want


async def _in_flight_on(status: Callable[[], Any], pool: str, phase: RequestPhase) -> Any:
    s: AutoscalerStatus = await status()
    return next((r for r in s.in_flight if r.current_pool == pool and r.phase == phase), None)


async def _finished(status: Callable[[], Any], request_id: str) -> Any:
    s: AutoscalerStatus = await status()
    return next((r for r in s.recent if r.id == request_id), None)


async def _ready_on(status: Callable[[], Any], pool: str) -> Any:
    s: AutoscalerStatus = await status()
    return next((r for r in s.recent if r.phase == RequestPhase.READY and r.current_pool == pool), None)
