"""Stub OCM activities registered under the fleet contract's names, scripted per test.

A tiny OCM: clusters keyed by external id (so a repeated create finds the first), states that
advance one step per poll, addons and machine pools, and knobs for faults."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from temporalio import activity
from temporalio.client import RPCTimeoutOrCancelledError
from temporalio.exceptions import ApplicationError

from activities.fleet.decisions import DECISIONS
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

INSTALL_STATES = ("pending", "installing", "ready")


@dataclass
class StubCluster:
    ocm_id: str
    external_id: str
    name: str
    polls: int = 0
    state: str = "pending"
    deleted: bool = False
    gone: bool = False


@dataclass
class FleetWorld:
    """What the stub OCM holds, how it misbehaves, and what it was asked."""

    clusters: dict[str, StubCluster] = field(default_factory=dict)  # external id -> cluster
    pools: dict[str, dict[str, CreateMachinePoolInput]] = field(default_factory=dict)
    addons: dict[tuple[str, str], int] = field(default_factory=dict)  # (ocm id, addon) -> polls
    calls: list[str] = field(default_factory=list)
    create_inputs: list[CreateOcmClusterInput] = field(default_factory=list)
    addon_inputs: list[AddonInput] = field(default_factory=list)
    cleaned: list[str] = field(default_factory=list)
    # knobs
    error_on_create: bool = False  # the cluster goes to state "error" instead of installing
    lose_first_create_response: bool = False  # create succeeds at OCM, the answer is lost
    addon_never_ready: str = ""  # this addon stays "installing"
    hold_addons: bool = False  # get_addon answers "installing" until released
    dns_missing_calls: int = 0  # ensure_ingress_dns fails (retryably) this many times first
    pool_error: str = ""  # create_machine_pool raises an ApplicationError of this type
    # create_machine_pool makes the pool, then never answers (its worker dies mid-call)
    hang_after_pool_created: bool = False
    hanging: asyncio.Event = field(default_factory=asyncio.Event)  # set while a call hangs

    def live_clusters(self) -> list[StubCluster]:
        return [c for c in self.clusters.values() if not c.gone]

    def _by_ref(self, ref: OcmClusterRef) -> StubCluster | None:
        for c in self.clusters.values():
            if (ref.ocm_id and c.ocm_id == ref.ocm_id) or (not ref.ocm_id and c.external_id == ref.cluster_id):
                return c
        return None

    def activities(self) -> list:
        world = self

        @activity.defn(name=contracts.CREATE_OCM_CLUSTER)
        async def create_ocm_cluster(inp: CreateOcmClusterInput) -> OcmCluster:
            world.calls.append(contracts.CREATE_OCM_CLUSTER)
            world.create_inputs.append(inp)
            found = world.clusters.get(inp.cluster_id)  # idempotency: external id
            if found is None:
                found = StubCluster(
                    ocm_id=f"ocm-{len(world.clusters) + 1}",
                    external_id=inp.cluster_id,
                    name=ocm_cluster_name(inp.cluster_id),
                )
                world.clusters[inp.cluster_id] = found
                if world.error_on_create:
                    found.state = "error"
                if world.lose_first_create_response:
                    world.lose_first_create_response = False
                    raise ApplicationError("connection reset", type=contracts.ERR_OCM_UNAVAILABLE)
                created = True
            else:
                created = False
            state = "uninstalling" if found.deleted and not found.gone else found.state
            return OcmCluster(
                ocm_id=found.ocm_id, cluster_id=inp.cluster_id, name=found.name, state=state, created=created
            )

        @activity.defn(name=contracts.GET_OCM_CLUSTER)
        async def get_ocm_cluster(ref: OcmClusterRef) -> OcmCluster:
            world.calls.append(contracts.GET_OCM_CLUSTER)
            c = world._by_ref(ref)
            if c is None or c.gone:
                return OcmCluster(ocm_id=ref.ocm_id, cluster_id=ref.cluster_id, state="gone")
            c.polls += 1
            if c.deleted:
                c.gone = c.polls >= 2
                return OcmCluster(
                    ocm_id=c.ocm_id, cluster_id=ref.cluster_id, state="gone" if c.gone else "uninstalling"
                )
            if c.state in INSTALL_STATES[:-1]:
                c.state = INSTALL_STATES[INSTALL_STATES.index(c.state) + 1]
            msg = "install failed: no quota" if c.state == "error" else ""
            return OcmCluster(ocm_id=c.ocm_id, cluster_id=ref.cluster_id, name=c.name, state=c.state, message=msg)  # type: ignore[arg-type]

        @activity.defn(name=contracts.CREATE_MACHINE_POOL)
        async def create_machine_pool(inp: CreateMachinePoolInput) -> MachinePoolResult:
            world.calls.append(contracts.CREATE_MACHINE_POOL)
            if world.pool_error:
                raise ApplicationError("refused by OCM", type=world.pool_error)
            pools = world.pools.setdefault(inp.ocm_id, {})
            created = inp.pool_id not in pools
            pools.setdefault(inp.pool_id, inp)
            if world.hang_after_pool_created:
                world.hanging.set()
                await asyncio.Event().wait()  # until the worker's shutdown cancels it
            return MachinePoolResult(
                pool_id=inp.pool_id, min_nodes=inp.min_nodes, max_nodes=inp.max_nodes, created=created
            )

        @activity.defn(name=contracts.ENSURE_INGRESS_DNS)
        async def ensure_ingress_dns(ref: OcmClusterRef) -> IngressDns:
            world.calls.append(contracts.ENSURE_INGRESS_DNS)
            if world.dns_missing_calls > 0:
                world.dns_missing_calls -= 1
                raise ApplicationError("no default ingress yet", type=contracts.ERR_OCM_NOT_FOUND)
            c = world._by_ref(ref)
            return IngressDns(dns_name=f"apps.{c.name if c else 'x'}.example.com")

        @activity.defn(name=contracts.ENSURE_IDENTITY_PROVIDER)
        async def ensure_identity_provider(inp: IdentityProviderInput) -> IdentityProviderResult:
            world.calls.append(contracts.ENSURE_IDENTITY_PROVIDER)
            return IdentityProviderResult(idp_id=f"idp-{inp.ocm_id}", created=True)

        @activity.defn(name=contracts.APPLY_CLUSTER_RESOURCES)
        async def apply_cluster_resources(inp: ClusterResourcesInput) -> ClusterResourcesResult:
            world.calls.append(contracts.APPLY_CLUSTER_RESOURCES)
            return ClusterResourcesResult(syncset_id=f"ext-{inp.cluster_id}", resources=3)

        @activity.defn(name=contracts.INSTALL_ADDON)
        async def install_addon(inp: AddonInput) -> AddonInstallation:
            world.calls.append(contracts.INSTALL_ADDON)
            world.addon_inputs.append(inp)
            world.addons.setdefault((inp.ocm_id, inp.addon_id), 0)
            return AddonInstallation(addon_id=inp.addon_id, state="installing")

        @activity.defn(name=contracts.GET_ADDON)
        async def get_addon(ref: AddonRef) -> AddonInstallation:
            world.calls.append(contracts.GET_ADDON)
            key = (ref.ocm_id, ref.addon_id)
            if key not in world.addons:
                return AddonInstallation(addon_id=ref.addon_id, state="absent")
            world.addons[key] += 1
            if world.hold_addons or ref.addon_id == world.addon_never_ready or world.addons[key] < 2:
                return AddonInstallation(addon_id=ref.addon_id, state="installing")
            return AddonInstallation(addon_id=ref.addon_id, state="ready")

        @activity.defn(name=contracts.DELETE_OCM_CLUSTER)
        async def delete_ocm_cluster(ref: OcmClusterRef) -> OcmCluster:
            world.calls.append(contracts.DELETE_OCM_CLUSTER)
            c = world._by_ref(ref)
            if c is None or c.gone:
                return OcmCluster(ocm_id=ref.ocm_id, cluster_id=ref.cluster_id, state="gone")
            c.deleted, c.polls = True, 0
            return OcmCluster(ocm_id=c.ocm_id, cluster_id=ref.cluster_id, state="uninstalling")

        @activity.defn(name=contracts.CLEANUP_CLUSTER_RESOURCES)
        async def cleanup_cluster_resources(inp: CleanupInput) -> None:
            world.calls.append(contracts.CLEANUP_CLUSTER_RESOURCES)
            world.cleaned.append(inp.cluster_id)

        return [
            create_ocm_cluster,
            get_ocm_cluster,
            create_machine_pool,
            ensure_ingress_dns,
            ensure_identity_provider,
            apply_cluster_resources,
            install_addon,
            get_addon,
            delete_ocm_cluster,
            cleanup_cluster_resources,
            *DECISIONS,  # the region's decisions: the real ones (pure)
        ]


async def stop_agents(task: asyncio.Task) -> None:
    """Cancel a fake agents task and wait for it to end. A cancel that lands while it waits on an
    update comes back from the client as RPCTimeoutOrCancelledError caused by the cancel, not as
    CancelledError: a test's teardown failed on it (test_the_instance_limit_names_its_field)."""
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        pass
    except RPCTimeoutOrCancelledError as err:
        if not isinstance(err.__cause__, asyncio.CancelledError):
            raise
