"""components: seed 002's story on a simulated TiDB cluster, driven through the sim's load API.

A TidbCluster `basic` (TiKV 3 x 2 cores, 100Gi stores) gets a TidbClusterAutoScaler with
short intervals, plus a second, invalid autoscaler (min_threshold above max) that must be
reported on its status while the first keeps working. Then:

1. load ramps: TiKV's average CPU over max -> homogeneous scale-out of `basic`;
2. a hot subset: one TiKV pinned near its quota while the average is fine -> a heterogeneous
   `auto-<hash>` TidbCluster (the larger resource type first);
3. storage fills: average store use over max -> homogeneous TiKV scale-out;
4. load drops: every instance under min -> heterogeneous instances go one per interval, the
   emptied group is drained and deleted.

`run_components_scenario` needs a Temporal client whose worker registers the components
workflows and activities, a Kubernetes ApiClient for the cluster, and the sim's control URL
(`python -m sim.tidb.world` prints it). The headless summary's last line:
    {"scenario": "components", "homogeneous_scale_outs": n, "heterogeneous_created": [names],
     "storage_scale_outs": n, "scale_ins": n, "interval_violations": 0, "invalid_specs_reported": n}
interval_violations is counted independently of the workflow, from the Events it wrote on the
TidbClusterAutoScaler: two change rounds of a component closer than the later change's interval.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any, TypeVar

import httpx
from kubernetes import client
from kubernetes.client.rest import ApiException
from temporalio.client import Client, WorkflowHandle
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError

from scaling.components.state import AutoscalerReport, ComponentAutoscalerInput, ComponentAutoscalerSettings
from workflows.components.autoscaler import ComponentAutoscalerWorkflow, workflow_id

T = TypeVar("T")
G, V = "pingcap.com", "v1alpha1"
NAMESPACE = "tidb"
BASE = "basic"
SCALE_OUT_S = 8
SCALE_IN_S = 12
ROUND_S = 1.5  # the Events of one round land within this of its first
TOLERANCE_S = 1.0  # Event timestamps may be cut to whole seconds
CHANGE_REASONS = ("ScaledOut", "ScaledIn")
GIB = 2**30


def base_cluster(name: str = BASE) -> dict[str, Any]:
    return {
        "apiVersion": f"{G}/{V}",
        "kind": "TidbCluster",
        "metadata": {"name": name},
        "spec": {
            "version": "v8.5.0",
            "pd": {"replicas": 1, "requests": {"cpu": "1", "memory": "1Gi"}},
            "tikv": {
                "replicas": 3,
                "requests": {"cpu": "2", "memory": "4Gi", "storage": "100Gi"},
                "limits": {"cpu": "2", "memory": "4Gi"},
            },
            "tidb": {"replicas": 2, "requests": {"cpu": "2", "memory": "4Gi"}, "limits": {"cpu": "2", "memory": "4Gi"}},
        },
    }


def autoscaler(name: str = BASE, cluster: str = BASE, broken: bool = False) -> dict[str, Any]:
    cpu = {"max_threshold": 0.8, "min_threshold": 0.2}
    if broken:
        cpu = {"max_threshold": 0.3, "min_threshold": 0.6}  # min above max: reported on status
    tikv = {
        "resources": {
            "compute": {"cpu": "4", "memory": "8Gi", "storage": "100Gi", "count": 2},
            "small": {"cpu": "2", "memory": "4Gi", "storage": "100Gi", "count": 2},
        },
        "rules": {"cpu": cpu, "storage": {"max_threshold": 0.8, "min_threshold": 0.6}},
        "scaleOutIntervalSeconds": SCALE_OUT_S,
        "scaleInIntervalSeconds": SCALE_IN_S,
    }
    return {
        "apiVersion": f"{G}/{V}",
        "kind": "TidbClusterAutoScaler",
        "metadata": {"name": name},
        "spec": {"cluster": {"name": cluster}, "tikv": tikv},
    }


async def _wait(check: Callable[[], Awaitable[T | None]], timeout: float, what: str) -> T:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = await check()
        if last:
            return last
        await asyncio.sleep(0.5)
    raise AssertionError(f"components scenario: timed out after {timeout}s waiting for {what} (last: {last!r})")


async def _report(handle: WorkflowHandle) -> AutoscalerReport | None:
    try:
        return await handle.query(ComponentAutoscalerWorkflow.status)
    except RPCError:
        return None  # racing a continue-as-new hand-over: ask again


def _create(custom: client.CustomObjectsApi, plural: str, body: dict[str, Any]) -> None:
    try:
        custom.create_namespaced_custom_object(G, V, NAMESPACE, plural, body)
    except ApiException as exc:
        if exc.status != 409:
            raise


def _event_time(ev: Any) -> datetime | None:
    t = ev.last_timestamp or ev.first_timestamp or ev.event_time
    return t if isinstance(t, datetime) else None


def interval_violations(events: list[tuple[datetime, str, str]], out_s: float, in_s: float) -> int:
    """(time, component, reason) Events -> change rounds closer than the later change's interval."""
    violations = 0
    by_component: dict[str, list[tuple[datetime, str]]] = {}
    for at, component, reason in sorted(events):
        by_component.setdefault(component, []).append((at, reason))
    for changes in by_component.values():
        round_start: datetime | None = None
        for at, reason in changes:
            if round_start is not None and (at - round_start).total_seconds() <= ROUND_S:
                continue  # the same round
            if round_start is not None:
                need = out_s if reason == "ScaledOut" else in_s
                if (at - round_start).total_seconds() < need - TOLERANCE_S:
                    violations += 1
            round_start = at
    return violations


