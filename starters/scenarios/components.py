"""components: seed 002's story (scale out on high CPU or storage use, back in on low CPU) on a
simulated TiDB cluster, driven through the sim's load API.

A TidbCluster `basic` (TiKV 3 x 2 cores, 100Gi stores) gets a TidbClusterAutoScaler with
short intervals, plus a second, invalid autoscaler (min_threshold above max) that must be
reported on its status while the first keeps working. Then:

1. load ramps: TiKV's average CPU over max -> homogeneous scale-out of `basic`;
2. a hot subset: one TiKV pinned near its quota while the average is fine -> a heterogeneous
   `auto-<hash>` TidbCluster (the larger resource type first);
3. storage fills: average store use over max -> homogeneous TiKV scale-out;
4. load drops: every instance under min -> heterogeneous instances go one per scale-in
   interval; the scenario ends when the emptied group has been drained and deleted.

`run_components_scenario` needs a Temporal client whose worker registers the components
workflows and activities, a Kubernetes ApiClient for a cluster with room for the pods
(`add_nodes`), and the sim's control URL (`python -m sim.tidb.world` prints it). It returns
the headless summary (starters/components_demo.py prints it as its last line):
    {"scenario": "components", "homogeneous_scale_outs": n, "heterogeneous_created": [names],
     "storage_scale_outs": n, "scale_ins": n, "groups_deleted": n, "interval_violations": 0,
     "invalid_specs_reported": n, "change_events": n, "invalid_spec_status": "..."}
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

from activities.components.prometheus import MetricsUnavailable, PrometheusClient
from scaling.components.state import AutoscalerReport, ComponentAutoscalerInput, ComponentAutoscalerSettings
from scaling.components.summaries import components_summary
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


def autoscaler(
    name: str = BASE, cluster: str = BASE, broken: bool = False, out_s: int = SCALE_OUT_S, in_s: int = SCALE_IN_S
) -> dict[str, Any]:
    cpu = {"max_threshold": 0.8, "min_threshold": 0.2}
    if broken:
        cpu = {"max_threshold": 0.3, "min_threshold": 0.6}  # min above max: reported on status
    tikv = {
        "resources": {
            "compute": {"cpu": "4", "memory": "8Gi", "storage": "100Gi", "count": 2},
            "small": {"cpu": "2", "memory": "4Gi", "storage": "100Gi", "count": 2},
        },
        "rules": {"cpu": cpu, "storage": {"max_threshold": 0.8, "min_threshold": 0.6}},
        "scaleOutIntervalSeconds": out_s,
        "scaleInIntervalSeconds": in_s,
    }
    return {
        "apiVersion": f"{G}/{V}",
        "kind": "TidbClusterAutoScaler",
        "metadata": {"name": name},
        "spec": {"cluster": {"name": cluster}, "tikv": tikv},
    }


def add_nodes(api: client.ApiClient, count: int, cpu: str, memory: str, timeout: float = 60.0) -> list[str]:
    """`count` fake (KWOK) nodes for the database's pods; returns once all are Ready."""
    core = client.CoreV1Api(api)
    names = [f"db-{i}" for i in range(count)]
    for name in names:
        body = {
            "metadata": {"name": name, "annotations": {"kwok.x-k8s.io/node": "fake"}},
            "status": {"capacity": {"cpu": cpu, "memory": memory, "pods": "110"}},
        }
        try:
            core.create_node(body)
        except ApiException as exc:
            if exc.status != 409:
                raise
    deadline = time.monotonic() + timeout
    while True:
        ready = [
            n.metadata.name
            for n in core.list_node().items
            if n.metadata.name in names
            and any(c.type == "Ready" and c.status == "True" for c in n.status.conditions or [])
        ]
        if len(ready) == count:
            return names
        if time.monotonic() > deadline:
            raise TimeoutError(f"components scenario: nodes {names} not Ready within {timeout}s (ready: {ready})")
        time.sleep(0.5)


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
    scale_out_s: int = SCALE_OUT_S,
    scale_in_s: int = SCALE_IN_S,
    phase_timeout_s: float = 120.0,
    progress: Callable[[str], None] = lambda _: None,
    source_url: str | None = None,
    cpu_window_s: int = 60,
) -> dict[str, Any]:
    custom, core = client.CustomObjectsApi(api), client.CoreV1Api(api)
    try:
        core.create_namespace({"metadata": {"name": NAMESPACE}})
    except ApiException as exc:
        if exc.status != 409:
            raise
    _create(custom, "tidbclusters", base_cluster())
    _create(custom, "tidbclusterautoscalers", autoscaler(out_s=scale_out_s, in_s=scale_in_s))
    _create(custom, "tidbclusterautoscalers", autoscaler("broken", broken=True, out_s=scale_out_s, in_s=scale_in_s))
    async with httpx.AsyncClient(base_url=control_url, timeout=10) as sim:

        async def load(body: dict[str, Any]) -> None:
            (await sim.put("/sim/v1/load", json=body)).raise_for_status()

        async def tikv_running() -> int:
            found = (await sim.get("/sim/v1/instances")).json()["instances"]
            return sum(1 for i in found if i["component"] == "tikv" and i["base"] == BASE)

        await _wait(lambda: _ge(tikv_running, 3), phase_timeout_s, "basic's 3 TiKV instances")
        # The load ramps before the loop starts, and the loop starts once its metrics source reads
        # the ramp over the whole CPU window: a windowed rate (a real Prometheus's increase over
        # cpu_window_s, samples a scrape apart) reaches each instance a little apart, so mid-ramp
        # one instance can read over max while the average is still under it (measured: 0.82, 0.77,
        # 0.79), and seed 002's rule answers that with a heterogeneous group, not the homogeneous
        # scale-out this phase is about (the group then takes the load: no scale-out ever came).
        progress("load ramps: TiKV at 95% of its quota")
        await load({"demand": {f"{NAMESPACE}/{BASE}/tikv": 5.7}})
        if source_url is not None:
            await _wait(
                lambda: _every_tikv_reads_over(source_url, cpu_window_s, 0.9, 3),
                phase_timeout_s,
                f"the metrics source reading every TiKV over 90% of its quota for {cpu_window_s}s",
            )
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
                    static_summary=components_summary(settings),  # the Web UI's workflow list
                )
            except WorkflowAlreadyStartedError:
                handles[name] = temporal.get_workflow_handle(workflow_id(NAMESPACE, name))
        main = handles[BASE]

        async def counters() -> AutoscalerReport | None:
            return await _report(main)

        async def reached(check: Callable[[AutoscalerReport], bool]) -> AutoscalerReport | None:
            rep = await counters()
            return rep if rep is not None and check(rep) else None

        await _wait(
            lambda: reached(lambda r: r.counters.homogeneous_scale_outs >= 1),
            phase_timeout_s,
            "a homogeneous scale-out",
        )
        progress(f"  homogeneous scale-out: {_tikv(await counters())}")

        progress("a hot subset: one TiKV pinned at 95% while the average is low")
        await load({"demand": {f"{NAMESPACE}/{BASE}/tikv": 2.0}, "pods": {f"{NAMESPACE}/{BASE}-tikv-0": 1.9}})
        await _wait(
            lambda: reached(lambda r: bool(r.counters.heterogeneous_created)),
            phase_timeout_s,
            "a heterogeneous auto-<hash> cluster",
        )
        progress(f"  heterogeneous cluster created: {_tikv(await counters())}")

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
        progress(f"  storage scale-out: {_tikv(await counters())}")

        progress("load drops: every TiKV under 20%; heterogeneous instances go one per scale-in interval")
        await load({"demand": {f"{NAMESPACE}/{BASE}/tikv": 0.2}, "storage": {f"{NAMESPACE}/{BASE}": 10 * GIB}})
        seen_ins = 0

        async def scaled_in_and_gone() -> AutoscalerReport | None:
            nonlocal seen_ins
            rep = await counters()
            if rep is None:
                return None
            if rep.counters.scale_ins > seen_ins:
                seen_ins = rep.counters.scale_ins
                progress(f"  heterogeneous scale-in: {_tikv(rep)}")
            tikv_groups = rep.components["tikv"].groups if "tikv" in rep.components else {}
            done = rep.counters.scale_ins >= 1 and rep.counters.groups_deleted >= 1 and not tikv_groups
            return rep if done else None

        await _wait(scaled_in_and_gone, phase_timeout_s, "every heterogeneous TiKV scaled in and its cluster deleted")
        progress(f"  heterogeneous clusters drained and deleted: {_tikv(await counters())}")
        broken = await _wait(lambda: _report(handles["broken"]), phase_timeout_s, "the broken autoscaler's status")
        final = await _wait(counters, phase_timeout_s, "the final status")

        async def broken_condition() -> str | None:
            obj = await asyncio.to_thread(
                custom.get_namespaced_custom_object, G, V, NAMESPACE, "tidbclusterautoscalers", "broken"
            )
            conds = [c for c in (obj.get("status") or {}).get("conditions") or [] if c.get("type") == "SpecValid"]
            if conds and conds[0].get("status") == "False":
                return conds[0].get("message") or "(no message)"
            return None

        invalid_status = await _wait(broken_condition, phase_timeout_s, "SpecValid=False on tidb/broken's status")
    events = change_events(core, BASE)
    violations = interval_violations(events, scale_out_s, scale_in_s)
    return {
        "scenario": "components",
        "homogeneous_scale_outs": final.counters.homogeneous_scale_outs,
        "heterogeneous_created": final.counters.heterogeneous_created,
        "storage_scale_outs": final.counters.storage_scale_outs,
        "scale_ins": final.counters.scale_ins,
        "groups_deleted": final.counters.groups_deleted,
        "interval_violations": violations,
        "invalid_specs_reported": final.counters.invalid_specs_reported + broken.counters.invalid_specs_reported,
        # Evidence behind the counts: the Events interval_violations was counted over, and the
        # error as written on the invalid TidbClusterAutoScaler's status.
        "change_events": len(events),
        "invalid_spec_status": invalid_status,
    }


