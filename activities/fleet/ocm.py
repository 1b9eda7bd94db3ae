"""The fleet loop's OCM activities: thin adapters from the contract's models to clusters_mgmt.

Every one is safe to retry: creates look for what an earlier attempt made first (a cluster by
external id = growth's cluster id, then by its derived name; a pool, addon, identity provider or
syncset by its id or name), and OCM's "already exists" answers are read as "found".
"""

from __future__ import annotations

from typing import Any

from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.answers import quoted
from activities.fleet.ocm_client import OcmClient, ocm_error, reason_of, required_secret
from activities.fleet.settings import FleetSettings
from activities.fleet.tokens import AgentTokenError, AgentTokens
from scaling.fleet import contracts
from scaling.fleet.contracts import (
    AddonInput,
    AddonInstallation,
    AddonRef,
    CleanupInput,
    ClusterResourcesInput,
    ClusterResourcesResult,
    CreateMachinePoolInput,
    CreateOcmClusterInput,
    IdentityProviderInput,
    IdentityProviderResult,
    IngressDns,
    MachinePoolResult,
    OcmCluster,
    OcmClusterRef,
    ocm_cluster_name,
)

_CLUSTER_STATES = {"waiting", "validating", "pending", "installing", "ready", "error", "uninstalling", "hibernating"}
_HIBERNATION = {"powering_down", "resuming"}
_ADDON_STATES = {"pending", "installing", "ready", "failed", "deleting", "deleted"}
# The fleetshard addon's parameters that carry where and how its agent reports (sim/fleet/agent.py
# reads the same names).
PARAM_CONTROL_PLANE_URL = "control-plane-url"
PARAM_CLUSTER_ID = "cluster-id"
PARAM_AGENT_TOKEN = "agent-token"
FLEETSHARD_NAMESPACE = "redhat-kas-fleetshard-operator"


def cluster_state(raw: dict[str, Any]) -> contracts.OcmClusterState:
    state = str((raw.get("status") or {}).get("state") or raw.get("state") or "")
    if state in _CLUSTER_STATES:
        return state  # type: ignore[return-value]
    if state in _HIBERNATION:
        return "hibernating"
    return "pending"  # OCM added a state growth does not know: keep waiting, the step's timeout bounds it


def syncset_id(cluster_id: str) -> str:
    """A DNS-label syncset id, the same on every retry."""
    return "ext-" + ocm_cluster_name(cluster_id)


def cluster_resources(inp: ClusterResourcesInput) -> list[dict[str, Any]]:
    """What growth puts on every data-plane cluster: the fleetshard's namespace, its config, and
    the sharded ingress controller instances are exposed on (`kas.<cluster domain>`)."""
    domain = inp.ingress_dns_name.removeprefix("apps.")
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": FLEETSHARD_NAMESPACE}},
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "growth-fleet-config", "namespace": FLEETSHARD_NAMESPACE},
            "data": {
                "cluster-id": inp.cluster_id,
                "ingress-domain": domain,
                "instance-types": ",".join(inp.instance_types),
            },  # fmt: skip
        },
        {
            "apiVersion": "operator.openshift.io/v1",
            "kind": "IngressController",
            "metadata": {"name": "sharded-nlb", "namespace": "openshift-ingress-operator"},
            "spec": {
                "domain": f"kas.{domain}",
                "routeSelector": {"matchLabels": {"ingressType": "sharded"}},
                "endpointPublishingStrategy": {"type": "LoadBalancerService", "loadBalancer": {"scope": "External"}},
            },
        },
    ]


