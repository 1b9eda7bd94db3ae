"""Why a pod waits and why a node stays: answers from the NodeAutoscaler's state.

`growth nodes explain pod NS/NAME` and `explain node NAME` ask the running loop with a
query; these pure functions compute the answer from the state the loop keeps anyway (in-flight
requests by pod shape, never-satisfiable shapes, the last loop's per-shape demand and problems,
scale-down candidates, timers and running removals). The CLI reads the pod or node from the
cluster first (its shape key, whether it is bound or managed) and passes only names, a uid and
a shape key: never anything secret.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from pydantic import BaseModel, Field

from scaling.nodes.models import PodProblem
from scaling.nodes.scale_down.methods import REMOVABLE_NOW, method_for
from scaling.nodes.scale_down.models import NodeState
from scaling.nodes.scale_down.removals import CandidateState, ScaleDownStatus
from scaling.nodes.scale_up.requests import NodeRequestStatus
from scaling.nodes.scale_up.topology import same_shape
from scaling.nodes.settings import AutoscalerSettings
from scaling.nodes.state import NodeAutoscalerState, successors_in_flight
from scaling.text import shorten, when

# The last loop's per-shape record (demand and problems) kept in state: one entry per shape.
LAST_LOOP_SHAPES_KEPT = 200
PROBLEM_MESSAGE_CHARS = 300
REQUESTS_NAMED = 5  # in-flight requests an explanation lists for one shape


class ExplainPodInput(BaseModel):
    namespace: str
    name: str
    uid: str = ""
    key: str = ""  # the pod's shape: scaling.nodes.scale_up.demand.demand_key


class ExplainNodeInput(BaseModel):
    name: str
    managed: bool | None = None  # carries growth's group label (None: the caller did not look)


class RequestRef(BaseModel):
    """A NodeRequest as an explanation names it."""

    id: str
    group: str
    pool: str
    server_type: str = ""
    phase: str
    node_name: str = ""
    message: str = ""
    pods_of_shape: int = 0  # pods of the asked pod's shape the request was made for
    names_pod: bool = False  # the request names the asked pod itself (by uid)
    finished_at: datetime | None = None


class PodExplanation(BaseModel):
    namespace: str
    name: str
    uid: str = ""
    key: str = ""
    # InFlight | NeverSatisfiable | Problem | PendingNoRequest | RecentlyFinished | NotSeen
    # (the CLI answers Scheduled / NotDemand itself, from the pod).
    outcome: str
    summary: str
    requests: list[RequestRef] = Field(default_factory=list)
    problem: PodProblem | None = None
    recent: RequestRef | None = None  # the newest finished request for it or its shape
    shape_pending: int = 0  # pods of its shape pending in the last loop (after the free room of nodes)
    last_loop_at: datetime | None = None
    paused: bool = False
    notes: list[str] = Field(default_factory=list)


class NodeExplanation(BaseModel):
    node: str
    # Removing | Protected | ScaleDownDisabled | UnneededWaiting | RemovableNow | Kept | NotEvaluated
    outcome: str
    summary: str
    candidate: CandidateState | None = None
    unneeded_since: float | None = None
    removable_at: float | None = None  # when the timer holding it runs out (seconds since epoch)
    scale_down: ScaleDownStatus | None = None  # the running removal
    last_removal: ScaleDownStatus | None = None  # the newest finished removal of this node
    made_by: RequestRef | None = None  # the NodeRequest that created it, when still remembered
    protected: bool = False
    evaluated_at: float | None = None  # the last scale-down evaluation
    notes: list[str] = Field(default_factory=list)


# -- what the loop keeps for explanations (bounded) ----------------------------------------


def last_demand_of(shape_counts: Iterable[tuple[str, int]], keep: int = LAST_LOOP_SHAPES_KEPT) -> dict[str, int]:
    """Pods pending per shape in this loop, the largest `keep` shapes."""
    ranked = sorted(((k, n) for k, n in shape_counts if n > 0), key=lambda kn: (-kn[1], kn[0]))
    return dict(ranked[:keep])


def problems_by_shape(problems: Iterable[PodProblem], keep: int = LAST_LOOP_SHAPES_KEPT) -> dict[str, PodProblem]:
    """This loop's problems, one per shape (counts summed; the first named pod and reason kept),
    at most `keep` shapes (the most pods first), messages shortened."""
    out: dict[str, PodProblem] = {}
    for p in problems:
        key = p.key or p.uid
        known = out.get(key)
        if known is None:
            out[key] = p.model_copy(update={"message": shorten(p.message, PROBLEM_MESSAGE_CHARS)})
        else:
            out[key] = known.model_copy(update={"count": known.count + p.count})
    ranked = sorted(out.items(), key=lambda kv: (-kv[1].count, kv[0]))
    return dict(ranked[:keep])


# -- pods ---------------------------------------------------------------------------------------


def _pods_of_shape(r: NodeRequestStatus, key: str) -> int:
    """Pods of the shape the request was made for, in any domain's share (zone spread)."""
    return sum(n for k, n in r.pods.items() if same_shape(k, key)) if key else 0


