"""The components loop's activities: TidbClusterAutoScaler / TidbCluster objects, Prometheus,
PD, external recommenders and node capacity.

`build_activities(settings)` is all the worker needs from this package.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # activities.settings imports this package's settings module: no cycle at runtime
    from activities.kube.client import ClusterClients
    from activities.settings import Settings


def build_activities(settings: Settings, clusters: ClusterClients | None = None) -> list[Any]:
    """Every components-loop activity. Each call names its Kubernetes cluster and gets that
    cluster's client from `clusters`; Prometheus and PD URLs come from settings.components."""
    from activities.components.activities import ComponentActivities
    from activities.kube.client import ClusterClients

    acts = ComponentActivities(
        clusters or ClusterClients(settings), settings.components, node_groups_file=settings.node_groups_file
    )
    return [
        acts.list_autoscalers,
        acts.get_autoscaler,
        acts.write_autoscaler_status,
        acts.emit_autoscaler_event,
        acts.get_tidb_cluster,
        acts.list_auto_clusters,
        acts.query_metrics,
        acts.ask_pd_autoscaling,
        acts.ask_external_endpoint,
        acts.observe_capacity,
        acts.create_auto_cluster,
        acts.patch_replicas,
        acts.delete_auto_cluster,
    ]
