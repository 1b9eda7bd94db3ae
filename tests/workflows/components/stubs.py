"""A scripted TiDB world behind stub activities registered under the components contract names.

The base TidbCluster and the heterogeneous clusters are plain records; metrics are derived
from a scripted load (cores in use per component, optionally a hot subset of homogeneous
instances, TiKV storage fill) spread over the instances that exist, so a scale-out lowers
the next round's usage as it would in a real cluster.
"""

from __future__ import annotations

import asyncio
import itertools
from dataclasses import dataclass, field
from datetime import datetime

from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.components.decisions import DECISIONS
from scaling.components import contracts
from scaling.kube.quantity import cpu_millis

HOM_CPU = 2.0  # cores per homogeneous instance


@dataclass
class AutoCluster:
    name: str
    uid: str
    component: str
    group: str
    replicas: int
    pods: int
    cpu: float  # cores per instance
    labels: dict[str, str]
    resource_type: str


@dataclass
class ComponentsWorld:
    spec: dict
    namespace: str = "ns"
    name: str = "tas"
    base: str = "db"
    found: bool = True
    replicas: dict[str, int] = field(default_factory=lambda: {"tikv": 3, "tidb": 2})
    load: dict[str, float] = field(default_factory=dict)  # cores used per component
    hot: dict[str, tuple[int, float]] = field(default_factory=dict)  # component -> (instances, ratio)
    storage_fill: float = 0.0  # TiKV used/capacity
    metrics_down: bool = False
    fits: dict[str, int] | None = None
    pd_plans: list[contracts.PdPlan] | None = None
    recommended: int = 0
    hold_pods: bool = False  # pods of a cluster scaled to 0 stay until released
    autos: dict[str, AutoCluster] = field(default_factory=dict)
    objects_created: list[str] = field(default_factory=list)  # actual creations, by name
    create_calls: list[str] = field(default_factory=list)
    patches: list[tuple[str, str, int]] = field(default_factory=list)  # (cluster, component, replicas)
    deletes: list[str] = field(default_factory=list)
    statuses: list[dict] = field(default_factory=list)
    events: list[contracts.AutoscalerEvent] = field(default_factory=list)
    metric_queries: int = 0
    crash_next_create: bool = False  # create the object, then die before answering
    # The next N patch attempts fail (retried by the server after its backoff), as a write
    # retried after a killed worker: the change lands well after its round began.
    failing_patches: int = 0
    # (server time of the attempt that wrote, cluster, replicas)
    patch_times: list[tuple[datetime, str, int]] = field(default_factory=list)
    crashed: asyncio.Event = field(default_factory=asyncio.Event)
    # set: a replicas write (an activity the round waits on) waits for it. (Not a report: those run
    # as local activities, inside a workflow task, so an update waits for the task's heartbeat.)
    hold: asyncio.Event | None = None
    held: bool = False  # a write is waiting for `hold`
    event_s: float = 0.0  # each Event write takes this long (wall clock)
    read_s: float = 0.0  # each read of the autoscaler object takes this long (wall clock)
    _uids: itertools.count = field(default_factory=itertools.count)

    def reasons(self) -> list[str]:
        return [e.reason for e in self.events]

    def last_status(self) -> dict:
        return self.statuses[-1] if self.statuses else {}

    def _metrics(self, inp: contracts.MetricsInput) -> contracts.ComponentMetrics:
        comp = inp.component
        n = self.replicas.get(comp, 0)
        groups = [a for a in self.autos.values() if a.component == comp and a.pods > 0]
        quota = HOM_CPU * n + sum(a.cpu * a.pods for a in groups)
        ratio = self.load.get(comp, 0.0) / quota if quota else 0.0
        hot_n, hot_ratio = self.hot.get(comp, (0, 0.0))
        hot_n = min(hot_n, n)
        hom = contracts.GroupMetrics(
            group="",
            instances=n,
            cpu_used=HOM_CPU * ((n - hot_n) * ratio + hot_n * hot_ratio),
            cpu_quota=HOM_CPU * n,
            max_ratio=max(ratio, hot_ratio if hot_n else 0.0),
            hot_instances=hot_n if hot_ratio > (inp.hot_threshold or 1) else 0,
            hot_cpu_used=HOM_CPU * hot_n * hot_ratio if hot_ratio > (inp.hot_threshold or 1) else 0.0,
            hot_cpu_quota=HOM_CPU * hot_n if hot_ratio > (inp.hot_threshold or 1) else 0.0,
        )
        if inp.storage:
            hom.storage_instances, hom.storage_capacity = n, 100.0 * n
            hom.storage_used = self.storage_fill * 100.0 * n
        out = [hom]
        for a in groups:
            out.append(
                contracts.GroupMetrics(
                    group=inp.clusters.get(a.name, a.name),
                    instances=a.pods,
                    cpu_used=a.cpu * a.pods * ratio,
                    cpu_quota=a.cpu * a.pods,
                    max_ratio=ratio,
                )
            )
        return contracts.ComponentMetrics(component=comp, groups=out)

    def activities(self) -> list:
        world = self

        @activity.defn(name=contracts.GET_AUTOSCALER)
        async def get_autoscaler(ref: contracts.AutoscalerRef) -> contracts.AutoscalerObject:
            await asyncio.sleep(world.read_s)
            if not world.found:
                return contracts.AutoscalerObject(found=False)
            return contracts.AutoscalerObject(found=True, uid="tas-uid", generation=1, spec=world.spec)

        @activity.defn(name=contracts.WRITE_AUTOSCALER_STATUS)
        async def write_status(inp: contracts.WriteStatusInput) -> contracts.WriteStatusResult:
            world.statuses.append(inp.status)
            return contracts.WriteStatusResult(found=world.found)

        @activity.defn(name=contracts.EMIT_AUTOSCALER_EVENT)
        async def emit_event(ev: contracts.AutoscalerEvent) -> contracts.EventWritten:
            await asyncio.sleep(world.event_s)
            world.events.append(ev)
            return contracts.EventWritten(reason=ev.reason, message=ev.message)

        @activity.defn(name=contracts.GET_TIDB_CLUSTER)
        async def get_tidb_cluster(inp: contracts.GetClusterInput) -> contracts.TidbClusterView:
            if inp.name != world.base:
                return contracts.TidbClusterView(found=False, namespace=inp.namespace, name=inp.name)
            comps = {
                comp: contracts.ComponentView(
                    replicas=r, pods=r, ready=r, cpu="2", memory="4Gi", storage="100Gi" if comp == "tikv" else ""
                )
                for comp, r in world.replicas.items()
            }
            return contracts.TidbClusterView(
                found=True, namespace=inp.namespace, name=inp.name, uid="db-uid", components=comps
            )

        @activity.defn(name=contracts.LIST_AUTO_CLUSTERS)
        async def list_auto_clusters(inp: contracts.ListAutoClustersInput) -> contracts.AutoClusterList:
            return contracts.AutoClusterList(
                items=[
                    contracts.AutoClusterView(
                        name=a.name,
                        uid=a.uid,
                        group=a.group,
                        base_tc=world.base,
                        labels=a.labels,
                        component=contracts.ComponentView(replicas=a.replicas, pods=a.pods, ready=a.pods),
                    )
                    for a in world.autos.values()
                    if a.component == inp.component
                ]
            )

        @activity.defn(name=contracts.QUERY_METRICS)
        async def query_metrics(inp: contracts.MetricsInput) -> contracts.ComponentMetrics:
            world.metric_queries += 1
            if world.metrics_down:
                raise ApplicationError(
                    "Prometheus: connection refused", type=contracts.METRICS_UNAVAILABLE, non_retryable=True
                )
            return world._metrics(inp)

        @activity.defn(name=contracts.OBSERVE_CAPACITY)
        async def observe_capacity(inp: contracts.CapacityInput) -> contracts.CapacityAnswer:
            if world.fits is None:
                return contracts.CapacityAnswer(fits={k: 100 for k in inp.shapes})
            return contracts.CapacityAnswer(fits={k: world.fits.get(k, 0) for k in inp.shapes})

        @activity.defn(name=contracts.ASK_PD_AUTOSCALING)
        async def ask_pd(inp: contracts.AskPdInput) -> contracts.PdAnswer:
            if world.pd_plans is None:
                return contracts.PdAnswer(answered=False)
            return contracts.PdAnswer(answered=True, plans=world.pd_plans)

        @activity.defn(name=contracts.ASK_EXTERNAL_ENDPOINT)
        async def ask_external(inp: contracts.AskExternalInput) -> contracts.ExternalAnswer:
            return contracts.ExternalAnswer(recommended_replicas=world.recommended)

        @activity.defn(name=contracts.CREATE_AUTO_CLUSTER)
        async def create_auto_cluster(inp: contracts.CreateAutoClusterInput) -> contracts.CreateAutoClusterResult:
            world.create_calls.append(inp.name)
            existing = world.autos.get(inp.name)
            if existing is None:
                existing = AutoCluster(
                    name=inp.name,
                    uid=f"uid-{next(world._uids)}",
                    component=inp.component,
                    group=inp.group,
                    replicas=inp.replicas,
                    pods=inp.replicas,
                    cpu=cpu_millis(inp.cpu) / 1000,
                    labels=inp.labels,
                    resource_type=inp.labels.get("resource-type", inp.group),
                )
                world.autos[inp.name] = existing
                world.objects_created.append(inp.name)
                if world.crash_next_create:
                    # The object exists; the worker dies before the answer reaches the server.
                    world.crash_next_create = False
                    world.crashed.set()
                    try:
                        await asyncio.Event().wait()
                    except asyncio.CancelledError:
                        raise RuntimeError("worker went away before answering") from None
                return contracts.CreateAutoClusterResult(
                    name=inp.name, uid=existing.uid, created=True, replicas=existing.replicas
                )
            return contracts.CreateAutoClusterResult(
                name=inp.name, uid=existing.uid, created=False, replicas=existing.replicas
            )

        @activity.defn(name=contracts.PATCH_REPLICAS)
        async def patch_replicas(inp: contracts.PatchReplicasInput) -> contracts.PatchReplicasResult:
            if world.hold is not None:
                world.held = True
                await world.hold.wait()
            if world.failing_patches > 0:
                world.failing_patches -= 1
                raise RuntimeError("the worker went away mid-write")
            world.patch_times.append((activity.info().current_attempt_scheduled_time, inp.cluster, inp.replicas))
            world.patches.append((inp.cluster, inp.component, inp.replicas))
            if inp.cluster == world.base:
                world.replicas[inp.component] = inp.replicas
                return contracts.PatchReplicasResult(found=True, replicas=inp.replicas)
            auto = world.autos.get(inp.cluster)
            if auto is None:
                return contracts.PatchReplicasResult(found=False)
            auto.replicas = inp.replicas
            if not (world.hold_pods and inp.replicas < auto.pods):
                auto.pods = inp.replicas
            return contracts.PatchReplicasResult(found=True, replicas=inp.replicas)

        @activity.defn(name=contracts.DELETE_AUTO_CLUSTER)
        async def delete_auto_cluster(inp: contracts.DeleteAutoClusterInput) -> contracts.DeleteAutoClusterResult:
            auto = world.autos.get(inp.name)
            if auto is None or (inp.uid and auto.uid != inp.uid):
                return contracts.DeleteAutoClusterResult(deleted=False)
            del world.autos[inp.name]
            world.deletes.append(inp.name)
            return contracts.DeleteAutoClusterResult(deleted=True)

        @activity.defn(name=contracts.LIST_AUTOSCALERS)
        async def list_autoscalers(inp: contracts.ListAutoscalersInput) -> list[contracts.AutoscalerRef]:
            return [contracts.AutoscalerRef(namespace=world.namespace, name=world.name)]

        return [
            get_autoscaler,
            write_status,
            emit_event,
            get_tidb_cluster,
            list_auto_clusters,
            query_metrics,
            observe_capacity,
            ask_pd,
            ask_external,
            create_auto_cluster,
            patch_replicas,
            delete_auto_cluster,
            list_autoscalers,
            *DECISIONS,  # the autoscaler's decisions: the real ones (pure)
        ]

    def release_pods(self) -> None:
        self.hold_pods = False
        for a in self.autos.values():
            a.pods = a.replicas
