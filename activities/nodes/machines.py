"""Machine housekeeping activities: what the providers hold, what the cluster accounts for, and
reports (leaked machines collected, pools whose server type a provider cannot supply).

Thin adapters for the MachineGC workflow; the leak decision is scaling.nodes.gc.leaks, the delete is
the existing `delete_node` activity.
"""

from __future__ import annotations

import asyncio
from typing import Any

from kubernetes import client
from kubernetes.client.rest import ApiException
from temporalio import activity
from temporalio.service import RPCError

from activities.kube.client import ClusterClients, attempts_key, cluster_clients, create_event, raw_list
from activities.nodes.providers.base import NodeProvider
from scaling.nodes import contracts
from scaling.nodes.contracts import CollectedMachine, ProviderMachine, UnusablePool
from scaling.nodes.models import CRD_GROUP, CRD_VERSION
from scaling.nodes.nodegroups import (
    flatten_pools,
    load_node_groups,
    parse_node_groups_yaml,
)
from scaling.nodes.status import AutoscalerStatus

NODE_GROUP_PLURAL = "nodegroupswithpriority"
NODE_GROUP_KIND = "NodeGroupWithPriority"


class MachineActivities:
    def __init__(
        self,
        clusters: ClusterClients | client.ApiClient,
        providers: dict[str, NodeProvider],
        node_groups_file: str | None = None,
        component: str = "growth",
    ) -> None:
        self.clusters = cluster_clients(clusters)
        self.providers = providers
        self.node_groups_file = node_groups_file
        self.component = component

    def _core(self, cluster: str) -> client.CoreV1Api:
        return client.CoreV1Api(self.clusters.api(cluster))

    def _custom(self, cluster: str) -> client.CustomObjectsApi:
        return client.CustomObjectsApi(self.clusters.api(cluster))

    # -- facts ---------------------------------------------------------------------------
    @activity.defn(name=contracts.LIST_PROVIDER_MACHINES)
    async def list_provider_machines(self, cluster: str) -> list[ProviderMachine]:
        """Every machine each configured provider holds for the cluster. A provider that fails
        fails the activity: judging leaks on a partial list could delete live machines' peers."""
        machines: list[ProviderMachine] = []
        for name in sorted(self.providers):
            machines.extend(await self.providers[name].list_machines(cluster))
        return machines

    @activity.defn(name=contracts.LIST_NODE_PROVIDER_IDS)
    def list_node_provider_ids(self, cluster: str) -> list[str]:
        return sorted(
            pid for n in raw_list(self._core(cluster).list_node) if (pid := (n.get("spec") or {}).get("providerID"))
        )

    @activity.defn(name=contracts.LIVE_NODE_REQUEST_IDS)
    async def live_node_request_ids(self, autoscaler_workflow_id: str) -> list[str] | None:
        """NodeRequests the autoscaler still has in flight, from its status query; None when it
        cannot answer (then nothing may be judged leaked this round)."""
        handle = activity.client().get_workflow_handle(autoscaler_workflow_id)
        try:
            status = await handle.query("status", result_type=AutoscalerStatus)
        except RPCError as err:
            activity.logger.warning("autoscaler %s did not answer: %s", autoscaler_workflow_id, err)
            return None
        return [r.id for r in status.in_flight]

    # -- reports -------------------------------------------------------------------------
    def _group_object(self, cluster: str, name: str) -> dict[str, Any] | None:
        try:
            return self._custom(cluster).get_cluster_custom_object(CRD_GROUP, CRD_VERSION, NODE_GROUP_PLURAL, name)
        except ApiException as e:
            if e.status == 404:
                return None
            raise

    @activity.defn(name=contracts.REPORT_COLLECTED_MACHINE)
    def report_collected_machine(self, m: CollectedMachine) -> None:
        """A Warning Event on the machine's NodeGroupWithPriority (the machine has no Node)."""
        activity.logger.warning(
            "collected leaked machine %s (%s) at %s: %s", m.name, m.provider_id, m.provider, m.reason
        )
        if self.node_groups_file or not m.group:
            return
        try:
            obj = self._group_object(m.cluster, m.group)
        except ApiException as e:
            if e.status == 404:  # no NodeGroupWithPriority CRD installed: the log is the report
                return
            raise
        if obj is None:
            return
        group = client.V1ObjectReference(
            api_version=f"{CRD_GROUP}/{CRD_VERSION}", kind=NODE_GROUP_KIND, name=m.group, uid=obj["metadata"].get("uid")
        )
        message = f"deleted {m.provider} machine {m.name} ({m.provider_id}): {m.reason}"
        core = self._core(m.cluster)
        create_event(core, "default", group, "LeakedMachineDeleted", message, "Warning", self.component, attempts_key())

    def _groups(self, cluster: str) -> list[Any]:
        known = self.providers.keys()
        if self.node_groups_file:
            with open(self.node_groups_file) as f:
                groups, _ = parse_node_groups_yaml(f.read(), known)
            return groups
        try:
            items = (
                self._custom(cluster)
                .list_cluster_custom_object(CRD_GROUP, CRD_VERSION, NODE_GROUP_PLURAL)
                .get("items", [])
            )
        except ApiException as e:
            if e.status == 404:
                return []
            raise
        groups, _ = load_node_groups(list(items), known)
        return groups

    @activity.defn(name=contracts.REPORT_UNUSABLE_POOLS)
    async def report_unusable_pools(self, cluster: str) -> list[UnusablePool]:
        """Pools whose server type the provider cannot supply (removed, deprecated, not offered
        in the pool's locations), written as `status.unusablePools` on each group. The planner
        already leaves such pools out (the catalogue omits their types): this makes it visible."""
        groups = await asyncio.to_thread(self._groups, cluster)
        found: list[UnusablePool] = []
        by_group: dict[str, list[UnusablePool]] = {g.name: [] for g in groups}
        for g in groups:
            for pool in flatten_pools(g):
                provider = self.providers.get(pool.provider)
                check = getattr(provider, "unusable_types", None)
                if check is None:
                    continue
                locs = pool.config.get("locations") or pool.config.get("location")
                locations = [locs] if isinstance(locs, str) else list(locs) if locs else None
                reasons: dict[str, str] = await check([pool.server_type], locations)
                reason = reasons.get(pool.server_type.lower())
                if reason is not None:
                    up = UnusablePool(
                        group=g.name,
                        pool=pool.name,
                        provider=pool.provider,
                        server_type=pool.server_type,
                        reason=reason,
                    )
                    by_group[g.name].append(up)
                    found.append(up)
        if not self.node_groups_file:
            await asyncio.to_thread(self._write_unusable, cluster, by_group)
        for up in found:
            activity.logger.warning("pool %s/%s unusable: %s", up.group, up.pool, up.reason)
        return found

    def _write_unusable(self, cluster: str, by_group: dict[str, list[UnusablePool]]) -> None:
        custom = self._custom(cluster)
        for name, pools in by_group.items():
            obj = self._group_object(cluster, name)
            if obj is None:
                continue
            value = [{"pool": p.pool, "serverType": p.server_type, "reason": p.reason} for p in pools]
            if (obj.get("status") or {}).get("unusablePools", []) == value:
                continue  # unchanged: no write, no resourceVersion churn
            custom.patch_cluster_custom_object_status(
                CRD_GROUP, CRD_VERSION, NODE_GROUP_PLURAL, name, {"status": {"unusablePools": value}}
            )
