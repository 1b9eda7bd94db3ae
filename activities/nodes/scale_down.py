"""Kubernetes activities of scale-down: observe, taint/annotate, cordon, evict, delete, events.

Thin adapters. Every one is idempotent, because a worker killed mid-drain replays them:
tainting twice adds one taint, evicting a pod already gone answers "gone", deleting a Node
already deleted succeeds.
"""

from __future__ import annotations

import asyncio
import enum
import json
import threading
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any

from kubernetes import client
from kubernetes.client.rest import ApiException
from temporalio import activity
from temporalio.client import WorkflowExecutionStatus
from temporalio.service import RPCError, RPCStatusCode

from activities.heartbeat import beat_progress, pause, resumed_deadline
from activities.kube.cache import (
    LONGHORN_GROUP,
    LONGHORN_VERSION,
    NODE_GROUP_PLURAL,
    ClusterCache,
    scale_down_kinds,
    view,
)
from activities.kube.client import ClusterClients, attempts_key, cluster_clients, create_event, raw_list
from activities.kube.informer import Informer
from activities.nodes.metrics import record_blocked
from activities.nodes.providers.base import NodeProvider
from scaling.kube.drain import (
    ANNOTATION_SCALE_DOWN_AT,
    DELETION_TAINT_KEYS,
    TAINT_DELETION_CANDIDATE,
    TAINT_DISRUPTED,
    TAINT_TO_BE_DELETED,
    pdb_from_object,
)
from scaling.kube.models import PodInfo
from scaling.kube.nodes import node_info
from scaling.kube.pods import controlled_pods, controller_uid, pod_info
from scaling.nodes import contracts
from scaling.nodes.adoption import adopt_nodes
from scaling.nodes.catalogue import hourly_prices
from scaling.nodes.contracts import (
    DisruptedTaintInput,
    EvictInOrderInput,
    EvictPodInput,
    EvictResult,
    MarkNodeInput,
    NodeEventsInput,
    NodeRef,
    NodeRemovalCheck,
    NodeRemovalCheckInput,
    OrderedEviction,
    OrphanObservation,
    ReplacementPlan,
    ReplacementPlanInput,
    ScaleDownEvaluation,
    ScaleDownEvaluationInput,
    ScaleDownObservation,
    SoftTaintInput,
    UnmarkNodeInput,
    WaitPodsGoneInput,
)
from scaling.nodes.disruption.multi_node import plan_for_input
from scaling.nodes.gc.orphans import Orphan, OrphanSearchInput, find_orphans
from scaling.nodes.models import CRD_GROUP, CRD_VERSION, LABEL_GROUP
from scaling.nodes.nodegroups import load_node_groups, parse_node_groups_yaml
from scaling.nodes.scale_down.evaluation import check_node_removal, evaluation_of, for_input, reuse_key
from scaling.nodes.scale_down.storage import LonghornState, longhorn_state_from_objects


@dataclass(frozen=True)
class _Evaluated:
    """An evaluation and what it was made from: reused for the same key while at <= now < until."""

    key: tuple[str, str, str]  # the cache's view, the input's reuse_key, the prices
    evaluation: ScaleDownEvaluation
    at: float
    until: float


class NodeChange(enum.Enum):
    """What ScaleDownActivities._change_node came to."""

    GONE = "gone"  # no such node
    AS_ASKED = "as_asked"  # nothing to change
    PATCHED = "patched"


def _ca_taint(key: str, effect: str) -> dict[str, str]:
    """A Cluster Autoscaler deletion taint: the unix time it was put on as its value (utils/taints)."""
    return {"key": key, "value": str(int(time.time())), "effect": effect}


PRICES_WAIT_S = 5.0  # how long an evaluation waits for a provider's catalogue prices
# Set when growth cordoned the node itself, so that un-marking uncordons only what growth cordoned.
ANNOTATION_CORDONED = "growth.autoscaling.dev/cordoned"
CONFLICT_RETRIES = 5  # reads and patches of a node others write at the same moment