def _tikv(rep: AutoscalerReport | None) -> str:
    """TiKV replicas per cluster as the loop last set them, for progress lines."""
    cs = rep.components.get("tikv") if rep else None
    if cs is None:
        return "(no status yet)"
    parts = [f"{BASE} {cs.homogeneous_replicas}"]
    parts += [f"{name} {g.replicas} ({g.phase})" for name, g in sorted(cs.groups.items())]
    return "TiKV replicas " + ", ".join(parts)


async def _every_tikv_reads_over(source_url: str, window_s: int, ratio: float, count: int) -> bool:
    """`count` TiKV instances of the base cluster read over `ratio` of their quota, averaged over
    `window_s`, through the queries the loop asks its source (None-safe: no answer is not yet)."""

    def read() -> bool:
        prom = PrometheusClient(source_url, timeout_s=5)
        try:
            used, quota = prom.cpu_usage(NAMESPACE, "tikv", window_s), prom.cpu_quota(NAMESPACE, "tikv")
        except MetricsUnavailable:
            return False
        finally:
            prom.close()
        over = [i for i, q in quota.items() if i.startswith(f"{BASE}-tikv-") and q > 0 and used.get(i, 0) / q > ratio]
        return len(over) >= count

    return await asyncio.to_thread(read)


async def _ge(probe: Callable[[], Awaitable[int]], n: int) -> bool:
    return await probe() >= n