class OcmActivities:
    def __init__(self, settings: FleetSettings, client: OcmClient | None = None) -> None:
        self.settings = settings
        self.ocm = client or OcmClient(settings.ocm)
        self.tokens = AgentTokens(settings.agent_api)

    def _cluster(self, raw: dict[str, Any], cluster_id: str, created: bool = False) -> OcmCluster:
        status = raw.get("status") or {}
        state = cluster_state(raw)
        message = ""
        if state == "error":
            message = str(status.get("provision_error_message") or status.get("description") or raw.get("provision_error_message") or "")  # fmt: skip
        return OcmCluster(
            ocm_id=str(raw.get("id") or ""),
            cluster_id=cluster_id,
            name=str(raw.get("name") or ""),
            state=state,
            message=quoted(message),
            created=created,
        )

    async def _find(self, cluster_id: str) -> dict[str, Any] | None:
        """The OCM cluster growth made for `cluster_id`: by external id, then by derived name.
        A live one first; else one that is uninstalling, which is still ours: OCM keeps its name
        taken until it is gone, so skipping it would make the create fail with "already
        exists" (and a create under another name would be a duplicate)."""
        uninstalling: dict[str, Any] | None = None
        for terms in ({"external_id": cluster_id}, {"name": ocm_cluster_name(cluster_id)}):
            for c in await self.ocm.search_clusters(**terms):
                if cluster_state(c) != "uninstalling":
                    return c
                uninstalling = uninstalling or c
        return uninstalling

    async def _resolve(self, ref: OcmClusterRef) -> dict[str, Any] | None:
        if ref.ocm_id:
            resp = await self.ocm.request("GET", f"/clusters/{ref.ocm_id}", expect=(404,))
            return None if resp.status_code == 404 else resp.json()
        # The create never answered: whatever it made carries the external id.
        found = await self.ocm.search_clusters(external_id=ref.cluster_id)
        return found[0] if found else None

    # -- clusters --------------------------------------------------------------------------
    @activity.defn(name=contracts.CREATE_OCM_CLUSTER)
    async def create_ocm_cluster(self, inp: CreateOcmClusterInput) -> OcmCluster:
        existing = await self._find(inp.cluster_id)
        if existing is not None:
            activity.logger.info("OCM cluster %s for %s exists already", existing.get("id"), inp.cluster_id)
            return self._cluster(existing, inp.cluster_id)
        name = ocm_cluster_name(inp.cluster_id)
        body: dict[str, Any] = {
            "name": name,
            "external_id": inp.cluster_id,
            "cloud_provider": {"id": inp.provider},
            "region": {"id": inp.region},
            "multi_az": inp.multi_az,
            "product": {"id": "osd"},
            "managed": True,
            "nodes": {
                "compute_machine_type": {"id": inp.compute_machine_type},
                "autoscale_compute": {"min_replicas": inp.default_min_nodes, "max_replicas": inp.default_max_nodes},
            },
            "properties": {"growth_cluster_id": inp.cluster_id},
        }
        if inp.openshift_version:
            body["version"] = {"id": inp.openshift_version}
        resp = await self.ocm.request("POST", "/clusters", json=body, expect=(400,))
        if resp.status_code == 400:
            _code, reason = reason_of(resp)
            if "already exists" in reason:
                # Another attempt won the race for the name: that cluster is ours.
                found = await self._find(inp.cluster_id)
                if found is not None:
                    return self._cluster(found, inp.cluster_id)
            raise ocm_error("POST", "/clusters", resp)
        activity.logger.info("created OCM cluster %s (%s) for %s", resp.json().get("id"), name, inp.cluster_id)
        return self._cluster(resp.json(), inp.cluster_id, created=True)

    @activity.defn(name=contracts.GET_OCM_CLUSTER)
    async def get_ocm_cluster(self, ref: OcmClusterRef) -> OcmCluster:
        raw = await self._resolve(ref)
        if raw is None:
            return OcmCluster(ocm_id=ref.ocm_id, cluster_id=ref.cluster_id, state="gone")
        return self._cluster(raw, ref.cluster_id)

    @activity.defn(name=contracts.DELETE_OCM_CLUSTER)
    async def delete_ocm_cluster(self, ref: OcmClusterRef) -> OcmCluster:
        raw = await self._resolve(ref)
        if raw is None:
            return OcmCluster(ocm_id=ref.ocm_id, cluster_id=ref.cluster_id, state="gone")
        ocm_id = str(raw["id"])
        resp = await self.ocm.request("DELETE", f"/clusters/{ocm_id}", expect=(404,))
        if resp.status_code == 404:
            return OcmCluster(ocm_id=ocm_id, cluster_id=ref.cluster_id, state="gone")
        activity.logger.info("deleting OCM cluster %s of %s", ocm_id, ref.cluster_id)
        return OcmCluster(ocm_id=ocm_id, cluster_id=ref.cluster_id, name=str(raw.get("name") or ""), state="uninstalling")  # fmt: skip

    # -- terraforming ------------------------------------------------------------------------
    @activity.defn(name=contracts.CREATE_MACHINE_POOL)
    async def create_machine_pool(self, inp: CreateMachinePoolInput) -> MachinePoolResult:
        path = f"/clusters/{inp.ocm_id}/machine_pools"
        body = {
            "id": inp.pool_id,
            "instance_type": inp.machine_type,
            "autoscaling": {"min_replicas": inp.min_nodes, "max_replicas": inp.max_nodes},
            "labels": inp.labels,
            "taints": [t.model_dump() for t in inp.taints],
        }
        resp = await self.ocm.request("POST", path, json=body, expect=(409,))
        created = resp.status_code != 409
        if not created:  # an earlier attempt made it: report the pool OCM holds
            resp = await self.ocm.request("GET", f"{path}/{inp.pool_id}")
        pool = resp.json()
        auto = pool.get("autoscaling") or {}
        replicas = pool.get("replicas")
        return MachinePoolResult(
            pool_id=str(pool.get("id") or inp.pool_id),
            min_nodes=int(auto.get("min_replicas", replicas if replicas is not None else inp.min_nodes)),
            max_nodes=int(auto.get("max_replicas", replicas if replicas is not None else inp.max_nodes)),
            created=created,
        )

    @activity.defn(name=contracts.ENSURE_INGRESS_DNS)
    async def ensure_ingress_dns(self, ref: OcmClusterRef) -> IngressDns:
        resp = await self.ocm.request("GET", f"/clusters/{ref.ocm_id}/ingresses")
        items = resp.json().get("items") or []
        default = next((i for i in items if i.get("default")), None)
        if default is None or not default.get("dns_name"):
            # Retryable: OCM publishes the default ingress a little after the cluster is ready.
            raise ApplicationError(f"cluster {ref.ocm_id} has no default ingress yet", type=contracts.ERR_OCM_NOT_FOUND)  # fmt: skip
        return IngressDns(dns_name=str(default["dns_name"]))

    @activity.defn(name=contracts.ENSURE_IDENTITY_PROVIDER)
    async def ensure_identity_provider(self, inp: IdentityProviderInput) -> IdentityProviderResult:
        path = f"/clusters/{inp.ocm_id}/identity_providers"
        found = await self._idp_named(path, inp.name)
        if found:
            return IdentityProviderResult(idp_id=found, created=False)
        s = self.settings.identity_provider
        secret = required_secret(
            "identity provider client secret", s.client_secret_env, s.client_secret_file, contracts.ERR_OCM_BAD_REQUEST
        )
        body = {
            "type": "OpenIDIdentityProvider",
            "name": inp.name,
            "mapping_method": "claim",
            "open_id": {
                "client_id": s.client_id,
                "client_secret": secret,
                "issuer": s.issuer,
                "claims": {"email": ["email"], "preferred_username": ["preferred_username"], "name": ["name"]},
            },
        }
        resp = await self.ocm.request("POST", path, json=body, expect=(400,))
        if resp.status_code == 400:
            _code, reason = reason_of(resp)
            found = await self._idp_named(path, inp.name) if "already exists" in reason else ""
            if found:
                return IdentityProviderResult(idp_id=found, created=False)
            raise ocm_error("POST", path, resp)
        return IdentityProviderResult(idp_id=str(resp.json()["id"]), created=True)

    async def _idp_named(self, path: str, name: str) -> str:
        resp = await self.ocm.request("GET", path)
        return next((str(i["id"]) for i in resp.json().get("items") or [] if i.get("name") == name), "")

    @activity.defn(name=contracts.APPLY_CLUSTER_RESOURCES)
    async def apply_cluster_resources(self, inp: ClusterResourcesInput) -> ClusterResourcesResult:
        path = f"/clusters/{inp.ocm_id}/external_configuration/syncsets"
        sid = syncset_id(inp.cluster_id)
        resources = cluster_resources(inp)
        resp = await self.ocm.request("POST", path, json={"id": sid, "resources": resources}, expect=(409,))
        if resp.status_code == 409:  # replace what an earlier attempt (or config) put there
            await self.ocm.request("PATCH", f"{path}/{sid}", json={"resources": resources})
        return ClusterResourcesResult(syncset_id=sid, resources=len(resources))

    # -- addons ------------------------------------------------------------------------------
    def _addon(self, raw: dict[str, Any], addon_id: str) -> AddonInstallation:
        state = str(raw.get("state") or "")
        return AddonInstallation(
            addon_id=addon_id,
            state=state if state in _ADDON_STATES else "installing",  # type: ignore[arg-type]
            message=quoted(raw.get("state_description") or ""),
        )

    def _addon_parameters(self, inp: AddonInput) -> dict[str, str]:
        params = dict(inp.parameters)
        if inp.addon_id == contracts.FLEETSHARD_ADDON:
            # The agent's credentials go to OCM only, never through the workflow.
            try:
                token = self.tokens.token_for(inp.cluster_id)
            except AgentTokenError as err:
                raise ApplicationError(str(err), type=contracts.ERR_OCM_BAD_REQUEST, non_retryable=True) from None
            params.update(
                {
                    PARAM_CONTROL_PLANE_URL: self.settings.agent_api.url(),
                    PARAM_CLUSTER_ID: inp.cluster_id,
                    PARAM_AGENT_TOKEN: token,
                }
            )
        return params

    @activity.defn(name=contracts.INSTALL_ADDON)
    async def install_addon(self, inp: AddonInput) -> AddonInstallation:
        path = f"/clusters/{inp.ocm_id}/addons"
        existing = await self.ocm.request("GET", f"{path}/{inp.addon_id}", expect=(404,))
        if existing.status_code != 404:
            return self._addon(existing.json(), inp.addon_id)
        items = [{"id": k, "value": v} for k, v in sorted(self._addon_parameters(inp).items())]
        body = {"addon": {"id": inp.addon_id}, "parameters": {"items": items}}
        resp = await self.ocm.request("POST", path, json=body, expect=(409,))
        if resp.status_code == 409:
            resp = await self.ocm.request("GET", f"{path}/{inp.addon_id}")
        return self._addon(resp.json(), inp.addon_id)

    @activity.defn(name=contracts.GET_ADDON)
    async def get_addon(self, ref: AddonRef) -> AddonInstallation:
        resp = await self.ocm.request("GET", f"/clusters/{ref.ocm_id}/addons/{ref.addon_id}", expect=(404,))
        if resp.status_code == 404:
            return AddonInstallation(addon_id=ref.addon_id, state="absent")
        return self._addon(resp.json(), ref.addon_id)

    # -- clean-up ----------------------------------------------------------------------------
    @activity.defn(name=contracts.CLEANUP_CLUSTER_RESOURCES)
    async def cleanup_cluster_resources(self, inp: CleanupInput) -> None:
        """After the cluster is gone: delete any other OCM cluster still carrying its external id
        (a stray from a create whose answer was lost and that was then made again by hand).
        The agent's token is derived, not stored, and the identity provider, pools, addons and
        syncset went with the cluster."""
        for stray in await self.ocm.search_clusters(external_id=inp.cluster_id):
            if cluster_state(stray) == "uninstalling":
                continue
            await self.ocm.request("DELETE", f"/clusters/{stray['id']}", expect=(404,))
            activity.logger.warning("deleted stray OCM cluster %s of %s", stray.get("id"), inp.cluster_id)

    def all(self) -> list[Any]:
        return [
            self.create_ocm_cluster,
            self.get_ocm_cluster,
            self.create_machine_pool,
            self.ensure_ingress_dns,
            self.ensure_identity_provider,
            self.apply_cluster_resources,
            self.install_addon,
            self.get_addon,
            self.delete_ocm_cluster,
            self.cleanup_cluster_resources,
        ]
