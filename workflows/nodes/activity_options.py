"""The node loop's activities and their time limits (see workflows.activity_options for what
each limit is for). Every activity heartbeats (HEARTBEAT unless named): a worker killed in any of
them is noticed within seconds and the activity is retried on another worker.
start_to_close is sized on what one attempt does, with room for a loaded 2-core machine."""

from __future__ import annotations

from datetime import timedelta

from scaling.nodes import contracts
from workflows.activity_options import WAIT_HEARTBEAT, ActivityOptions

S = timedelta(seconds=1)

NODE_ACTIVITIES: dict[str, ActivityOptions] = {
    # -- the loop ---------------------------------------------------------------------------
    # One list of pods and one of nodes: ~30 ms on a small cluster, seconds at 10,000 pods.
    contracts.OBSERVE_CLUSTER: ActivityOptions(60 * S),
    # Provider catalogues: a cached read, or one Hetzner API call (hcloud retries 5x itself).
    contracts.GET_CATALOGUE: ActivityOptions(60 * S),
    # Up to 200 Events, one create each.
    contracts.EMIT_POD_EVENTS: ActivityOptions(120 * S),
    # One status patch per invalid group.
    contracts.REPORT_NODE_GROUP_STATUS: ActivityOptions(60 * S),
    # Up to START_BATCH workflow starts side by side; the ids make a retry start nothing twice.
    contracts.START_NODE_REQUESTS: ActivityOptions(60 * S),
    # -- a NodeRequest ----------------------------------------------------------------------
    # One provider create (a Node for KWOK, a server for Hetzner, with hcloud's own retries);
    # the name or label derived from request and attempt makes a retry find the first machine.
    contracts.CREATE_NODE: ActivityOptions(120 * S),
    # Until Ready: start_to_close is the request's readiness timeout + 60 s (set at the call);
    # it carries its deadline in the heartbeat, so a retry resumes the same wait.
    contracts.WAIT_NODE_READY: ActivityOptions(120 * S, heartbeat=WAIT_HEARTBEAT),
    # One round of a NodeRequestBatch's waits: start_to_close is the round + 60 s (set at the call).
    contracts.WAIT_NODES_READY: ActivityOptions(120 * S, heartbeat=WAIT_HEARTBEAT),
    # One provider delete (404 = done).
    contracts.DELETE_NODE: ActivityOptions(120 * S),
    # -- scale-down -------------------------------------------------------------------------
    # Scores every candidate node against the cluster: the slowest read of the loop.
    contracts.EVALUATE_SCALE_DOWN: ActivityOptions(120 * S),
    contracts.CHECK_NODE_REMOVAL: ActivityOptions(60 * S),
    # One node's pods through the scale-up planner, plus the providers' catalogue.
    contracts.PLAN_REPLACEMENT: ActivityOptions(60 * S),
    # Single patches, evictions and deletes of one object.
    contracts.MARK_NODE_FOR_SCALE_DOWN: ActivityOptions(30 * S),
    contracts.UNMARK_NODE: ActivityOptions(30 * S),
    contracts.TAINT_DISRUPTED: ActivityOptions(30 * S),
    contracts.UPDATE_SOFT_TAINTS: ActivityOptions(30 * S),
    contracts.CORDON_NODE: ActivityOptions(30 * S),
    contracts.EVICT_POD: ActivityOptions(30 * S),
    # A pod at a time, each waited for until bound again: start_to_close is set at the call from
    # the number of pods; the progress rides in the heartbeat.
    contracts.EVICT_IN_ORDER: ActivityOptions(120 * S, heartbeat=WAIT_HEARTBEAT),
    contracts.DELETE_NODE_OBJECT: ActivityOptions(30 * S),
    # Until the evicted pods are gone: start_to_close is the drain timeout + 60 s (set at the
    # call); the deadline rides in the heartbeat, as for WAIT_NODE_READY.
    contracts.WAIT_PODS_GONE: ActivityOptions(120 * S, heartbeat=WAIT_HEARTBEAT),
    contracts.EMIT_NODE_EVENTS: ActivityOptions(30 * S),
    # The worker's cached nodes plus every provider's machine list.
    contracts.FIND_ORPHANS: ActivityOptions(60 * S),
    # One describe per removal the loop holds (at most the removals in flight).
    contracts.REMOVALS_ENDED: ActivityOptions(30 * S),
    # -- machine GC -------------------------------------------------------------------------
    contracts.LIST_PROVIDER_MACHINES: ActivityOptions(60 * S),
    contracts.LIST_NODE_PROVIDER_IDS: ActivityOptions(60 * S),
    # One query to the loop's workflow.
    contracts.LIVE_NODE_REQUEST_IDS: ActivityOptions(30 * S),
    contracts.REPORT_COLLECTED_MACHINE: ActivityOptions(30 * S),
    # Provider catalogue vs. groups, then a status write per group.
    contracts.REPORT_UNUSABLE_POOLS: ActivityOptions(60 * S),
}
