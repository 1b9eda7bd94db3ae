"""The components loop's activities and their time limits (see workflows.activity_options for
what each limit is for). start_to_close is the autoscaler's `activity_timeout_s` setting (60 s by
default) for every call, set at the call; the table gives the heartbeat, so a worker killed in a
PD or Prometheus query, or in a TidbCluster write, is noticed within seconds, not at that limit."""

from __future__ import annotations

from datetime import timedelta

from scaling.components import contracts
from workflows.activity_options import ActivityOptions

# One Kubernetes read or write of a custom object.
KUBE = ActivityOptions(timedelta(seconds=60))
# One HTTP query to PD, Prometheus or an external recommender.
QUERY = ActivityOptions(timedelta(seconds=60))

COMPONENT_ACTIVITIES: dict[str, ActivityOptions] = {
    contracts.LIST_AUTOSCALERS: KUBE,
    contracts.GET_AUTOSCALER: KUBE,
    contracts.WRITE_AUTOSCALER_STATUS: KUBE,
    contracts.EMIT_AUTOSCALER_EVENT: KUBE,
    contracts.GET_TIDB_CLUSTER: KUBE,
    contracts.LIST_AUTO_CLUSTERS: KUBE,
    contracts.CREATE_AUTO_CLUSTER: KUBE,
    contracts.PATCH_REPLICAS: KUBE,
    contracts.DELETE_AUTO_CLUSTER: KUBE,
    contracts.QUERY_METRICS: QUERY,
    contracts.ASK_PD_AUTOSCALING: QUERY,
    contracts.ASK_EXTERNAL_ENDPOINT: QUERY,
    # Node allocatable and TiKV store capacity: a node list and a PD stores query.
    contracts.OBSERVE_CAPACITY: QUERY,
}