def _ref(r: NodeRequestStatus, key: str, uid: str) -> RequestRef:
    return RequestRef(
        id=r.id,
        group=r.group,
        pool=r.current_pool,
        server_type=r.server_type,
        phase=r.phase.value,
        node_name=r.node_name,
        message=r.message,
        pods_of_shape=_pods_of_shape(r, key),
        names_pod=bool(uid) and uid in r.pod_uids,
        finished_at=r.finished_at,
    )


def _describe_request(r: RequestRef) -> str:
    node = f", node {r.node_name}" if r.node_name else ""
    return f"NodeRequest {r.id} (group {r.group}, pool {r.pool}, {r.phase}{node})"


def explain_pod(settings: AutoscalerSettings, state: NodeAutoscalerState, inp: ExplainPodInput) -> PodExplanation:
    """Which request a pending pod waits for, or why it has none."""
    key, uid = inp.key, inp.uid
    loop_at = state.last_loop.at
    base = {
        "namespace": inp.namespace,
        "name": inp.name,
        "uid": uid,
        "key": key,
        "shape_pending": state.last_demand.get(key, 0) if key else 0,
        "last_loop_at": loop_at,
        "paused": state.paused,
    }
    notes = ["the autoscaler is paused: it plans no new requests until resumed"] if state.paused else []
    who = f"{inp.namespace}/{inp.name}"

    holding = [
        _ref(r, key, uid) for r in state.in_flight.values() if (uid and uid in r.pod_uids) or _pods_of_shape(r, key)
    ]
    holding.sort(key=lambda r: (not r.names_pod, r.id))
    if holding:
        first = holding[0]
        if first.names_pod:
            summary = f"pod {who} waits for {_describe_request(first)}, made for it"
        else:
            total = sum(r.pods_of_shape for r in holding)
            summary = (
                f"pod {who} waits for {_describe_request(first)}: "
                f"{len(holding)} in-flight request(s) were made for {total} pod(s) of its shape"
            )
        if first.message:
            summary += f"; {first.message}"
        return PodExplanation(
            outcome="InFlight", summary=summary, requests=holding[:REQUESTS_NAMED], notes=notes, **base
        )

    never = state.never_satisfiable.get(key) if key else None
    if never is not None:
        return PodExplanation(
            outcome="NeverSatisfiable",
            summary=f"pod {who} can never be satisfied by any node group: {never.message} "
            f"({never.count} pod(s) of its shape; re-evaluated when node groups change)",
            problem=never,
            notes=notes,
            **base,
        )

    recent = _recent_for(state.recent, key, uid)
    problem = state.last_problems.get(key) if key else None
    if problem is not None:
        return PodExplanation(
            outcome="Problem",
            summary=f"no node requested for pod {who} in the last loop ({when(loop_at)}): "
            f"{problem.reason}: {problem.message}",
            problem=problem,
            recent=recent,
            notes=notes,
            **base,
        )

    if key and key in state.last_demand:
        n = state.last_demand[key]
        if len(state.in_flight) >= settings.max_requests_in_flight:
            why = (
                f"the in-flight limit is reached ({len(state.in_flight)} of {settings.max_requests_in_flight} "
                "requests): later loops request more as requests finish"
            )
        elif state.in_flight:
            ids = ", ".join(sorted(r.id for r in state.in_flight.values())[:REQUESTS_NAMED])
            why = f"the spare room of an in-flight request covers it (in flight: {ids})"
        elif successors := successors_in_flight(state, loop_at.timestamp() if loop_at else 0.0):
            ids = ", ".join(r.id for r in successors[:REQUESTS_NAMED])
            why = f"the spare room of a replacement's successor being made covers it ({ids})"
        else:
            why = "the next loop plans it"
        return PodExplanation(
            outcome="PendingNoRequest",
            summary=f"pod {who} was pending in the last loop ({when(loop_at)}, {n} pod(s) of its shape) "
            f"without a request of its own: {why}",
            recent=recent,
            notes=notes,
            **base,
        )

    if recent is not None:
        msg = f": {recent.message}" if recent.message else ""
        return PodExplanation(
            outcome="RecentlyFinished",
            summary=f"the last request for pod {who} or its shape, {recent.id} (group {recent.group}, "
            f"pool {recent.pool}), ended {recent.phase} at {when(recent.finished_at)}{msg}",
            recent=recent,
            notes=notes,
            **base,
        )

    reasons = ["it fits the free room of an existing node (the scheduler places it)", "the loop has not seen it yet"]
    if state.last_loop.fits_existing == 0:
        reasons.pop(0)
    summary = f"pod {who} was not pending in the last loop ({when(loop_at)}): " + " or ".join(reasons)
    return PodExplanation(outcome="NotSeen", summary=summary, notes=notes, **base)


def _recent_for(recent: list[NodeRequestStatus], key: str, uid: str) -> RequestRef | None:
    for r in reversed(recent):
        if (uid and uid in r.pod_uids) or _pods_of_shape(r, key):
            return _ref(r, key, uid)
    return None


# -- nodes --------------------------------------------------------------------------------------


