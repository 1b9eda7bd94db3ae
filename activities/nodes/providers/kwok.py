"""KWOK provider: a "machine" is a Node object that the KWOK controller (or sim/) makes Ready.

Settings (providers.kwok in the worker config):
  capacity: {"<pool name>": <max nodes>}   how many nodes a pool may have before it reports
                                            no capacity, so fallback can be shown and tested
  lease_namespace: kube-system              where the Lease that serialises a limited pool's
                                            count-and-create lives (activities.kube.lease)

A node carries what a kubelet and cloud controller manager would set: kubernetes.io/hostname
(its name), os, arch, instance type, and topology.kubernetes.io/region and zone from the pool's
config (`region`, `zone`; scaling.nodes.matching.pool_topology).
"""

from __future__ import annotations

import asyncio
import hashlib
import re
from typing import Any

from kubernetes import client
from kubernetes.client.rest import ApiException

from activities.kube.client import ClusterClients, cluster_clients, raw_list
from activities.kube.lease import LeaseLock
from scaling.kube.models import LABEL_ARCH, LABEL_HOSTNAME, LABEL_INSTANCE_TYPE, LABEL_OS, NODE_OS
from scaling.nodes.contracts import CreateNodeInput, CreateNodeResult, DeleteNodeInput, ProviderMachine
from scaling.nodes.matching import node_allocatable, pool_topology
from scaling.nodes.models import LABEL_CLUSTER, LABEL_POOL, ServerType
from scaling.nodes.providers.kwok import kwok_catalogue

KWOK_ANNOTATION = "kwok.x-k8s.io/node"


def kwok_node_name(cluster: str, pool: str, request_id: str, attempt: int) -> str:
    """Deterministic from the request and attempt, so a retried create finds the first node."""
    digest = hashlib.sha256(f"{request_id}/{attempt}".encode()).hexdigest()[:8]
    name = f"{cluster}-{pool}-{digest}".lower()
    return re.sub(r"[^a-z0-9.-]+", "-", name)[:63].strip("-.")


def capacity_lease_name(pool: str) -> str:
    """The Lease serialising a limited pool's creates (a DNS subdomain, like every object name)."""
    name = re.sub(r"[^a-z0-9.-]+", "-", f"growth-kwok-capacity-{pool}".lower())
    return name[:253].strip("-.")


class KwokProvider:
    """Per cluster: a machine is a Node written into the cluster the request is for."""

    name = "kwok"

    def __init__(self, clusters: ClusterClients | client.ApiClient, settings: dict[str, Any] | None = None) -> None:
        self.clusters = cluster_clients(clusters)
        settings = settings or {}
        self.capacity: dict[str, int] = {k.lower(): int(v) for k, v in (settings.get("capacity") or {}).items()}
        self._types = {t.name: t for t in kwok_catalogue()}
        # Counting a pool's nodes and creating one must be one step, or concurrent creates (a
        # burst's requests, on one worker or several) all see room and overshoot the limit: a
        # Lease in the cluster, which every worker sees (activities.kube.lease says why).
        self.lease_namespace = str(settings.get("lease_namespace") or "kube-system")

    async def server_types(self) -> list[ServerType]:
        return list(self._types.values())

    def _core(self, cluster: str) -> client.CoreV1Api:
        return client.CoreV1Api(self.clusters.api(cluster))

    def _create(self, inp: CreateNodeInput) -> CreateNodeResult:
        core = self._core(inp.cluster)
        pool = inp.pool
        name = kwok_node_name(inp.cluster, pool.name, inp.request_id, inp.attempt)
        try:  # idempotency first: a replayed or retried activity finds its node
            existing = core.read_node(name)
            return CreateNodeResult(outcome="created", node_name=name, provider_id=existing.spec.provider_id or "")
        except ApiException as e:
            if e.status != 404:
                raise
        if pool.name.lower() not in self.capacity:
            return self._create_unchecked(core, inp, name)
        limit = self.capacity[pool.name.lower()]
        # A full pool answers without the Lease: nodes only come through it, so "full" read
        # outside it is at most stale by a removal, as a cloud's capacity answer can be.
        full = self._no_room(core, pool.name, limit)
        if full is not None:
            return full
        lease = LeaseLock(
            self.clusters.api(inp.cluster),
            self.lease_namespace,
            capacity_lease_name(pool.name),
            # The request's attempt: its own retry (the first try's worker dead) takes over at once.
            holder=f"{inp.request_id}/{inp.attempt}",
        )
        with lease:
            return self._no_room(core, pool.name, limit) or self._create_unchecked(core, inp, name)

    def _no_room(self, core: client.CoreV1Api, pool: str, limit: int) -> CreateNodeResult | None:
        in_pool = raw_list(core.list_node, label_selector=f"{LABEL_POOL}={pool}")
        if len(in_pool) < limit:
            return None
        return CreateNodeResult(
            outcome="no_capacity", message=f"pool {pool} has no capacity left ({len(in_pool)}/{limit} nodes)"
        )

    def _create_unchecked(self, core: client.CoreV1Api, inp: CreateNodeInput, name: str) -> CreateNodeResult:
        pool = inp.pool
        stype = self._types.get(pool.server_type.lower())
        if stype is None:
            return CreateNodeResult(outcome="no_capacity", message=f"unknown server type {pool.server_type}")
        alloc = node_allocatable(pool, stype)  # the type's extended resources and the pool's own
        quantities = {"cpu": f"{alloc.cpu_m}m", "memory": str(alloc.memory), "pods": str(alloc.pods)}
        quantities.update({k: str(q) for k, q in alloc.extended})
        labels = {
            **inp.labels,
            LABEL_CLUSTER: inp.cluster,
            LABEL_INSTANCE_TYPE: stype.name,
            LABEL_ARCH: stype.arch,
            LABEL_OS: NODE_OS,
            LABEL_HOSTNAME: name,
            **pool_topology(pool),  # region and zone, as the planner expects them
            "type": "kwok",
        }
        body = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "labels": labels, "annotations": {KWOK_ANNOTATION: "fake"}},
            "spec": {
                "providerID": f"kwok://{name}",
                "taints": [t.model_dump() for t in inp.taints],
            },
            "status": {"capacity": quantities, "allocatable": quantities},
        }
        try:
            core.create_node(body)
        except ApiException as e:
            if e.status != 409:  # 409: created by an earlier try of this same activity
                raise
        return CreateNodeResult(outcome="created", node_name=name, provider_id=f"kwok://{name}")

    async def create_node(self, inp: CreateNodeInput) -> CreateNodeResult:
        return await asyncio.to_thread(self._create, inp)

    def _delete(self, inp: DeleteNodeInput) -> None:
        try:
            self._core(inp.cluster).delete_node(inp.node_name)
        except ApiException as e:
            if e.status != 404:
                raise

    async def delete_node(self, inp: DeleteNodeInput) -> None:
        await asyncio.to_thread(self._delete, inp)

    def _list(self, cluster: str) -> list[ProviderMachine]:
        nodes = raw_list(self._core(cluster).list_node, label_selector=f"{LABEL_CLUSTER}={cluster}")
        return [
            ProviderMachine(
                provider=self.name,
                provider_id=n.get("spec", {}).get("providerID", ""),
                name=n["metadata"]["name"],
                labels=n["metadata"].get("labels", {}),
            )
            for n in nodes
            if n["metadata"].get("annotations", {}).get(KWOK_ANNOTATION)
        ]

    async def list_machines(self, cluster: str) -> list[ProviderMachine]:
        return await asyncio.to_thread(self._list, cluster)
