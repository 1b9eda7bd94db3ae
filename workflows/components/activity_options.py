"""The components loop's activities and their time limits (see workflows.activity_options for
what each limit is for). start_to_close is the autoscaler's `activity_timeout_s` setting (60 s by
default) for every call, set at the call; the table gives the heartbeat, so a worker killed in a
PD or Prometheus query, or in a TidbCluster write, is noticed within seconds, not at that limit.

A round's reads run as local activities (`LOCAL_READS`, patch `local-round-reads`): inside the
round's workflow task, in the worker that runs the workflow, so a quiet round is one workflow
task instead of one per read. A local activity has no heartbeat: a worker killed during one
loses its workflow task, which another worker takes after the workflow task timeout (10 s) and
reads again (reads are safe to repeat). A round's reports, its Events and the status write, run
the same way (`LOCAL_REPORTS`, patch `round-reports-local`): a status write is a replace, safe
to repeat, and an Event is named from a key the workflow draws, so one written again is refused
as AlreadyExists and written once. The changes (replicas, group create and delete) stay normal
activities: they carry their keys and outlive the worker."""

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

# One read as a local activity: a Kubernetes get or list, or one query of PD, Prometheus or a
# recommender (their HTTP clients give up after components.http_timeout_s, 5 s by default).
# Longer keeps the round's workflow task open (the worker extends it), and the retry policy
# allows three attempts; the autoscaler's `activity_timeout_s` caps it when smaller.
LOCAL_READ = timedelta(seconds=15)
LOCAL_READS: dict[str, timedelta] = {
    contracts.GET_AUTOSCALER: LOCAL_READ,
    contracts.GET_TIDB_CLUSTER: LOCAL_READ,
    contracts.LIST_AUTO_CLUSTERS: LOCAL_READ,
    contracts.QUERY_METRICS: LOCAL_READ,
    contracts.ASK_PD_AUTOSCALING: LOCAL_READ,
    contracts.ASK_EXTERNAL_ENDPOINT: LOCAL_READ,
    contracts.OBSERVE_CAPACITY: LOCAL_READ,
}

# A round's reports (patch `round-reports-local` in workflows/components/autoscaler.py): one
# Kubernetes write each, retried with the round's write policy.
LOCAL_REPORT = timedelta(seconds=15)
LOCAL_REPORTS: dict[str, timedelta] = {
    contracts.EMIT_AUTOSCALER_EVENT: LOCAL_REPORT,
    contracts.WRITE_AUTOSCALER_STATUS: LOCAL_REPORT,
}