def _adopted(obs: ScaleDownObservation) -> ScaleDownObservation:
    """Nodes Cluster Autoscaler made for a migrated group are scaled down as their pool's."""
    return obs.model_copy(update={"nodes": adopt_nodes(obs.nodes, obs.groups)})


class ScaleDownActivities:
    def __init__(
        self,
        clusters: ClusterClients | client.ApiClient,
        known_providers: Collection[str],
        node_groups_file: str | None = None,
        providers: dict[str, NodeProvider] | None = None,
        component: str = "growth",
    ) -> None:
        self.clusters = cluster_clients(clusters)
        self.known_providers = set(known_providers)
        self.node_groups_file = node_groups_file
        self.providers = providers or {}
        self.component = component
        self._memo: dict[str, _Evaluated] = {}  # cluster -> its last evaluation that may be reused
        self._memo_lock = threading.Lock()

    def _core(self, cluster: str) -> client.CoreV1Api:
        return client.CoreV1Api(self.clusters.api(cluster))

    def _custom(self, cluster: str) -> client.CustomObjectsApi:
        return client.CustomObjectsApi(self.clusters.api(cluster))

    # -- observe -------------------------------------------------------------------------
    def _groups(self, cluster: str) -> list:
        if self.node_groups_file:
            with open(self.node_groups_file) as f:
                groups, _ = parse_node_groups_yaml(f.read(), self.known_providers)
            return groups
        try:
            objs = (
                self._custom(cluster)
                .list_cluster_custom_object(CRD_GROUP, CRD_VERSION, NODE_GROUP_PLURAL)
                .get("items", [])
            )
        except ApiException as e:
            if e.status != 404:
                raise
            objs = []
        groups, _ = load_node_groups(objs, self.known_providers)
        return groups

    def _longhorn(self, cluster: str, plural: str) -> list[dict[str, Any]] | None:
        try:
            return list(
                self._custom(cluster)
                .list_cluster_custom_object(LONGHORN_GROUP, LONGHORN_VERSION, plural)
                .get("items", [])
            )
        except ApiException as e:
            if e.status == 404:  # no Longhorn CRDs in this cluster
                return None
            raise

    def observe_scale_down(self, cluster: str) -> ScaleDownObservation:
        """All pods (scale-down must see every pod, not only pending ones), nodes, PDBs with
        their status, node groups, and Longhorn's objects when its CRDs exist: what
        evaluate_scale_down reads. Not an activity (it grows with the cluster): tests read it."""
        return self._observe(cluster)

    @activity.defn(name=contracts.EVALUATE_SCALE_DOWN)
    async def evaluate_scale_down(self, inp: ScaleDownEvaluationInput) -> ScaleDownEvaluation:
        """The loop's scale-down evaluation beside the cluster (``evaluate``), with the providers'
        catalogue prices, which order consolidation's candidates (Karpenter's price per unit of
        disruption: scaling.nodes.disruption.multi_node.savings_ratio)."""
        return await asyncio.to_thread(self.evaluate, inp, await self._prices())

    async def _prices(self) -> dict[str, float]:
        """The hourly prices of every provider this worker has (each caches its catalogue). A provider
        that cannot answer within PRICES_WAIT_S prices nothing: its nodes go by disruption cost alone,
        and the evaluation goes on (hcloud retries an unreachable API for tens of seconds itself)."""
        prices: dict[str, float] = {}
        for name in sorted(self.providers):
            try:
                prices |= hourly_prices(await asyncio.wait_for(self.providers[name].server_types(), PRICES_WAIT_S))
            except Exception as e:  # noqa: BLE001 - an order hint, never worth failing the evaluation for
                activity.logger.warning("no prices from provider %s: %r", name, e)
        return prices

    def evaluate(self, inp: ScaleDownEvaluationInput, prices: dict[str, float] | None = None) -> ScaleDownEvaluation:
        """Observe as observe_scale_down does, plan with the workflow's timers
        (scaling.nodes.scale_down.evaluation), return only the bounded result. The cluster's objects
        stay in this process.

        When nothing it reads has changed since an earlier evaluation with the same input (the
        informers' generations, the workflow's state but for `now`, the prices), and `now` is before
        that evaluation's `stable_until`, the earlier answer is the answer: an idle loop of a
        10,000-pod cluster costs no plan."""
        prices = prices or {}
        cache = self.clusters.caches(inp.cluster)
        informers = cache.read(scale_down_kinds(self.node_groups_file), inp.fresh)
        # Read before the objects: a change in between makes the key older, never newer.
        key = (view(informers, self.node_groups_file), reuse_key(inp), repr(sorted(prices.items())))
        with self._memo_lock:
            memo = self._memo.get(inp.cluster)
        if memo is not None and memo.key == key and memo.at <= inp.now < memo.until:
            record_blocked(inp.cluster, memo.evaluation.candidates)
            return for_input(memo.evaluation, inp)
        ev = evaluation_of(self._observation(inp.cluster, cache, informers), inp, prices)
        ev.view = key[0]
        with self._memo_lock:
            if ev.stable_until is None:
                self._memo.pop(inp.cluster, None)
            else:
                self._memo[inp.cluster] = _Evaluated(key, ev, inp.now, ev.stable_until)
        record_blocked(inp.cluster, ev.candidates)
        return for_input(ev, inp)

    @activity.defn(name=contracts.PLAN_REPLACEMENT)
    async def plan_replacement(self, inp: ReplacementPlanInput) -> ReplacementPlan:
        """What a NodeReplacement must make Ready before its node is drained
        (scaling.nodes.disruption.replacement), planned beside the cluster with the providers'
        catalogue; only the plan for that node's pods (a multi-node consolidation's: its nodes') goes back."""
        obs = await asyncio.to_thread(self._cached, inp.cluster, {})
        # Every group's providers (each caches its catalogue): a refusal's digest covers every group's
        # prices, as the evaluation reads them (scaling.nodes.disruption.refusals.prices_digest).
        providers = {p.provider for g in obs.groups for p in g.pools}
        catalogue = [
            t for name in sorted(providers) if name in self.providers for t in await self.providers[name].server_types()
        ]
        return plan_for_input(obs, catalogue, inp)

    @activity.defn(name=contracts.CHECK_NODE_REMOVAL)
    def check_node_removal(self, inp: NodeRemovalCheckInput) -> NodeRemovalCheck:
        """Re-check one node beside the cluster (scaling.nodes.scale_down.evaluation); only the
        verdict about that node goes back. From the cache when the input says so; the re-check
        right before a machine is deleted reads the API server."""
        obs = self._cached(inp.cluster, {}) if inp.from_cache else self._rechecked(inp.cluster, inp.node)
        return check_node_removal(obs, inp)

    def _rechecked(self, cluster: str, node: str) -> ScaleDownObservation:
        """What the re-check right before a machine goes reads: the node and the pods on it from
        the API server (`spec.nodeName=<node>`, as a kubelet lists its own), every other pod and
        node (the room the node's pods would move to) from the worker's cache, and node groups,
        PDBs and Longhorn's objects from the API server. Listing every pod of a 30,000-pod
        cluster for each node removed is what this replaces."""
        core = self._core(cluster)
        cache = self.clusters.caches(cluster)
        informers = cache.read(["pods", "nodes"])
        pods_inf = informers["pods"]
        raw_on_node = raw_list(core.list_pod_for_all_namespaces, field_selector=f"spec.nodeName={node}")
        with pods_inf.cond:
            here = cache.pod_index.by_node.get(node, set())
            elsewhere = [k for k in pods_inf.items if k not in here]
        pods = [*cache.pod_infos(pods_inf, elsewhere), *(pod_info(p) for p in raw_on_node)]
        nodes = [n for n in cache.node_infos(informers["nodes"], pods_inf) if n.name != node]
        this = self._read_node(cluster, node)
        if this is not None:
            nodes.append(node_info(this, raw_on_node))
        policy = client.PolicyV1Api(self.clusters.api(cluster))
        return _adopted(
            ScaleDownObservation(
                nodes=nodes,
                pods=pods,
                pdbs=[pdb_from_object(o) for o in raw_list(policy.list_pod_disruption_budget_for_all_namespaces)],
                groups=self._groups(cluster),
                storage=self._storage(cluster, pods),
            )
        )

    def _cached(self, cluster: str, fresh: dict[str, str]) -> ScaleDownObservation:
        """What _observe lists, from the worker's watch-fed cache (activities.kube.cache)."""
        cache = self.clusters.caches(cluster)
        return self._observation(cluster, cache, cache.read(scale_down_kinds(self.node_groups_file), fresh))

    def _observation(self, cluster: str, cache: ClusterCache, informers: dict[str, Informer]) -> ScaleDownObservation:
        pods = cache.pod_infos(informers["pods"])

        def items(kind: str) -> list[dict[str, Any]] | None:
            inf = informers[kind]
            with inf.cond:
                return None if inf.absent else list(inf.items.values())

        storage = None
        volumes = items("volumes")
        if volumes is not None:
            storage = longhorn_state_from_objects(
                volumes, items("replicas") or [], items("engines") or [], items("instancemanagers") or [], pods
            )
        if self.node_groups_file:
            groups = self._groups(cluster)
        else:
            groups, _ = load_node_groups(items(NODE_GROUP_PLURAL) or [], self.known_providers)
        return _adopted(
            ScaleDownObservation(
                nodes=cache.node_infos(informers["nodes"], informers["pods"]),
                pods=pods,
                pdbs=[pdb_from_object(o) for o in items("poddisruptionbudgets") or []],
                groups=groups,
                storage=storage,
            )
        )

    def _observe(self, cluster: str) -> ScaleDownObservation:
        core = self._core(cluster)
        raw_pods = raw_list(core.list_pod_for_all_namespaces)
        raw_nodes = raw_list(core.list_node)
        by_node: dict[str, list[dict[str, Any]]] = {}
        for p in raw_pods:
            n = (p.get("spec") or {}).get("nodeName")
            if n:
                by_node.setdefault(n, []).append(p)
        pods = [pod_info(p) for p in raw_pods]
        policy = client.PolicyV1Api(self.clusters.api(cluster))
        pdbs = [pdb_from_object(o) for o in raw_list(policy.list_pod_disruption_budget_for_all_namespaces)]
        return _adopted(
            ScaleDownObservation(
                nodes=[node_info(n, by_node.get(n["metadata"]["name"], [])) for n in raw_nodes],
                pods=pods,
                pdbs=pdbs,
                groups=self._groups(cluster),
                storage=self._storage(cluster, pods),
            )
        )

    def _storage(self, cluster: str, pods: list[PodInfo]) -> LonghornState | None:
        """Longhorn's state from the API server, or None without its CRDs."""
        volumes = self._longhorn(cluster, "volumes")
        if volumes is None:
            return None
        return longhorn_state_from_objects(
            volumes,
            self._longhorn(cluster, "replicas") or [],
            self._longhorn(cluster, "engines") or [],
            self._longhorn(cluster, "instancemanagers") or [],
            pods,
        )

    # -- marking -------------------------------------------------------------------------
    def _read_node(self, cluster: str, name: str) -> dict[str, Any] | None:
        try:
            resp = self._core(cluster).read_node(name, _preload_content=False)
        except ApiException as e:
            if e.status == 404:
                return None
            raise
        import json

        return json.loads(resp.data)

    def _change_node(
        self, cluster: str, name: str, change: Callable[[dict[str, Any]], dict[str, Any] | None]
    ) -> NodeChange:
        """Patch the node with ``change(node)`` (None: nothing to change) on the version it was read at,
        and read again on a conflict (judged again); what came of it. A patch replaces spec.taints whole, and
        others write it too (the node lifecycle controller's not-ready and pressure taints, users): one
        from a stale read would put back a taint since removed or drop one since added. Cluster
        Autoscaler updates its taints so too (utils/taints: Update on the read's resourceVersion, again
        on a conflict)."""
        conflicts = 0
        while True:
            node = self._read_node(cluster, name)
            if node is None:
                return NodeChange.GONE
            body = change(node)
            if body is None:
                return NodeChange.AS_ASKED
            body.setdefault("metadata", {})["resourceVersion"] = node["metadata"]["resourceVersion"]
            try:
                self._core(cluster).patch_node(name, body)
                return NodeChange.PATCHED
            except ApiException as e:
                if e.status == 404:  # the node is gone already: nothing to mark or unmark
                    return NodeChange.GONE
                conflicts += 1
                if e.status != 409 or conflicts == CONFLICT_RETRIES:
                    raise

    @activity.defn(name=contracts.MARK_NODE_FOR_SCALE_DOWN)
    def mark_node_for_scale_down(self, inp: MarkNodeInput) -> bool:
        """Annotate ScaleDownAt and taint the node: DeletionCandidateOfClusterAutoscaler
        (PreferNoSchedule) while it waits (``candidate``), else ToBeDeletedByClusterAutoscaler
        (NoSchedule), which takes the soft taint's place. False if the node is gone."""
        key, effect = (
            (TAINT_DELETION_CANDIDATE, "PreferNoSchedule") if inp.candidate else (TAINT_TO_BE_DELETED, "NoSchedule")
        )

        def mark(node: dict[str, Any]) -> dict[str, Any]:
            taints = list((node.get("spec") or {}).get("taints") or [])
            if not inp.candidate:
                taints = [t for t in taints if t.get("key") != TAINT_DELETION_CANDIDATE]
            if not any(t.get("key") == key for t in taints):
                taints.append(_ca_taint(key, effect))
            return {
                "metadata": {"annotations": {ANNOTATION_SCALE_DOWN_AT: inp.scale_down_at}},
                "spec": {"taints": taints},
            }

        return self._change_node(inp.cluster, inp.node, mark) is not NodeChange.GONE

    @activity.defn(name=contracts.UNMARK_NODE)
    def unmark_node(self, inp: UnmarkNodeInput) -> None:
        """Remove the taint and the annotation; uncordon if growth cordoned it."""

        def unmark(node: dict[str, Any]) -> dict[str, Any]:
            meta, spec = node.get("metadata") or {}, node.get("spec") or {}
            taints = [t for t in spec.get("taints") or [] if t.get("key") not in DELETION_TAINT_KEYS]
            body: dict[str, Any] = {
                "metadata": {"annotations": {ANNOTATION_SCALE_DOWN_AT: None, ANNOTATION_CORDONED: None}},
                "spec": {"taints": taints},
            }
            if inp.uncordon and (meta.get("annotations") or {}).get(ANNOTATION_CORDONED) == "true":
                body["spec"]["unschedulable"] = False
            return body

        self._change_node(inp.cluster, inp.node, unmark)

    @activity.defn(name=contracts.TAINT_DISRUPTED)
    def taint_disrupted(self, inp: DisruptedTaintInput) -> list[str]:
        """karpenter.sh/disrupted:NoSchedule added to (``present``) or lifted from each node, as
        Karpenter's RequireNoScheduleTaint does, with the deletion marks too when ``marks``; the nodes
        found (a node gone needs neither)."""

        lifted = {TAINT_DISRUPTED, *DELETION_TAINT_KEYS} if inp.marks else {TAINT_DISRUPTED}

        def change(node: dict[str, Any]) -> dict[str, Any] | None:
            taints = list((node.get("spec") or {}).get("taints") or [])
            if inp.present:
                if any(t.get("key") == TAINT_DISRUPTED for t in taints):
                    return None
                return {"spec": {"taints": [*taints, {"key": TAINT_DISRUPTED, "effect": "NoSchedule"}]}}
            kept = [t for t in taints if t.get("key") not in lifted]
            annotated = ANNOTATION_SCALE_DOWN_AT in ((node.get("metadata") or {}).get("annotations") or {})
            if len(kept) == len(taints) and not (inp.marks and annotated):
                return None
            body: dict[str, Any] = {"spec": {"taints": kept}}
            if inp.marks and annotated:
                body["metadata"] = {"annotations": {ANNOTATION_SCALE_DOWN_AT: None}}
            return body

        return [n for n in inp.nodes if self._change_node(inp.cluster, n, change) is not NodeChange.GONE]

    @activity.defn(name=contracts.UPDATE_SOFT_TAINTS)
    def update_soft_deletion_taints(self, inp: SoftTaintInput) -> list[str]:
        """Cluster Autoscaler's soft taint, DeletionCandidateOfClusterAutoscaler:PreferNoSchedule with
        the time as its value, lifted from ``untaint`` first and put on ``taint``, each judged on the
        node as read now: a node tainted ToBeDeleted is left alone, one already as asked is not
        written. No call starts once ``time_budget_s`` has passed (CA's budgetTracker): a later
        evaluation names the rest again. The nodes changed."""
        start = time.monotonic()
        changed: list[str] = []
        for name, present in [*((n, False) for n in inp.untaint), *((n, True) for n in inp.taint)]:
            if time.monotonic() - start >= inp.time_budget_s:
                break

            def change(node: dict[str, Any], present: bool = present) -> dict[str, Any] | None:
                taints = list((node.get("spec") or {}).get("taints") or [])
                keys = {t.get("key") for t in taints}
                if TAINT_TO_BE_DELETED in keys or (TAINT_DELETION_CANDIDATE in keys) == present:
                    return None
                if present:
                    return {"spec": {"taints": [*taints, _ca_taint(TAINT_DELETION_CANDIDATE, "PreferNoSchedule")]}}
                return {"spec": {"taints": [t for t in taints if t.get("key") != TAINT_DELETION_CANDIDATE]}}

            if self._change_node(inp.cluster, name, change) is NodeChange.PATCHED:
                changed.append(name)
        return changed

    @activity.defn(name=contracts.CORDON_NODE)
    def cordon_node(self, inp: NodeRef) -> None:

        def cordon(node: dict[str, Any]) -> dict[str, Any] | None:
            if (node.get("spec") or {}).get("unschedulable"):
                return None  # cordoned by someone else (then never uncordoned by growth)
            return {"metadata": {"annotations": {ANNOTATION_CORDONED: "true"}}, "spec": {"unschedulable": True}}

        self._change_node(inp.cluster, inp.node, cordon)

    # -- drain ---------------------------------------------------------------------------
    @activity.defn(name=contracts.EVICT_POD)
    def evict_pod(self, inp: EvictPodInput) -> EvictResult:
        """Through the Eviction API, so PodDisruptionBudgets are honoured by the API server."""
        core = self._core(inp.cluster)
        if inp.node is not None:
            try:
                pod = json.loads(core.read_namespaced_pod(inp.name, inp.namespace, _preload_content=False).data)
            except ApiException as e:
                if e.status == 404:
                    return EvictResult(outcome="gone")
                raise
            if (pod.get("spec") or {}).get("nodeName") != inp.node:
                return EvictResult(outcome="gone")  # a pod of that name elsewhere is another one
        body = client.V1Eviction(metadata=client.V1ObjectMeta(name=inp.name, namespace=inp.namespace))
        try:
            core.create_namespaced_pod_eviction(inp.name, inp.namespace, body)
        except ApiException as e:
            if e.status == 404:
                return EvictResult(outcome="gone")
            if e.status == 429:
                return EvictResult(outcome="refused", message=_api_message(e))
            raise
        return EvictResult(outcome="evicted")

    @activity.defn(name=contracts.EVICT_IN_ORDER)
    async def evict_in_order(self, inp: EvictInOrderInput) -> list[OrderedEviction]:
        """Evict ``pods`` in their order, each once the one before is bound again: its controller has
        as many pods on nodes as before the eviction (its new pod bound), or made none in
        ``created_timeout_s``, or ``bound_timeout_s`` passed. So the scheduler takes them in this
        order (a drain's evictions together race). One a PDB refuses is asked again for
        ``refused_retry_s``, then left to its node's drain, which retries it. A retry resumes where
        the heartbeat says the last attempt was, waiting as it would have."""
        details = activity.info().heartbeat_details
        step: dict[str, Any] = details[0] if details and isinstance(details[0], dict) else {}
        done = [OrderedEviction.model_validate(d) for d in step.get("done") or []]
        core = self._core(inp.cluster)
        index = len(done)
        waiting: dict[str, Any] | None = step.get("waiting")
        if waiting is not None and await self._still_there(core, inp.pods[index - 1], waiting["pod"]):
            index, waiting = index - 1, None  # the last attempt stopped before its eviction: again
            done = done[:-1]

        def beat() -> None:
            activity.heartbeat({"done": [d.model_dump() for d in done], "waiting": waiting})

        while True:
            if waiting is not None:
                await self._wait_bound(core, inp, waiting, beat)
                waiting = None
            if index >= len(inp.pods):
                return done
            key = inp.pods[index]
            index += 1
            ns, name = key.split("/", 1)
            try:
                obj = json.loads(
                    (await asyncio.to_thread(core.read_namespaced_pod, name, ns, _preload_content=False)).data
                )
            except ApiException as e:
                if e.status != 404:
                    raise
                obj = {}
            if (obj.get("spec") or {}).get("nodeName") not in inp.nodes:
                done.append(OrderedEviction(pod=key, outcome="gone", at=time.time()))
                beat()
                continue  # gone, or on a node whose re-check kept it (not cordoned): it serves on
            uid = controller_uid(obj)
            if uid:  # told before the eviction: a retry after it waits, one before it evicts again
                before = controlled_pods(await self._namespace_pods(core, ns), uid)[0]
                pod_uid = (obj.get("metadata") or {}).get("uid", "")
                waiting = {"namespace": ns, "pod": pod_uid, "uid": uid, "bound": before, "since": time.time()}
                done.append(OrderedEviction(pod=key, outcome="evicted", at=time.time()))
                beat()
                done.pop()
            evict = EvictPodInput(cluster=inp.cluster, namespace=ns, name=name)
            res = await asyncio.to_thread(self.evict_pod, evict)
            # A PDB refuses while the pod evicted before is bound and not yet Ready (the budget counts
            # healthy pods). Skipped, the next pod went first and took the room the order kept for this
            # one (likely the consolidation bench's seed-11 miss of 30 Nov: an api before a cache, the
            # cache then pending and a node bought for it). So it is asked again, as a drain asks.
            refused_until = time.time() + inp.refused_retry_s
            while res.outcome == "refused" and time.time() < refused_until:
                beat()
                await asyncio.sleep(inp.refused_poll_s)
                res = await asyncio.to_thread(self.evict_pod, evict)
            if res.outcome != "evicted":
                waiting = None
            done.append(OrderedEviction(pod=key, outcome=res.outcome, at=time.time()))
            beat()

    async def _still_there(self, core: client.CoreV1Api, key: str, uid: str) -> bool:
        """Whether pod ``key`` (namespace/name) is the one of ``uid``, not being deleted."""
        ns, name = key.split("/", 1)
        try:
            pod = await asyncio.to_thread(core.read_namespaced_pod, name, ns, _preload_content=False)
        except ApiException as e:
            if e.status != 404:
                raise
            return False
        meta = json.loads(pod.data).get("metadata") or {}
        return meta.get("uid") == uid and not meta.get("deletionTimestamp")

    async def _namespace_pods(self, core: client.CoreV1Api, ns: str) -> list[dict[str, Any]]:
        return await asyncio.to_thread(raw_list, core.list_namespaced_pod, namespace=ns)

    async def _wait_bound(
        self, core: client.CoreV1Api, inp: EvictInOrderInput, waiting: dict[str, Any], beat: Callable[[], None]
    ) -> None:
        """Until the evicted pod's controller has ``bound`` pods on nodes again (see evict_in_order)."""
        since = float(waiting["since"])
        while True:
            pods = await self._namespace_pods(core, waiting["namespace"])
            bound, pending = controlled_pods(pods, waiting["uid"], but=waiting["pod"])
            elapsed = time.time() - since
            if (
                bound >= waiting["bound"]
                or (not pending and elapsed >= inp.created_timeout_s)
                or elapsed >= inp.bound_timeout_s
            ):
                return
            beat()
            await pause(inp.poll_s)

    @activity.defn(name=contracts.WAIT_PODS_GONE)
    async def wait_pods_gone(self, inp: WaitPodsGoneInput) -> list[str]:
        """Poll until none of ``pods`` is still on the node; returns those left at the timeout.
        Async, like wait_node_ready: a wait holds no worker thread, and a retry elsewhere keeps
        the drain's deadline (carried in the heartbeat)."""
        deadline = resumed_deadline(inp.timeout_s)
        wanted = set(inp.pods)
        core = self._core(inp.cluster)
        while True:
            on_node = await asyncio.to_thread(
                raw_list, core.list_pod_for_all_namespaces, field_selector=f"spec.nodeName={inp.node}"
            )
            left = sorted(
                f"{p['metadata'].get('namespace', 'default')}/{p['metadata']['name']}"
                for p in on_node
                if f"{p['metadata'].get('namespace', 'default')}/{p['metadata']['name']}" in wanted
            )
            beat_progress(deadline, left=len(left))
            if not left or time.time() >= deadline:
                return left
            await pause(inp.poll_s)

    @activity.defn(name=contracts.DELETE_NODE_OBJECT)
    def delete_node_object(self, inp: NodeRef) -> None:
        try:
            self._core(inp.cluster).delete_node(inp.node)
        except ApiException as e:
            if e.status != 404:
                raise

    # -- reporting -----------------------------------------------------------------------
    @activity.defn(name=contracts.EMIT_NODE_EVENTS)
    def emit_node_events(self, inp: NodeEventsInput) -> None:
        core = self._core(inp.cluster)
        for i, ev in enumerate(inp.events):
            node = client.V1ObjectReference(kind="Node", name=ev.node, api_version="v1")
            create_event(core, "default", node, ev.reason, ev.message, ev.type, self.component, attempts_key(i))

    @activity.defn(name=contracts.FIND_ORPHANS)
    async def find_orphans(self, inp: OrphanSearchInput) -> list[Orphan]:
        """The loop's orphans (scaling.nodes.gc.orphans.find_orphans) from the worker's cache of
        nodes and each provider's machines: only orphans go back, never every node and machine."""
        nodes = await asyncio.to_thread(self._managed_provider_ids, inp.cluster, inp.fresh)
        obs = await self._with_machines(OrphanObservation(nodes=nodes), inp.cluster, inp.providers)
        return find_orphans(obs, inp)

    def _managed_provider_ids(self, cluster: str, fresh: dict[str, str]) -> dict[str, str]:
        nodes = self.clusters.caches(cluster).read(["nodes"], fresh)["nodes"]
        with nodes.cond:
            return {
                n["metadata"]["name"]: (n.get("spec") or {}).get("providerID", "")
                for n in nodes.items.values()
                if LABEL_GROUP in ((n.get("metadata") or {}).get("labels") or {})
            }

    async def _with_machines(self, obs: OrphanObservation, cluster: str, providers: list[str]) -> OrphanObservation:
        for name in providers:
            provider = self.providers.get(name)
            if provider is None or not hasattr(provider, "list_machines"):
                continue
            machines = await provider.list_machines(cluster)
            obs.machines.extend(
                {"provider": m.provider, "provider_id": m.provider_id, "name": m.name} for m in machines
            )
            obs.checked.append(name)
        return obs


@activity.defn(name=contracts.REMOVALS_ENDED)
async def removals_ended(workflow_ids: list[str]) -> list[str]:
    """Those of ``workflow_ids`` whose latest run is closed, or that the server no longer knows: a
    removal that ended with a final report has said so to the loop before it closed (the signal is in
    the loop's history first), so these ended without one (terminated, failed)."""

    async def ended(wid: str) -> bool:
        try:
            described = await activity.client().get_workflow_handle(wid).describe()
        except RPCError as err:
            if err.status == RPCStatusCode.NOT_FOUND:
                return True
            raise
        return described.status != WorkflowExecutionStatus.RUNNING

    found = await asyncio.gather(*(ended(w) for w in workflow_ids))
    return [w for w, gone in zip(workflow_ids, found, strict=True) if gone]


def _api_message(e: ApiException) -> str:
    import json

    try:
        return str(json.loads(e.body).get("message") or e.reason)
    except (TypeError, ValueError):
        return str(e.reason)
