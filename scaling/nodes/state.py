"""NodeAutoscaler's durable state, carried across continue-as-new, and how child reports fold into it."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Collection, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, Field, PlainSerializer

from scaling.kube.drain import NO_PLACE_TO_MOVE
from scaling.kube.labels import request_key
from scaling.kube.models import NodeInfo
from scaling.nodes.disruption.orchestration import is_replacement_id
from scaling.nodes.disruption.refusals import NOT_WORTH_IT, RefusedConsolidation, remember
from scaling.nodes.gc.orphans import Orphan
from scaling.nodes.models import (
    LABEL_REQUEST,
    InFlightRequest,
    NodeGroup,
    PodProblem,
    RequestPhase,
    SpecProblem,
)
from scaling.nodes.scale_down.models import NodeState, ScaleDownReuse
from scaling.nodes.scale_down.removals import CandidateState, ScaleDownPhase, ScaleDownStatus
from scaling.nodes.scale_up.in_flight_table import from_table, to_table
from scaling.nodes.scale_up.requests import NodeRequestStatus
from scaling.nodes.scale_up.topology import SHARE_SEPARATOR
from scaling.nodes.settings import AutoscalerSettings

# Finished requests and removals kept for status; with the in-flight records (at most
# max_requests_in_flight) they are most of the state carried across continue-as-new.
RECENT_REQUESTS_KEPT = 50


# Shape keys a finished request keeps (for `explain pod`); in flight it keeps all of them.
RECENT_SHAPES_KEPT = 8
# How long a request that reported Ready keeps covering its pods while no observation shows its
# node Ready (NodeAutoscalerState.landing): far beyond a lagging watch (the cache relists after
# activities.kube.cache.WAIT_S behind the last observation), short beside a readiness timeout,
# so a node that went away before any observation saw it holds its pods back only this long.
LANDING_HOLD_S = 60.0
REPORTED_PODS_KEPT = 1000  # ~45 KB of state: a sample of each shape's pods is named per loop


def _reported_columns(keys: list[str]) -> dict[str, list[Any]]:
    # "uid/reason" x REPORTED_PODS_KEPT: ~57 KB as strings, ~40 KB with each reason named once.
    reasons: dict[str, int] = {}
    uids, which = [], []
    for key in keys:
        uid, _, reason = key.rpartition("/")
        uids.append(uid)
        which.append(reasons.setdefault(reason, len(reasons)))
    return {"reasons": list(reasons), "uid": uids, "reason": which}


def _reported_keys(value: Any) -> Any:
    if not isinstance(value, dict):
        return value  # the older form: the keys themselves
    reasons = value["reasons"]
    return [f"{uid}/{reasons[i]}" for uid, i in zip(value["uid"], value["reason"], strict=True)]


class LoopSummary(BaseModel):
    at: datetime | None = None
    unschedulable: int = 0
    fits_existing: int = 0
    covered_in_flight: int = 0
    planned_nodes: int = 0
    problems: int = 0
    nodes: int = 0
    pods_total: int = 0
    pods_running: int = 0
    headroom_problems: list[PodProblem] = Field(default_factory=list)  # groups whose headroom could not be planned


class NodeAutoscalerState(BaseModel):
    paused: bool = False
    # Kind -> resourceVersion of the last observation: the next one is at least as new.
    resource_versions: dict[str, str] = Field(default_factory=dict)
    seq: int = 0
    iterations: int = 0
    runs: int = 1
    # Crosses history as one compact table (scaling.nodes.scale_up.in_flight_table); runs
    # recorded before it carried id -> record, which still reads.
    in_flight: Annotated[
        dict[str, NodeRequestStatus],
        BeforeValidator(from_table),
        PlainSerializer(to_table, when_used="json"),
    ] = Field(default_factory=dict)
    # Requests that reported Ready whose node no observation has shown Ready yet: the readiness
    # wait may read the API server ahead of the cache the loop observes from (a lagging watch,
    # another worker replica), and until the node shows, its pods look pending with no room for
    # them. They stay covered (still_landing says how long) and count toward
    # max_requests_in_flight, so with `in_flight` they stay within its bound; same table.
    landing: Annotated[
        dict[str, NodeRequestStatus],
        BeforeValidator(from_table),
        PlainSerializer(to_table, when_used="json"),
    ] = Field(default_factory=dict)
    recent: list[NodeRequestStatus] = Field(default_factory=list)
    finished_by_phase: dict[str, int] = Field(default_factory=dict)
    attempts_by_pool: dict[str, dict[str, int]] = Field(default_factory=dict)
    nodes_created: int = 0
    never_satisfiable: dict[str, PodProblem] = Field(default_factory=dict)
    groups_fingerprint: str = ""
    # Pod uid + reason already evented; crosses history as two columns (`_reported_columns`).
    reported_pods: Annotated[
        list[str], BeforeValidator(_reported_keys), PlainSerializer(_reported_columns, when_used="json")
    ] = Field(default_factory=list)
    invalid_groups: list[SpecProblem] = Field(default_factory=list)
    banned_pools: list[str] = Field(default_factory=list)  # "group/pool"
    backoff_until: dict[str, float] = Field(default_factory=dict)  # "group/pool" -> epoch seconds
    backoff_failures: dict[str, int] = Field(default_factory=dict)
    # "provider/server type" -> epoch seconds: no capacity there until then (capacity memory).
    capacity_unavailable_until: dict[str, float] = Field(default_factory=dict)
    last_loop: LoopSummary = Field(default_factory=LoopSummary)
    # The last loop per pod shape, for `explain pod` (scaling.nodes.explain bounds both):
    last_demand: dict[str, int] = Field(default_factory=dict)  # shape key -> pods pending
    last_problems: dict[str, PodProblem] = Field(default_factory=dict)  # shape key -> its problem
    # scale-down
    last_scale_up_at: float | None = None
    unneeded_since: dict[str, float] = Field(default_factory=dict)
    scale_down_evaluated_at: float | None = None  # epoch seconds of the last evaluation
    candidates: dict[str, CandidateState] = Field(default_factory=dict)  # capped: see scale_down.evaluation
    candidates_by_state: dict[str, int] = Field(default_factory=dict)  # every managed node counted
    candidates_digest: str = ""  # of the evaluation that sent `candidates`
    scale_down_reuse: ScaleDownReuse | None = None  # the last evaluation, while it may stand for the next
    scale_downs: dict[str, ScaleDownStatus] = Field(default_factory=dict)  # node -> running child
    recent_scale_downs: list[ScaleDownStatus] = Field(default_factory=list)
    scale_down_by_phase: dict[str, int] = Field(default_factory=dict)
    blocked_by_reason: dict[str, int] = Field(default_factory=dict)  # finished children
    protected_nodes: list[str] = Field(default_factory=list)
    orphans: list[Orphan] = Field(default_factory=list)
    # Consolidations found not worth it, each with what its plan read: held while nothing changed
    # (scaling.nodes.disruption.refusals; at most REFUSALS_KEPT).
    refused_consolidations: list[RefusedConsolidation] = Field(default_factory=list)


class AutoscalerInput(BaseModel):
    settings: AutoscalerSettings
    state: NodeAutoscalerState | None = None


def groups_fingerprint(groups: list[NodeGroup]) -> str:
    """Changes whenever any group's spec changes: never-satisfiable pods are re-evaluated then."""
    blob = json.dumps([g.model_dump(mode="json") for g in groups], sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def in_flight_for_planner(requests: dict[str, NodeRequestStatus]) -> list[InFlightRequest]:
    return [
        r.for_planner()
        for r in requests.values()
        # A request awaiting approval holds its pods: they are not planned a second node.
        if r.phase in (RequestPhase.PENDING, RequestPhase.AWAITING_APPROVAL, RequestPhase.PROVISIONING)
    ]


def with_held_landing(
    in_flight: list[InFlightRequest], landing: Mapping[str, NodeRequestStatus]
) -> list[InFlightRequest]:
    """The requests the planner counts in flight, plus those Ready whose node no observation has
    shown Ready yet (still_landing): without them it plans their pods a second node."""
    ids = {r.id for r in in_flight}
    return [*in_flight, *(r.for_planner() for r in landing.values() if r.id not in ids)]


def still_landing(
    landing: Mapping[str, NodeRequestStatus],
    with_ready_node: Collection[str],
    now: float,
    hold_s: float = LANDING_HOLD_S,
) -> dict[str, NodeRequestStatus]:
    """The Ready requests that still cover their pods after an observation: not those whose node
    it shows Ready (requests_with_ready_node: the node's room is counted there), nor those that
    reported Ready `hold_s` or more ago (`now`: epoch seconds)."""
    seen = set(with_ready_node)
    return {rid: r for rid, r in landing.items() if rid not in seen and now - _reported_ready_at(r) < hold_s}


def _reported_ready_at(r: NodeRequestStatus) -> float:
    # The Ready attempt's time: the compact table keeps it, not finished_at.
    at = r.finished_at or (r.attempts[-1].timestamp if r.attempts else r.started_at)
    return 0.0 if at is None else at.replace(tzinfo=at.tzinfo or UTC).timestamp()


def with_landing_requests(
    in_flight: list[InFlightRequest], before: Sequence[InFlightRequest], ready: Collection[str]
) -> list[InFlightRequest]:
    """The requests in flight now, plus those of `before` (in flight when the observation
    began) that reported Ready since: their node may be missing from that observation, or not
    Ready in it, and without them the planner would plan their pods a second node."""
    ids = {r.id for r in in_flight}
    return [*in_flight, *(r for r in before if r.id in ready and r.id not in ids)]


def requests_with_ready_node(requests: Mapping[str, str], nodes: Iterable[NodeInfo]) -> list[str]:
    """The requests (id -> node name, "" if not reported yet) whose node is Ready among `nodes`,
    found by the node-request label a created node carries, or by the node's name.

    A node is Ready some seconds before its request says so (the readiness poll, the label
    step, the signal); in a burst hundreds are in that window. The planner must count such a
    node once: as a node with room, not also as a request in flight (that hid ~20 nodes' worth
    of pods for 30 s in a 10,000-pod burst)."""
    by_key = {request_key(rid): rid for rid in requests}
    by_name = {name: rid for rid, name in requests.items() if name}
    found: set[str] = set()
    for n in nodes:
        if not n.ready:
            continue
        rid = by_key.get(n.labels.get(LABEL_REQUEST, "")) or by_name.get(n.name)
        if rid is not None:
            found.add(rid)
    return sorted(found)


def counted_once(
    in_flight: list[InFlightRequest], with_ready_node: Collection[str], *, keep_zone_shares: bool = False
) -> list[InFlightRequest]:
    """The requests the planner counts in flight: not those whose node is Ready in the
    observation (requests_with_ready_node), since the node's room is counted there, also when
    the skew of a zone spread keeps pods off it for now (PodShape.domain_room).

    `keep_zone_shares`: runs recorded before domain_room kept counting a request holding a
    domain's share of a zone- or region-spread shape, so that room counted twice."""
    ready = set(with_ready_node)
    return [
        r for r in in_flight if r.id not in ready or (keep_zone_shares and any(SHARE_SEPARATOR in k for k in r.pods))
    ]


def record_request_update(state: NodeAutoscalerState, update: NodeRequestStatus) -> None:
    """Fold a NodeRequest's reported status into the autoscaler's state."""
    known = state.in_flight.get(update.id)
    if known is not None and not (update.pods or update.pod_uids):
        # Requests report without their pods (signals stay small): keep what was recorded.
        update = update.model_copy(update={"pods": known.pods, "pod_uids": known.pod_uids})
    if not update.final:
        # A request's Provisioning report comes from its readiness wait (activities.nodes.requests
        # .report_to_loop), in every attempt: one that lands after the request ended must not
        # put it back in flight.
        if known is not None or not any(r.id == update.id for r in state.recent):
            state.in_flight[update.id] = update
        return
    if state.in_flight.pop(update.id, None) is None and any(r.id == update.id for r in state.recent):
        return  # a duplicate final report
    phase = update.phase.value
    state.finished_by_phase[phase] = state.finished_by_phase.get(phase, 0) + 1
    for a in update.attempts:
        per_pool = state.attempts_by_pool.setdefault(a.pool, {})
        per_pool[a.result.value] = per_pool.get(a.result.value, 0) + 1
    if update.phase == RequestPhase.READY:
        state.nodes_created += 1
        if update.pods or update.pod_uids:  # its pods, until an observation shows its node Ready
            state.landing[update.id] = update
    # A few shape keys stay for `explain pod`; the full record matters only in flight.
    kept = dict(sorted(update.pods.items(), key=lambda kv: (-kv[1], kv[0]))[:RECENT_SHAPES_KEPT])
    state.recent.append(update.model_copy(update={"pods": kept}))
    del state.recent[:-RECENT_REQUESTS_KEPT]


def _same_report(a: ScaleDownStatus, b: ScaleDownStatus) -> bool:
    return (a.workflow_id, a.run, a.node, a.phase, a.reason, a.message, a.cluster_digest) == (
        b.workflow_id,
        b.run,
        b.node,
        b.phase,
        b.reason,
        b.message,
        b.cluster_digest,
    )


def successors_in_flight(state: NodeAutoscalerState, now: float) -> list[InFlightRequest]:
    """The successors the loop's NodeReplacements are making (ScaleDownStatus.successors) at ``now``
    (epoch s; not past their successors_until), each once: a multi-node command reports them for each
    of its nodes."""
    found: dict[str, InFlightRequest] = {}
    for sd in state.scale_downs.values():
        if sd.successors_until <= now:
            continue
        for r in sd.successors:
            found.setdefault(r.id, r)
    return [found[k] for k in sorted(found)]


# A removal whose workflow closed without a final report to the loop (release_ended).
REMOVAL_ENDED_UNHEARD = "RemovalEndedUnheard"
# At most this many removals' workflows are looked up per check (bounded in the loop's history).
REMOVALS_CHECKED_MAX = 100


def removals_to_check(state: NodeAutoscalerState) -> list[str]:
    """The workflow ids of the removals the loop holds nodes for (REMOVALS_ENDED asks about them)."""
    return sorted({sd.workflow_id for sd in state.scale_downs.values() if sd.workflow_id})[:REMOVALS_CHECKED_MAX]


def release_ended(state: NodeAutoscalerState, ended: Collection[str], now: float) -> list[str]:
    """Let go of the nodes whose removal's workflow closed without a final word to the loop
    (``ended``: terminated from outside, or failed), as a failed removal: held for good before, each
    kept a budget slot, and its node out of every evaluation. Returns the nodes let go."""
    gone = sorted(n for n, sd in state.scale_downs.items() if sd.workflow_id in ended)
    for node in gone:
        sd = state.scale_downs[node]
        message = f"{sd.workflow_id} ended without a final report (terminated or failed); node {node} let go"
        update = {"phase": ScaleDownPhase.FAILED, "reason": REMOVAL_ENDED_UNHEARD, "message": message}
        record_scale_down_update(
            state, sd.model_copy(update={**update, "successors": [], "successors_until": 0.0}), now
        )
    return gone


def commands_in_flight(state: NodeAutoscalerState) -> list[str]:
    """The multi-node commands with a node the loop still has in flight (their NodeScaleDowns report
    the command's key): the evaluation holds their successors."""
    return sorted({sd.command for sd in state.scale_downs.values() if sd.command})


def reported_final(state: NodeAutoscalerState, workflow_id: str, node: str) -> bool:
    """Whether the removal ``workflow_id`` already told the loop its final word on ``node``."""
    return any(r.workflow_id == workflow_id and r.node == node and r.final for r in state.recent_scale_downs)


def release_unstarted(
    state: NodeAutoscalerState,
    workflow_id: str,
    first: str,
    held_before: Mapping[str, ScaleDownStatus | None],
    drained_by: Collection[str] = (),
) -> list[str]:
    """A removal the loop could not start because a run with its id (``first``'s) exists. A run that
    already gave its final word on a node is closing and says nothing more of it: let go. So does one
    whose NodeScaleDown child (``drained_by``: the ids of the children that drain a NodeReplacement's
    nodes and report them for it) gave it. The command's other nodes go too unless that run held them
    when the loop named them (``held_before``: each node's status before the start). The rest is the
    run's, at work since before the loop (re)started, and it reports in. The consolidation bench's loop
    re-asked a refused command 200 ms after its refusal, under the id of the refused run still closing,
    and held its three nodes from the budget for good; and it held a node for good that way once its
    single-node replacement's child had reported it cancelled (the run had said nothing itself)."""
    said = [workflow_id, *drained_by]
    released = [
        n
        for n, before in held_before.items()
        if any(reported_final(state, wid, n) for wid in said)
        or (n != first and (before is None or before.workflow_id != workflow_id or before.final))
    ]
    for n in released:
        state.scale_downs.pop(n, None)
    return released


def record_scale_down_update(state: NodeAutoscalerState, update: ScaleDownStatus, now: float = 0.0) -> None:
    """Fold a NodeScaleDown child's report into the autoscaler's state (duplicates ignored); a
    consolidation found not worth it is remembered with what its plan read, at ``now``."""
    if not update.final:
        state.scale_downs[update.node] = update
        return
    current = state.scale_downs.get(update.node)
    if current is not None and current.workflow_id != update.workflow_id and is_replacement_id(update.workflow_id):
        # A command's late report for a node it no longer holds (a candidate it let go, that another
        # command now holds): the holder reports for it. Popping it let the consolidation bench's loop
        # start a fourth disruption under a budget of three.
        return
    if current is None or current.workflow_id != update.workflow_id:
        # (by node too: a multi-node consolidation's NodeReplacement reports for each of its nodes; and
        # by what it says: a command's id is its first node's, so a later run reports under it again, for
        # nodes the loop did not hold. Read as a duplicate, a refused node never had its refusal again,
        # and the bench's loop re-asked one command every 0.6 s. By run too: five minutes on, a refusal
        # forgotten, a command asked again and refused in the same words for the nodes it did not hold
        # (its budget let one go) was read as the first run's report, and the bench's loop re-asked it
        # every 0.6 s until that report left recent_scale_downs.)
        if any(_same_report(r, update) for r in state.recent_scale_downs):
            return
    state.scale_downs.pop(update.node, None)
    if update.reason == NOT_WORTH_IT and update.cluster_digest:
        refusal = RefusedConsolidation(node=update.node, digest=update.cluster_digest, at=now, message=update.message)
        state.refused_consolidations = remember(state.refused_consolidations, refusal)
    elif update.reason == NO_PLACE_TO_MOVE and update.kind == NodeState.CONSOLIDATED.value:
        # The command's plan placed the pods and the drain's re-check did not: asked again at once, the
        # same plan and the same re-check (the consolidation bench's seed 3: every 6 s). Held as a
        # refusal with no digest, for REFUSAL_KEPT_S (what changed since, the re-check did not say).
        refusal = RefusedConsolidation(node=update.node, digest="", at=now, message=update.message)
        state.refused_consolidations = remember(state.refused_consolidations, refusal)
    phase = update.phase.value
    state.scale_down_by_phase[phase] = state.scale_down_by_phase.get(phase, 0) + 1
    if update.reason and update.phase != ScaleDownPhase.REMOVED:
        state.blocked_by_reason[update.reason] = state.blocked_by_reason.get(update.reason, 0) + 1
    state.recent_scale_downs.append(update)
    del state.recent_scale_downs[:-RECENT_REQUESTS_KEPT]
    state.unneeded_since.pop(update.node, None)
