"""The node loop's activities: Kubernetes observation, node providers, scale-down, machine GC.

`build_activities(settings)` is all the worker needs from this package.
"""

from __future__ import annotations

from typing import Any

from activities.kube.client import ClusterClients
from activities.nodes.kube import KubeActivities
from activities.nodes.machines import MachineActivities
from activities.nodes.planning import plan_scale_up
from activities.nodes.providers.base import NodeProvider
from activities.nodes.providers.kwok import KwokProvider
from activities.nodes.provisioning import ProviderActivities
from activities.nodes.requests import start_node_requests
from activities.nodes.scale_down import ScaleDownActivities, removals_ended
from activities.nodes.wake import PendingPodsWake
from activities.settings import Settings


def build_providers(settings: Settings, clusters: ClusterClients) -> dict[str, NodeProvider]:
    """One instance per provider. KWOK writes Nodes into the cluster each call names; Hetzner
    is one cloud account, its machines labelled with their cluster."""
    providers: dict[str, NodeProvider] = {}
    for name, cfg in settings.providers.items():
        if name == "kwok":
            providers[name] = KwokProvider(clusters, cfg)
        elif name == "hetzner":
            from activities.nodes.providers.hetzner import HetznerProvider

            providers[name] = HetznerProvider.from_settings(cfg)
        else:
            raise SystemExit(f"config: providers.{name}: unknown provider (known: kwok, hetzner)")
    return providers


def build_activities(
    settings: Settings, clusters: ClusterClients | None = None, wake: PendingPodsWake | None = None
) -> list[Any]:
    """Every node-loop activity. Each call names its cluster and gets that cluster's client
    from `clusters` (built from settings.clusters, or settings.kubernetes for any name). With
    `wake`, a loop is woken when pods become unschedulable after its observation (wake.py)."""
    clusters = clusters or ClusterClients(settings)
    providers = build_providers(settings, clusters)
    kube = KubeActivities(
        clusters, known_providers=providers.keys(), node_groups_file=settings.node_groups_file, wake=wake
    )
    prov = ProviderActivities(providers)
    gc = MachineActivities(clusters, providers, node_groups_file=settings.node_groups_file)
    down = ScaleDownActivities(
        clusters, known_providers=providers.keys(), node_groups_file=settings.node_groups_file, providers=providers
    )
    return [
        kube.observe_cluster,
        kube.wait_node_ready,
        kube.wait_nodes_ready,
        kube.emit_pod_events,
        kube.report_node_group_status,
        start_node_requests,
        plan_scale_up,
        prov.create_node,
        prov.delete_node,
        prov.get_catalogue,
        down.evaluate_scale_down,
        down.check_node_removal,
        down.mark_node_for_scale_down,
        down.unmark_node,
        down.taint_disrupted,
        down.update_soft_deletion_taints,
        down.cordon_node,
        down.evict_pod,
        down.evict_in_order,
        down.wait_pods_gone,
        down.delete_node_object,
        down.emit_node_events,
        down.plan_replacement,
        down.find_orphans,
        removals_ended,
        gc.list_provider_machines,
        gc.list_node_provider_ids,
        gc.live_node_request_ids,
        gc.report_collected_machine,
        gc.report_unusable_pools,
    ]
