"""The components loop's activities (names and models in scaling/components/contracts.py).

Thin adapters over kube.TidbKube (TidbClusterAutoScaler / TidbCluster objects), Prometheus, PD
and external recommenders. Metrics, PD and recommender failures raise non-retryable
ApplicationErrors of the contract's types (MetricsUnavailable, PdUnavailable,
RecommenderUnavailable): the workflow treats them as "no data this round", and they are never
turned into an empty answer that could read as "no load" or "no groups".
"""

from __future__ import annotations

import ssl
import threading
from collections import defaultdict
from pathlib import Path
from typing import Any

from kubernetes.client.rest import ApiException
from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.components.external import RecommenderUnavailable, endpoint_url, recommended_replicas, tls_context
from activities.components.kube import TAC_PLURAL, TC_PLURAL, TidbKube
from activities.components.pd import PdClient, PdUnavailable
from activities.components.prometheus import BatchedPrometheus, MetricsUnavailable, PrometheusClient
from activities.components.settings import ComponentsSettings, render
from activities.components.shared import SharedAnswers
from activities.components.tidbcluster import (
    LABEL_AUTO_COMPONENT,
    LABEL_AUTO_INSTANCE,
    LABEL_AUTOSCALING_GROUP,
    LABEL_BASE_TC,
    auto_cluster_body,
    owned_by,
)
from activities.kube.client import ClusterClients
from scaling.components import contracts
from scaling.components.metrics import aggregate
from scaling.kube.models import Resources
from scaling.kube.nodes import node_info
from scaling.nodes.models import CRD_GROUP, CRD_VERSION

NODE_GROUP_PLURAL = "nodegroupswithpriority"
TERMINAL_PHASES = ("Succeeded", "Failed")

Obj = dict[str, Any]


def _component_view(tc: Obj, component: str) -> contracts.ComponentView:
    spec = ((tc.get("spec") or {}).get(component)) or {}
    sts = (((tc.get("status") or {}).get(component)) or {}).get("statefulSet") or {}
    requests = spec.get("requests") or {}
    return contracts.ComponentView(
        replicas=int(spec.get("replicas") or 0),
        pods=int(sts.get("replicas") or 0),
        ready=int(sts.get("readyReplicas") or 0),
        cpu=str(requests.get("cpu") or ""),
        memory=str(requests.get("memory") or ""),
        storage=str(requests.get("storage") or ""),
    )


def _server_labels(tc: Obj, component: str) -> dict[str, str]:
    """The labels PD sees on the component's instances (TiKV: config.server.labels, TiDB:
    config.labels); a TOML-text config is not read (its groups are named by object labels)."""
    config = (((tc.get("spec") or {}).get(component)) or {}).get("config")
    if not isinstance(config, dict):
        return {}
    node = config.get("server") if component == "tikv" else config
    labels = (node or {}).get("labels") if isinstance(node, dict) else None
    return {str(k): str(v) for k, v in (labels or {}).items()} if isinstance(labels, dict) else {}


def _unavailable(kind: str, exc: Exception) -> ApplicationError:
    return ApplicationError(str(exc), type=kind, non_retryable=True)


