"""The fleet loop's activities and their time limits (see workflows.activity_options for what
each limit is for). Each is one or a few OCM REST calls; all heartbeat, so a worker killed in an
OCM create is noticed within seconds and the retry, finding the cluster by its external id,
makes no second one. start_to_close is the per-call bound of a provisioning step, which
DataPlaneCluster also cuts to what is left of the step's deadline."""

from __future__ import annotations

from datetime import timedelta

from scaling.fleet import contracts
from workflows.activity_options import ActivityOptions

CALL = ActivityOptions(timedelta(minutes=1))

FLEET_ACTIVITIES: dict[str, ActivityOptions] = {
    # Search by external id, then POST /clusters when none exists.
    contracts.CREATE_OCM_CLUSTER: CALL,
    contracts.GET_OCM_CLUSTER: CALL,
    contracts.DELETE_OCM_CLUSTER: CALL,
    # One machine pool per instance type (list, then create the missing ones).
    contracts.CREATE_MACHINE_POOL: CALL,
    contracts.ENSURE_INGRESS_DNS: CALL,
    contracts.ENSURE_IDENTITY_PROVIDER: CALL,
    # The agent's resources on the data-plane cluster: a handful of creates.
    contracts.APPLY_CLUSTER_RESOURCES: CALL,
    contracts.INSTALL_ADDON: CALL,
    contracts.GET_ADDON: CALL,
    contracts.CLEANUP_CLUSTER_RESOURCES: CALL,
}

# The region's decisions (scaling.fleet.decisions): pure work, milliseconds at 1,000 clusters.
DECISION = ActivityOptions(timedelta(seconds=30))
FLEET_DECISIONS: dict[str, ActivityOptions] = {
    contracts.PLACE_INSTANCES: DECISION,
    contracts.RECHECK_REMOVALS: DECISION,
    contracts.EVALUATE_REGION: DECISION,
}