def explain_node(settings: AutoscalerSettings, state: NodeAutoscalerState, inp: ExplainNodeInput) -> NodeExplanation:
    """Why a node is kept, or when (and how far) its removal goes."""
    name = inp.name
    cand = state.candidates.get(name)
    last_removal = next((d for d in reversed(state.recent_scale_downs) if d.node == name), None)
    base = {
        "node": name,
        "candidate": cand,
        "unneeded_since": state.unneeded_since.get(name),
        "last_removal": last_removal,
        "made_by": _made_by(state, name),
        "protected": name in state.protected_nodes,
        "evaluated_at": state.scale_down_evaluated_at,
    }
    notes: list[str] = []
    if last_removal is not None:
        why = f": {last_removal.reason}" if last_removal.reason else ""
        notes.append(f"an earlier removal ({last_removal.kind}) ended {last_removal.phase.value}{why}")

    running = state.scale_downs.get(name)
    if running is not None:
        at = f", ScaleDownAt {when(running.scale_down_at)}" if running.scale_down_at else ""
        err = f"; last error: {running.last_error}" if running.last_error else ""
        return NodeExplanation(
            outcome="Removing",
            summary=f"node {name} is being removed: {running.phase.value} ({running.kind}{at}){err}",
            scale_down=running,
            removable_at=running.scale_down_at or None,
            notes=notes,
            **base,
        )
    if name in state.protected_nodes:
        return NodeExplanation(
            outcome="Protected",
            summary=f"node {name} is kept: protected by an operator (growth nodes unprotect-node {name})",
            notes=notes,
            **base,
        )
    if not settings.scale_down_enabled:
        return NodeExplanation(
            outcome="ScaleDownDisabled",
            summary=f"node {name} is kept: scale-down is disabled for this autoscaler",
            notes=notes,
            **base,
        )
    as_of = f" (evaluation at {when(state.scale_down_evaluated_at)})" if state.scale_down_evaluated_at else ""
    if cand is not None:
        return _from_candidate(cand, as_of, notes, base)

    since = state.unneeded_since.get(name)
    if since is not None:
        return NodeExplanation(
            outcome="UnneededWaiting",
            summary=f"node {name} is unneeded since {when(since)}{as_of}",
            notes=notes,
            **base,
        )
    if inp.managed is False:
        summary = f"node {name} is not managed by growth (no node-group label): growth never removes it"
    elif sum(state.candidates_by_state.values()) > len(state.candidates):
        summary = (
            f"node {name} is not among the {len(state.candidates)} nodes the last evaluation kept{as_of}: "
            f"of {sum(state.candidates_by_state.values())} managed nodes, "
            + ", ".join(f"{n} {s}" for s, n in sorted(state.candidates_by_state.items()))
        )
    elif state.scale_down_evaluated_at is None:
        summary = f"node {name}: no scale-down evaluation has run yet (they run in loops without pending scale-up)"
    else:
        summary = f"node {name} was not among the managed nodes of the last scale-down evaluation{as_of}"
    return NodeExplanation(outcome="NotEvaluated", summary=summary, notes=notes, **base)


def _from_candidate(cand: CandidateState, as_of: str, notes: list[str], base: dict) -> NodeExplanation:
    name = cand.node
    reason = f"{cand.reason}: {cand.message}" if cand.reason else cand.message
    if cand.state == NodeState.UNNEEDED_WAITING.value:
        since = f" since {when(cand.unneeded_since)}" if cand.unneeded_since is not None else ""
        at = f"; removal at {when(cand.removable_at)} at the earliest" if cand.removable_at is not None else ""
        return NodeExplanation(
            outcome="UnneededWaiting",
            summary=f"node {name} is unneeded{since}{at} ({reason}){as_of}",
            removable_at=cand.removable_at,
            notes=notes,
            **base,
        )
    if cand.state in {s.value for s in REMOVABLE_NOW}:
        what = "replaced" if method_for(cand.state).replaces else "removed"
        return NodeExplanation(
            outcome="RemovableNow",
            summary=f"node {name} is to be {what} now ({cand.state.lower()}): the next loop starts it{as_of}",
            notes=notes,
            **base,
        )
    if cand.state == NodeState.UTILIZED.value:
        summary = f"node {name} is kept: utilized ({cand.utilization:.0%} of its cpu or memory requested)"
        # in a consolidating group: what keeps it out of a multi-node command too (do-not-disrupt)
        summary += (f", and held from consolidation by {reason}" if cand.reason else "") + as_of
    elif cand.state == NodeState.REMOVING.value:
        summary = f"node {name} is being removed ({reason or 'a NodeScaleDown runs'}){as_of}"
        return NodeExplanation(outcome="Removing", summary=summary, notes=notes, **base)
    else:
        summary = f"node {name} is kept because {reason or cand.state}{as_of}"
    return NodeExplanation(outcome="Kept", summary=summary, notes=notes, **base)


def _made_by(state: NodeAutoscalerState, node: str) -> RequestRef | None:
    for r in [*state.in_flight.values(), *reversed(state.recent)]:
        if r.node_name == node:
            return _ref(r, "", "")
    return None
