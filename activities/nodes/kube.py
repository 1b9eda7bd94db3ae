"""Kubernetes activities: observe pods, nodes and node groups; label nodes; write events and status.

Thin adapters: every decision about what the objects mean is made in scaling/.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from collections.abc import Collection
from typing import Any

from kubernetes import client
from kubernetes.client.rest import ApiException
from temporalio import activity

from activities.heartbeat import beat_progress, pause, resumed_deadline
from activities.kube.cache import NODE_GROUP_PLURAL, scale_down_kinds, versions, view
from activities.kube.client import ClusterClients, attempts_key, cluster_clients, create_event
from activities.kube.informer import Informer
from activities.nodes import metrics
from activities.nodes.requests import report_to_loop
from activities.nodes.wake import PendingPodsWake
from scaling.kube.models import NodeInfo, PodInfo
from scaling.kube.nodes import node_is_ready
from scaling.kube.pods import counts_as_demand
from scaling.kube.scheduling.cluster import Cluster
from scaling.kube.scheduling.volumes import Volumes, volumes_from
from scaling.nodes import contracts
from scaling.nodes.adoption import adopt_nodes
from scaling.nodes.contracts import (
    ClusterObservation,
    GroupStatusInput,
    ObserveInput,
    PodEventsInput,
    WaitNodesReadyInput,
    WaitReadyInput,
)
from scaling.nodes.headroom import headroom_pods
from scaling.nodes.models import CRD_GROUP, CRD_VERSION
from scaling.nodes.nodegroups import load_node_groups, parse_node_groups_yaml
from scaling.nodes.scale_up.daemonsets import daemonset_shapes
from scaling.nodes.scale_up.demand import MAX_SHAPES, SHAPE_SAMPLE, interpod, observe_demand
from scaling.nodes.state import requests_with_ready_node

TERMINAL_PHASES = ("Succeeded", "Failed")
API_READ_EVERY = 5  # readiness polls per read of the API server; the cache answers the others


class KubeActivities:
    def __init__(
        self,
        clusters: ClusterClients | client.ApiClient,
        known_providers: Collection[str],
        node_groups_file: str | None = None,
        component: str = "growth",
        wake: PendingPodsWake | None = None,
    ) -> None:
        self.clusters = cluster_clients(clusters)
        self.known_providers = set(known_providers)
        self.node_groups_file = node_groups_file
        self.component = component
        self.wake = wake  # wakes a loop when pods become unschedulable after its observation

    def _core(self, cluster: str) -> client.CoreV1Api:
        return client.CoreV1Api(self.clusters.api(cluster))

    def _custom(self, cluster: str) -> client.CustomObjectsApi:
        return client.CustomObjectsApi(self.clusters.api(cluster))

    # -- observe -------------------------------------------------------------------------
    def _node_group_objects(self, cluster: str) -> list[dict[str, Any]]:
        try:
            resp = self._custom(cluster).list_cluster_custom_object(CRD_GROUP, CRD_VERSION, NODE_GROUP_PLURAL)
        except ApiException as e:
            if e.status != 404:
                raise
            # The CRD is not installed (yet): no groups, so nothing is scaled; say why.
            activity.logger.warning("CRD %s.%s is not installed: no node groups", NODE_GROUP_PLURAL, CRD_GROUP)
            return []
        return list(resp.get("items", []))

    @activity.defn(name=contracts.OBSERVE_CLUSTER)
    def observe_cluster(self, inp: ObserveInput | str) -> ClusterObservation:
        """The loop's view from the worker's watch-fed cache (activities.kube.cache): no list per
        loop, and only pods and nodes that changed since the last loop are decoded again.

        A bare cluster name is what loops started before ObserveInput send."""
        inp = ObserveInput(cluster=inp) if isinstance(inp, str) else inp
        cluster = inp.cluster
        cache = self.clusters.caches(cluster)
        kinds = ["pods", "nodes", "daemonsets"] + ([] if self.node_groups_file else [NODE_GROUP_PLURAL])
        informers = cache.read(kinds, inp.fresh)
        # What the loop's scale-down evaluation would read, as a token: the loop skips that
        # evaluation when it equals the last one's and no timer of it ran out.
        scale_down_view = view(cache.read(scale_down_kinds(self.node_groups_file)), self.node_groups_file)
        pods_inf = informers["pods"]
        with pods_inf.cond:
            index = cache.pod_index
            pods_total, running = len(pods_inf.items), len(index.running)
            pending_keys = sorted(index.unschedulable)
            seen = index.unschedulable_added
        if self.wake is not None:
            self.wake.observed(cluster, pods_inf, index, seen)
        unschedulable = [p for p in cache.pod_infos(pods_inf, pending_keys) if counts_as_demand(p)]
        if self.node_groups_file:
            with open(self.node_groups_file) as f:
                groups, problems = parse_node_groups_yaml(f.read(), self.known_providers)
        else:
            groups_inf = informers[NODE_GROUP_PLURAL]
            if groups_inf.absent:
                # The CRD is not installed (yet): no groups, so nothing is scaled; say why.
                activity.logger.warning("CRD %s.%s is not installed: no node groups", NODE_GROUP_PLURAL, CRD_GROUP)
            with groups_inf.cond:
                group_objs = list(groups_inf.items.values())
            groups, problems = load_node_groups(group_objs, self.known_providers)
        # Nodes Cluster Autoscaler made for a migrated group count as that pool's.
        infos = adopt_nodes(cache.node_infos(informers["nodes"], pods_inf), groups)
        with informers["daemonsets"].cond:
            daemonsets = daemonset_shapes(list(informers["daemonsets"].items.values()))
        scheduling = self._cluster(cache, informers, infos, unschedulable, inp.fresh)
        obs = ClusterObservation(
            # Aggregated here: what crosses history stays small however large the cluster.
            demand=observe_demand(
                unschedulable,
                infos,
                virtual=headroom_pods(groups),
                sample=SHAPE_SAMPLE,
                max_shapes=MAX_SHAPES,
                cluster=scheduling,
            ).model_copy(update={"daemonsets": daemonsets}),
            groups=groups,
            invalid_groups=problems,
            pods_total=pods_total,
            pods_running=running,
            requests_with_ready_node=requests_with_ready_node(inp.requests, infos),
            resource_versions=versions(informers),
            scale_down_view=scale_down_view,
        )
        metrics.record_observation(cluster, obs)
        return obs

    def _cluster(
        self,
        cache: Any,
        informers: dict[str, Informer],
        infos: list[NodeInfo],
        pending: list[PodInfo],
        fresh: dict[str, str] | None,
    ) -> Cluster | None:
        """What the scheduler's filters read beyond a pending pod itself, only when they read
        it: the pods running on each node (spread, pod affinity, anti-affinity either way),
        namespace labels (namespaceSelector) and volumes (claims, PVs, classes)."""
        pods_inf = informers["pods"]
        index = cache.pod_index
        with pods_inf.cond:
            keys = [k for ks in index.by_node.values() for k in ks]
        running = [p for p in cache.pod_infos(pods_inf, keys) if p.phase not in TERMINAL_PHASES and p.node_name]
        if not any(
            p.spreads or p.topology_spreads or interpod(p) or p.pvc_names or p.host_ports for p in pending
        ) and not any(p.pod_anti_affinity for p in running):
            return None  # nothing pending reads them, and no running pod repels anything
        by_node: dict[str, list[PodInfo]] = {}
        for p in running:
            by_node.setdefault(p.node_name or "", []).append(p)
        namespaces: dict[str, dict[str, str]] = {}
        if any(
            t.namespace_selector is not None
            for p in (*pending, *running)
            for t in (*p.pod_affinity, *p.pod_anti_affinity)
        ):
            ns_inf = cache.read(["namespaces"], fresh)["namespaces"]
            with ns_inf.cond:
                namespaces = {
                    (o.get("metadata") or {}).get("name") or "": dict((o.get("metadata") or {}).get("labels") or {})
                    for o in ns_inf.items.values()
                }
        volumes = Volumes()
        if any(p.pvc_names for p in pending):
            kinds = cache.read(["persistentvolumeclaims", "persistentvolumes", "storageclasses"], fresh)
            lists = []
            for kind in ("persistentvolumeclaims", "persistentvolumes", "storageclasses"):
                with kinds[kind].cond:
                    lists.append(list(kinds[kind].items.values()))
            volumes = volumes_from(*lists)
        return Cluster(nodes=infos, pods=by_node, namespaces=namespaces, volumes=volumes)

    # -- nodes ---------------------------------------------------------------------------
    @activity.defn(name=contracts.WAIT_NODE_READY)
    async def wait_node_ready(self, inp: WaitReadyInput) -> bool:
        """Tell the loop the request is Provisioning (`report`), poll the Node until Ready or the
        readiness timeout, then set `labels` on it; heartbeats so a dead worker is noticed.

        The deadline rides in the heartbeat, so a retry on another worker (this one killed or
        shut down) keeps the request's readiness timeout instead of starting it again.
        Async: hundreds of requests wait at once in a burst, and a waiting one must not hold a
        worker thread that the loop's own observation needs (each read runs in a thread)."""
        deadline = resumed_deadline(inp.timeout_s)
        core = self._core(inp.cluster)
        nodes = self.clusters.caches(inp.cluster).informer("nodes")
        await report_to_loop(inp)
        for poll in itertools.count():
            beat_progress(deadline)
            # The watch-fed cache answers most polls: at 1,000 requests in flight, a read each
            # was ~500 GETs a second. The API server is still asked now and then, so a stuck
            # watch costs a few polls, not the readiness timeout.
            if _cached_ready(nodes, inp.node_name) or (
                poll % API_READ_EVERY == 0 and await asyncio.to_thread(_node_ready, core, inp.node_name)
            ):
                if inp.labels:  # a failed patch fails this attempt; the retry finds it Ready again
                    await asyncio.to_thread(core.patch_node, inp.node_name, {"metadata": {"labels": inp.labels}})
                return True
            if time.time() >= deadline:
                return False
            await pause(min(inp.poll_s, deadline - time.time()))

    @activity.defn(name=contracts.WAIT_NODES_READY)
    async def wait_nodes_ready(self, inp: WaitNodesReadyInput) -> dict[str, bool]:
        """One round of a NodeRequestBatch's readiness waits (one activity where a NodeRequest
        each had its own): poll every node as wait_node_ready does, label each Ready one, and
        return at the first poll that settles any (True: Ready and labelled; False: past its
        deadline), or after `round_s` with nothing settled. Nodes not named in the result are
        still waiting. A retry polls again: labelling a Ready node twice changes nothing."""
        core = self._core(inp.cluster)
        nodes = self.clusters.caches(inp.cluster).informer("nodes")
        end = time.time() + inp.round_s

        async def ready(name: str, poll: int) -> bool:
            if _cached_ready(nodes, name):
                return True
            # The API server from a round's fifth poll on, not its first: a round restarts each
            # time a node settles, and a read of every waiting node per restart would be most of
            # the reads. A stuck watch settles nothing, so its rounds reach the fifth poll.
            return poll % API_READ_EVERY == API_READ_EVERY - 1 and await asyncio.to_thread(_node_ready, core, name)

        poll = 0
        while True:
            activity.heartbeat()
            answers = await asyncio.gather(*(ready(w.node_name, poll) for w in inp.nodes))
            settled: dict[str, bool] = {}
            for wait, is_ready in zip(inp.nodes, answers, strict=True):
                if is_ready:
                    if wait.labels:  # a failed patch fails the round; the retry finds it Ready again
                        await asyncio.to_thread(core.patch_node, wait.node_name, {"metadata": {"labels": wait.labels}})
                    settled[wait.node_name] = True
                elif time.time() >= wait.deadline:
                    settled[wait.node_name] = False
            if settled or time.time() >= end:
                return settled
            await pause(min(inp.poll_s, end - time.time()))
            poll += 1

    # -- reporting -----------------------------------------------------------------------
    @activity.defn(name=contracts.EMIT_POD_EVENTS)
    def emit_pod_events(self, inp: PodEventsInput) -> None:
        core = self._core(inp.cluster)
        for i, ev in enumerate(inp.events):
            pod = client.V1ObjectReference(kind="Pod", namespace=ev.namespace, name=ev.pod_name, uid=ev.pod_uid)
            create_event(core, ev.namespace, pod, ev.reason, ev.message, ev.type, self.component, attempts_key(i))

    @activity.defn(name=contracts.REPORT_NODE_GROUP_STATUS)
    def report_node_group_status(self, inp: GroupStatusInput) -> None:
        """Write each invalid group's problem on its status; clear it on valid ones."""
        if self.node_groups_file:
            for p in inp.problems:
                activity.logger.warning("invalid %s %s: %s: %s", p.kind, p.name, p.field, p.message)
            return
        by_name = {p.name: p for p in inp.problems}
        custom = self._custom(inp.cluster)
        for obj in self._node_group_objects(inp.cluster):
            name = obj["metadata"]["name"]
            problem = by_name.get(name)
            status = (
                {"valid": False, "field": problem.field, "message": problem.message}
                if problem
                else {"valid": True, "field": "", "message": ""}
            )
            if (obj.get("status") or {}) == status:
                continue
            custom.patch_cluster_custom_object_status(
                CRD_GROUP, CRD_VERSION, NODE_GROUP_PLURAL, name, {"status": status}
            )


def _cached_ready(nodes: Informer, name: str) -> bool:
    """Ready as the worker's cache has it (False while the cache is not synced yet)."""
    with nodes.cond:
        node = nodes.items.get(name) if nodes.synced and not nodes.absent else None
        return node is not None and node_is_ready(node)


def _node_ready(core: client.CoreV1Api, name: str) -> bool:
    try:
        # Raw JSON: in a burst hundreds of requests poll at once, and the client's model
        # deserialisation of each Node was most of the worker's time spent waiting.
        resp = core.read_node(name, _preload_content=False)
    except ApiException as e:
        if e.status == 404:  # a node registers some time after the machine starts
            return False
        raise
    return node_is_ready(json.loads(resp.data))