class ComponentActivities:
    def __init__(
        self,
        clusters: ClusterClients,
        settings: ComponentsSettings | None = None,
        node_groups_file: str | None = None,
        component: str = "growth",
    ) -> None:
        self.clusters = clusters
        self.settings = settings or ComponentsSettings()
        self.node_groups_file = node_groups_file
        self.component = component
        self._lock = threading.Lock()
        self._prometheus: dict[str, PrometheusClient | BatchedPrometheus] = {}
        self._pd: dict[str, PdClient] = {}
        self._capacity: SharedAnswers[tuple[list[Resources], bool]] = SharedAnswers(self.settings.capacity_max_age_s)

    def kube(self, kube_cluster: str) -> TidbKube:
        return TidbKube(self.clusters.api(kube_cluster), self.component)

    def _prometheus_for(self, namespace: str, cluster: str) -> PrometheusClient | BatchedPrometheus:
        if not self.settings.prometheus_url:
            raise MetricsUnavailable("no Prometheus configured (settings components.prometheus_url)")
        url = render(self.settings.prometheus_url, namespace, cluster)
        token = None
        if self.settings.prometheus_token_file:  # read per client: a rotated token is picked up
            token = Path(self.settings.prometheus_token_file).read_text().strip()
        with self._lock:
            prom = self._prometheus.get(url)
            if prom is None:
                prom = PrometheusClient(url, timeout_s=self.settings.http_timeout_s, token=token)
                if self.settings.prometheus_batch_s > 0:
                    prom = BatchedPrometheus(prom, self.settings.prometheus_batch_s)
                self._prometheus[url] = prom
            return prom

    def _pd_for(self, namespace: str, cluster: str) -> PdClient:
        url = render(self.settings.pd_url, namespace, cluster)
        with self._lock:
            pd = self._pd.get(url)
            if pd is None:
                pd = PdClient(url, timeout_s=self.settings.http_timeout_s)
                self._pd[url] = pd
            return pd

    def close(self) -> None:
        with self._lock:
            for client in [*self._prometheus.values(), *self._pd.values()]:
                client.close()
            self._prometheus.clear()
            self._pd.clear()

    # ---- TidbClusterAutoScaler -----------------------------------------------------------
    @activity.defn(name=contracts.LIST_AUTOSCALERS)
    def list_autoscalers(self, inp: contracts.ListAutoscalersInput) -> list[contracts.AutoscalerRef]:
        items = self.kube(inp.kube_cluster).list_autoscalers(inp.namespace)
        return [
            contracts.AutoscalerRef(
                kube_cluster=inp.kube_cluster, namespace=o["metadata"]["namespace"], name=o["metadata"]["name"]
            )
            for o in items
        ]

    @activity.defn(name=contracts.GET_AUTOSCALER)
    def get_autoscaler(self, ref: contracts.AutoscalerRef) -> contracts.AutoscalerObject:
        obj = self.kube(ref.kube_cluster).get(TAC_PLURAL, ref.namespace, ref.name)
        if obj is None:
            return contracts.AutoscalerObject(found=False)
        meta = obj["metadata"]
        return contracts.AutoscalerObject(
            found=True,
            uid=meta.get("uid", ""),
            generation=int(meta.get("generation") or 0),
            spec=obj.get("spec") or {},
            deleting=bool(meta.get("deletionTimestamp")),
        )

    @activity.defn(name=contracts.WRITE_AUTOSCALER_STATUS)
    def write_autoscaler_status(self, inp: contracts.WriteStatusInput) -> contracts.WriteStatusResult:
        return contracts.WriteStatusResult(
            found=self.kube(inp.kube_cluster).replace_status(TAC_PLURAL, inp.namespace, inp.name, inp.status)
        )

    @activity.defn(name=contracts.EMIT_AUTOSCALER_EVENT)
    def emit_autoscaler_event(self, ev: contracts.AutoscalerEvent) -> contracts.EventWritten:
        kube = self.kube(ev.kube_cluster)
        kube.autoscaler_event(ev.namespace, ev.name, ev.uid, ev.reason, ev.message, ev.type, ev.key)
        return contracts.EventWritten(reason=ev.reason, message=ev.message)

    # ---- TidbCluster ---------------------------------------------------------------------
    @activity.defn(name=contracts.GET_TIDB_CLUSTER)
    def get_tidb_cluster(self, inp: contracts.GetClusterInput) -> contracts.TidbClusterView:
        tc = self.kube(inp.kube_cluster).get(TC_PLURAL, inp.namespace, inp.name)
        if tc is None:
            return contracts.TidbClusterView(found=False, namespace=inp.namespace, name=inp.name)
        spec = tc.get("spec") or {}
        return contracts.TidbClusterView(
            found=True,
            namespace=inp.namespace,
            name=inp.name,
            uid=tc["metadata"].get("uid", ""),
            components={k: _component_view(tc, k) for k in ("tikv", "tidb") if isinstance(spec.get(k), dict)},
        )

    @activity.defn(name=contracts.LIST_AUTO_CLUSTERS)
    def list_auto_clusters(self, inp: contracts.ListAutoClustersInput) -> contracts.AutoClusterList:
        selector = f"{LABEL_AUTO_INSTANCE}={inp.autoscaler},{LABEL_AUTO_COMPONENT}={inp.component}"
        items = []
        for tc in sorted(
            self.kube(inp.kube_cluster).list_clusters(inp.namespace, selector), key=lambda o: o["metadata"]["name"]
        ):
            meta = tc["metadata"]
            labels = meta.get("labels") or {}
            items.append(
                contracts.AutoClusterView(
                    name=meta["name"],
                    uid=meta.get("uid", ""),
                    group=labels.get(LABEL_AUTOSCALING_GROUP, ""),
                    base_tc=labels.get(LABEL_BASE_TC, ""),
                    deleting=bool(meta.get("deletionTimestamp")),
                    component=_component_view(tc, inp.component),
                    labels=_server_labels(tc, inp.component),
                )
            )
        return contracts.AutoClusterList(items=items)

    @activity.defn(name=contracts.CREATE_AUTO_CLUSTER)
    def create_auto_cluster(self, inp: contracts.CreateAutoClusterInput) -> contracts.CreateAutoClusterResult:
        kube = self.kube(inp.kube_cluster)
        existing = kube.get(TC_PLURAL, inp.namespace, inp.name)
        if existing is None:
            base = kube.get(TC_PLURAL, inp.namespace, inp.base_cluster)
            if base is None:
                raise ApplicationError(
                    f"base TidbCluster {inp.namespace}/{inp.base_cluster} not found",
                    type="BaseClusterMissing",
                    non_retryable=True,
                )
            try:
                body = auto_cluster_body(
                    base,
                    name=inp.name,
                    autoscaler=inp.autoscaler,
                    component=inp.component,
                    group=inp.group,
                    replicas=inp.replicas,
                    cpu=inp.cpu,
                    memory=inp.memory,
                    storage=inp.storage or None,
                    labels=inp.labels,
                )
            except ValueError as exc:
                raise ApplicationError(str(exc), type="InvalidBaseCluster", non_retryable=True) from None
            # 409 here = a retried or replayed attempt already made it: read it back, never duplicate.
            existing, created = kube.create_cluster(inp.namespace, body)
        else:
            created = False
        if not owned_by(existing, inp.autoscaler, inp.component):
            raise ApplicationError(
                f"TidbCluster {inp.namespace}/{inp.name} exists and is not {inp.autoscaler}'s {inp.component} group",
                type="NameTaken",
                non_retryable=True,
            )
        replicas = int(((existing.get("spec") or {}).get(inp.component) or {}).get("replicas") or 0)
        return contracts.CreateAutoClusterResult(
            name=inp.name, uid=existing["metadata"].get("uid", ""), created=created, replicas=replicas
        )

    @activity.defn(name=contracts.PATCH_REPLICAS)
    def patch_replicas(self, inp: contracts.PatchReplicasInput) -> contracts.PatchReplicasResult:
        patched = self.kube(inp.kube_cluster).set_replicas(inp.namespace, inp.cluster, inp.component, inp.replicas)
        if patched is None:
            return contracts.PatchReplicasResult(found=False)
        return contracts.PatchReplicasResult(found=True, replicas=int(patched["spec"][inp.component]["replicas"]))

    @activity.defn(name=contracts.DELETE_AUTO_CLUSTER)
    def delete_auto_cluster(self, inp: contracts.DeleteAutoClusterInput) -> contracts.DeleteAutoClusterResult:
        return contracts.DeleteAutoClusterResult(
            deleted=self.kube(inp.kube_cluster).delete_cluster(inp.namespace, inp.name, inp.uid or None)
        )

    # ---- metrics sources -----------------------------------------------------------------
    @activity.defn(name=contracts.QUERY_METRICS)
    def query_metrics(self, inp: contracts.MetricsInput) -> contracts.ComponentMetrics:
        try:
            prom = self._prometheus_for(inp.namespace, inp.base_cluster)
            window = self.settings.cpu_window_s
            used = prom.cpu_usage(inp.namespace, inp.component, window)
            quota = prom.cpu_quota(inp.namespace, inp.component)
            sizes = prom.store_sizes(inp.namespace) if inp.storage and inp.component == "tikv" else None
        except (MetricsUnavailable, OSError) as exc:
            raise _unavailable(contracts.METRICS_UNAVAILABLE, exc) from None
        metrics = aggregate(inp.component, inp.clusters, used, quota, inp.hot_threshold, sizes)
        if not metrics.groups:
            # Like PD: an empty result means the window is too short or scraping stopped, not "idle".
            raise _unavailable(
                contracts.METRICS_UNAVAILABLE,
                MetricsUnavailable(
                    f"Prometheus has no {inp.component} CPU samples for {inp.namespace}/{inp.base_cluster}"
                ),
            )
        return metrics

    @activity.defn(name=contracts.ASK_PD_AUTOSCALING)
    def ask_pd_autoscaling(self, inp: contracts.AskPdInput) -> contracts.PdAnswer:
        try:
            plans = self._pd_for(inp.namespace, inp.cluster).autoscaling(inp.strategy.model_dump(exclude_none=True))
        except PdUnavailable as exc:
            raise _unavailable(contracts.PD_UNAVAILABLE, exc) from None
        if plans is None:
            return contracts.PdAnswer(answered=False)
        return contracts.PdAnswer(answered=True, plans=[contracts.PdPlan(**p) for p in plans])

    @activity.defn(name=contracts.ASK_EXTERNAL_ENDPOINT)
    def ask_external_endpoint(self, inp: contracts.AskExternalInput) -> contracts.ExternalAnswer:
        ep = inp.endpoint
        try:
            secret = ep.tls_secret.model_dump() if ep.tls_secret else None
            url = endpoint_url({"host": ep.host, "port": ep.port, "path": ep.path, "tlsSecret": secret})
            verify: ssl.SSLContext | bool = True
            if ep.tls_secret is not None:
                verify = tls_context(
                    self.kube(inp.kube_cluster).secret_data(ep.tls_secret.namespace, ep.tls_secret.name),
                    f"{ep.tls_secret.namespace}/{ep.tls_secret.name}",
                )
            replicas = recommended_replicas(
                url, inp.namespace, inp.cluster, inp.component, timeout_s=self.settings.http_timeout_s, verify=verify
            )
        except RecommenderUnavailable as exc:
            raise _unavailable(contracts.RECOMMENDER_UNAVAILABLE, exc) from None
        return contracts.ExternalAnswer(recommended_replicas=replicas)

    # ---- node capacity -------------------------------------------------------------------
    @activity.defn(name=contracts.OBSERVE_CAPACITY)
    def observe_capacity(self, inp: contracts.CapacityInput) -> contracts.CapacityAnswer:
        kube = self.kube(inp.kube_cluster)
        if self.settings.capacity_max_age_s > 0:
            free, manages = self._capacity.get(inp.kube_cluster, lambda: self._free_room(kube))
        else:
            free, manages = self._free_room(kube)
        fits = dict.fromkeys(inp.shapes, 0)
        for room in free:
            for name, shape in inp.shapes.items():
                slots = [room.pods]
                if shape.cpu_milli:
                    slots.append(room.cpu_m // shape.cpu_milli)
                if shape.memory_bytes:
                    slots.append(room.memory // shape.memory_bytes)
                fits[name] += max(0, min(slots))
        return contracts.CapacityAnswer(fits=fits, growth_manages_nodes=manages)

    def _free_room(self, kube: TidbKube) -> tuple[list[Resources], bool]:
        """Free room on each schedulable node (every pod listed), and whether growth adds nodes."""
        by_node: dict[str, list[Obj]] = defaultdict(list)
        for pod in kube.all_pods():
            node = (pod.get("spec") or {}).get("nodeName")
            if node and (pod.get("status") or {}).get("phase") not in TERMINAL_PHASES:
                by_node[node].append(pod)
        free: list[Resources] = []
        for raw in kube.nodes():
            node = node_info(raw, by_node.get(raw["metadata"]["name"], []))
            if not node.ready or node.unschedulable or any(t.effect != "PreferNoSchedule" for t in node.taints):
                continue
            free.append(node.allocatable - node.requested)
        return free, self._manages_nodes(kube)

    def _manages_nodes(self, kube: TidbKube) -> bool:
        """growth adds nodes here when it has node groups for this cluster (file or CRs)."""
        if self.node_groups_file:
            return True
        try:
            found = kube.custom.list_cluster_custom_object(CRD_GROUP, CRD_VERSION, NODE_GROUP_PLURAL, limit=1)
        except ApiException as e:
            if e.status == 404:
                return False
            raise
        return bool(found.get("items"))