def change_events(core: client.CoreV1Api, name: str) -> list[tuple[datetime, str, str]]:
    found = core.list_namespaced_event(NAMESPACE, field_selector=f"involvedObject.name={name}").items
    out = []
    for ev in found:
        if ev.involved_object.name != name or ev.reason not in CHANGE_REASONS:
            continue  # (the field selector may be ignored by a simple API server)
        at = _event_time(ev)
        if at is not None:
            out.append((at, (ev.message or "").split(" ", 1)[0], ev.reason))
    return out


async def run_components_scenario(
    temporal: Client,
    task_queue: str,
    api: client.ApiClient,
    control_url: str,
    *,
    scan_interval_s: float = 2.0,
    phase_timeout_s: float = 120.0,
    progress: Callable[[str], None] = lambda _: None,
) -> dict[str, Any]:
    custom, core = client.CustomObjectsApi(api), client.CoreV1Api(api)
    try:
        core.create_namespace({"metadata": {"name": NAMESPACE}})
    except ApiException as exc:
        if exc.status != 409:
            raise
    _create(custom, "tidbclusters", base_cluster())
    _create(custom, "tidbclusterautoscalers", autoscaler())
    _create(custom, "tidbclusterautoscalers", autoscaler("broken", broken=True))
    async with httpx.AsyncClient(base_url=control_url, timeout=10) as sim:

        async def load(body: dict[str, Any]) -> None:
            (await sim.put("/sim/v1/load", json=body)).raise_for_status()

        async def tikv_running() -> int:
            found = (await sim.get("/sim/v1/instances")).json()["instances"]
            return sum(1 for i in found if i["component"] == "tikv" and i["base"] == BASE)

        await _wait(lambda: _ge(tikv_running, 3), phase_timeout_s, "basic's 3 TiKV instances")
        handles = {}
        for name in (BASE, "broken"):
            settings = ComponentAutoscalerSettings(
                namespace=NAMESPACE,
                name=name,
                scan_interval_s=scan_interval_s,
                iterations_per_run=500,
                activity_timeout_s=30,
            )
            try:
                handles[name] = await temporal.start_workflow(
                    ComponentAutoscalerWorkflow.run,
                    ComponentAutoscalerInput(settings=settings),
                    id=workflow_id(NAMESPACE, name),
                    task_queue=task_queue,
                )
            except WorkflowAlreadyStartedError:
                handles[name] = temporal.get_workflow_handle(workflow_id(NAMESPACE, name))
        main = handles[BASE]

        async def counters() -> AutoscalerReport | None:
            return await _report(main)

        async def reached(check: Callable[[AutoscalerReport], bool]) -> AutoscalerReport | None:
            rep = await counters()
            return rep if rep is not None and check(rep) else None

        progress("load ramps: TiKV at 95% of its quota")
        await load({"demand": {f"{NAMESPACE}/{BASE}/tikv": 5.7}})
        await _wait(
            lambda: reached(lambda r: r.counters.homogeneous_scale_outs >= 1),
            phase_timeout_s,
            "a homogeneous scale-out",
        )

        progress("a hot subset: one TiKV pinned at 95% while the average is low")
        await load({"demand": {f"{NAMESPACE}/{BASE}/tikv": 2.0}, "pods": {f"{NAMESPACE}/{BASE}-tikv-0": 1.9}})
        await _wait(
            lambda: reached(lambda r: bool(r.counters.heterogeneous_created)),
            phase_timeout_s,
            "a heterogeneous auto-<hash> cluster",
        )

        progress("storage fills: 90% of every store")
        rep = await counters()
        tikv = (rep.components["tikv"].homogeneous_replicas if rep else 6) + sum(
            g.replicas for g in (rep.components["tikv"].groups.values() if rep else [])
        )
        await load(
            {
                "demand": {f"{NAMESPACE}/{BASE}/tikv": 2.0},
                "pods": {f"{NAMESPACE}/{BASE}-tikv-0": 1.9},
                "storage": {f"{NAMESPACE}/{BASE}": int(0.9 * tikv * 100 * GIB)},
            }
        )
        await _wait(
            lambda: reached(lambda r: r.counters.storage_scale_outs >= 1), phase_timeout_s, "a storage scale-out"
        )

        progress("load drops: every TiKV under 20%")
        await load({"demand": {f"{NAMESPACE}/{BASE}/tikv": 0.2}, "storage": {f"{NAMESPACE}/{BASE}": 10 * GIB}})
        await _wait(lambda: reached(lambda r: r.counters.scale_ins >= 1), phase_timeout_s, "a heterogeneous scale-in")
        broken = await _wait(lambda: _report(handles["broken"]), phase_timeout_s, "the broken autoscaler's status")
        final = await _wait(counters, phase_timeout_s, "the final status")
    violations = interval_violations(change_events(core, BASE), SCALE_OUT_S, SCALE_IN_S)
    return {
        "scenario": "components",
        "homogeneous_scale_outs": final.counters.homogeneous_scale_outs,
        "heterogeneous_created": final.counters.heterogeneous_created,
        "storage_scale_outs": final.counters.storage_scale_outs,
        "scale_ins": final.counters.scale_ins,
        "interval_violations": violations,
        "invalid_specs_reported": final.counters.invalid_specs_reported + broken.counters.invalid_specs_reported,
    }


async def _ge(probe: Callable[[], Awaitable[int]], n: int) -> bool:
    return await probe() >= n
