"""The decision trail of one node (`growth nodes trail NODE`), built from recorded histories:
the NodeAutoscaler's (the loop that planned it, the pods' shapes it was for, every scale-down
evaluation of it), its NodeRequest's (each attempt, Ready) and its NodeScaleDown's (mark,
re-check, evictions, deletion), or its NodeReplacement's (plan, successors, then the NodeScaleDown's). Pure: the command fetches the histories.

Bounded: repeated evaluations with the same outcome fold into one entry, and the trail keeps at
most `max_entries` (first and last halves), saying what it left out.
"""

from __future__ import annotations

from datetime import UTC, datetime

from scaling.history import RecordedEvent, RecordedHistory, Trail, TrailEntry, bounded, first_input, fold_repeats
from scaling.kube.drain import TAINT_DELETION_CANDIDATE, TAINT_TO_BE_DELETED
from scaling.kube.models import Resources
from scaling.nodes import contracts
from scaling.nodes.contracts import (
    CandidateState,
    ClusterObservation,
    ReplacementPlan,
    ScaleDownEvaluation,
    SoftTaintInput,
)
from scaling.nodes.disruption.orchestration import NodeReplacementInput
from scaling.nodes.scale_down.removals import NodeScaleDownInput
from scaling.nodes.scale_up.requests import NodeRequestInput, split_request_id
from scaling.nodes.what_if import reported_requests, started_requests

MAX_ENTRIES = 200
SHAPES_SHOWN = 5


def request_of_node(autoscaler: RecordedHistory, node: str) -> str:
    """The id of the NodeRequest (or batch member, `<batch id>#<index>`) whose node this is (""
    when the history never names it). Its workflow is split_request_id(id)[0]."""
    for e in autoscaler.events:
        for status in reported_requests(e):
            if status.node_name == node or any(a.node_name == node for a in status.attempts):
                return status.id
    return ""


def _resources(r: Resources) -> str:
    return f"cpu {r.cpu_m}m, memory {r.memory // 2**20}Mi"


def _planned(autoscaler: RecordedHistory, request_id: str) -> list[TrailEntry]:
    """The loop that planned the request: its observation's shapes and the choice made."""
    observation: ClusterObservation | None = None
    for e in autoscaler.events:
        if e.kind == "activity" and e.name == contracts.OBSERVE_CLUSTER and e.result is not None:
            observation = ClusterObservation.model_validate(e.result)
        for inp in started_requests(e):
            if inp.id != request_id:
                continue
            return _planned_entries(autoscaler.workflow_id, e.at, inp, observation)
    return []


def _planned_entries(
    wf: str, at: datetime, inp: NodeRequestInput, observation: ClusterObservation | None
) -> list[TrailEntry]:
    first = inp.candidates[0]
    fallbacks = ", ".join(c.name for c in inp.candidates[1:]) or "none"
    pods = sum(inp.pods.values()) or len(inp.pod_uids)
    out = [
        TrailEntry(
            at=at,
            what="Planned",
            detail=f"loop planned {inp.id} for {pods} pod(s): group {inp.group}, pool {first.name}, "
            f"{first.provider}/{first.server_type} (fallbacks: {fallbacks}); needs {_resources(inp.requirements)}",
            workflow_id=wf,
        )
    ]
    shapes = {s.key: s for s in (observation.demand.shapes if observation else [])}
    for key, count in sorted(inp.pods.items(), key=lambda kv: -kv[1])[:SHAPES_SHOWN]:
        shape = shapes.get(key)
        if shape is None:
            detail = f"{count} pod(s) of shape {key}"
        else:
            # The request's own named pods where the observation's sample has them, else the sample.
            mine = [p for p in shape.pods if p.uid in inp.pod_uids] or shape.pods
            names = ", ".join(f"{p.namespace}/{p.name}" for p in mine[:3])
            detail = f"{count} pod(s) of shape {key} ({_resources(shape.requests)} each; e.g. {names})"
        out.append(TrailEntry(at=at, what="AskedBy", detail=detail, workflow_id=wf))
    return out


def _request_entries(request: RecordedHistory, node: str, request_id: str) -> list[TrailEntry]:
    """The request's own attempts; in a batch's history, only those of member `request_id`."""
    wf = request.workflow_id
    out: list[TrailEntry] = []
    nodes = {node}  # the member's nodes (a failed attempt's too): its readiness waits name them
    for e in request.events:
        if e.kind == "activity" and e.name == contracts.CREATE_NODE:
            inp = first_input(e) or {}
            if inp.get("request_id", request_id) != request_id:
                continue  # another member's
            if (e.result or {}).get("node_name"):
                nodes.add(e.result["node_name"])
            pool = (inp.get("pool") or {}).get("name", "?")
            res = e.result or {}
            outcome = res.get("outcome") or e.failed or "no answer"
            made = f", node {res['node_name']}" if res.get("node_name") else ""
            msg = f": {res['message']}" if res.get("message") else ""
            out.append(
                TrailEntry(
                    at=e.at,
                    what="Attempt",
                    detail=f"attempt {inp.get('attempt', 0) + 1} on pool {pool}: {outcome}{made}{msg}",
                    workflow_id=wf,
                )
            )
        elif e.kind == "activity" and e.name in (contracts.WAIT_NODE_READY, contracts.WAIT_NODES_READY):
            ready = _ready_in(e, nodes)
            if ready is None:
                continue
            out.append(
                TrailEntry(
                    at=e.completed_at or e.at,
                    what="Ready" if ready else "NotReady",
                    detail=f"node {node} {'became Ready' if ready else 'did not become Ready in time'}",
                    workflow_id=wf,
                )
            )
        elif e.kind == "closed":
            out.append(TrailEntry(at=e.at, what="RequestEnded", detail=f"{wf} {e.name.lower()}", workflow_id=wf))
    return out


def _ready_in(event: RecordedEvent, nodes: set[str]) -> bool | None:
    """What a readiness wait said of one of `nodes` (None: it settled none of them). A batch's
    round (wait_nodes_ready) answers per node, and only for the nodes it settled."""
    if event.name == contracts.WAIT_NODE_READY:
        return event.result is True if (first_input(event) or {}).get("node_name") in nodes else None
    settled = event.result if isinstance(event.result, dict) else {}
    return next((bool(settled[n]) for n in nodes if n in settled), None)


def _reported_entries(autoscaler: RecordedHistory, request_id: str) -> list[TrailEntry]:
    """Without the request's own history: its attempts and end as it reported them to the loop."""
    out: list[TrailEntry] = []
    seen: set[tuple[str, str, str]] = set()
    for status in (r for e in autoscaler.events for r in reported_requests(e)):
        if status.id != request_id:
            continue
        for a in status.attempts:
            key = (a.pool, a.result.value, a.timestamp.isoformat())
            if key in seen:
                continue
            seen.add(key)
            made = f", node {a.node_name}" if a.node_name else ""
            out.append(
                TrailEntry(
                    at=a.timestamp.replace(tzinfo=None),
                    what="Ready" if a.result.value == "Ready" else "Attempt",
                    detail=f"pool {a.pool}: {a.result.value}{made}" + (f": {a.message}" if a.message else ""),
                    workflow_id=request_id,
                )
            )
    return out


def _evaluations(autoscaler: RecordedHistory, node: str) -> list[TrailEntry]:
    out: list[TrailEntry] = []
    wf = autoscaler.workflow_id
    held: list[CandidateState] = []  # the last evaluation's candidates, for one that names them by digest
    for e in autoscaler.events:
        if (
            e.kind == "update"
            and e.name in ("protect_node", "unprotect_node", "remove_node")
            and first_input(e) == node
        ):
            out.append(
                TrailEntry(at=e.at, what="Operator", detail=f"operator: {e.name.replace('_', ' ')}", workflow_id=wf)
            )
        if e.kind == "child" and e.name == "NodeScaleDown":
            inp = NodeScaleDownInput.model_validate(first_input(e))
            if inp.node == node:
                when = datetime.fromtimestamp(inp.scale_down_at, UTC).strftime("%H:%M:%S")
                out.append(
                    TrailEntry(
                        at=e.at,
                        what="ScaleDownStarted",
                        detail=f"{inp.kind} node: removal at {when} ({e.workflow_id})",
                        workflow_id=wf,
                    )
                )
        if e.kind == "child" and e.name == "NodeReplacement":
            inp = NodeReplacementInput.model_validate(first_input(e))
            if node in (inp.removal.node, *(o.node for o in inp.others)):
                detail = f"{inp.removal.kind} node: successor first, then the drain ({e.workflow_id})"
                if inp.others:
                    detail = f"multi-node consolidation of {1 + len(inp.others)} candidate(s): {detail}"
                out.append(TrailEntry(at=e.at, what="ReplacementStarted", detail=detail, workflow_id=wf))
        if e.kind == "activity" and e.name == contracts.UPDATE_SOFT_TAINTS:
            soft = SoftTaintInput.model_validate(first_input(e))
            if node in soft.taint or node in soft.untaint:
                what, detail = (
                    (
                        "SoftTainted",
                        f"unneeded: {TAINT_DELETION_CANDIDATE}:PreferNoSchedule, new pods go elsewhere first",
                    )
                    if node in soft.taint
                    else ("SoftUntainted", f"needed again: {TAINT_DELETION_CANDIDATE} lifted")
                )
                if e.failed:
                    detail += f" (failed: {e.failed})"
                out.append(TrailEntry(at=e.at, what=what, detail=detail, workflow_id=wf))
        if e.kind != "activity" or e.name != contracts.EVALUATE_SCALE_DOWN or e.result is None:
            continue
        ev = ScaleDownEvaluation.model_validate(e.result)
        # An idle evaluation names the candidates it would repeat by digest: the last ones stand.
        candidates = held if ev.candidates_unchanged else ev.candidates
        held = candidates
        for c in candidates:
            if c.node != node:
                continue
            why = f"{c.state}" + (f" ({c.reason})" if c.reason else "") + f", utilization {c.utilization:.0%}"
            removing = any(t.name == node for t in (*ev.to_remove, *ev.consolidate))
            out.append(
                TrailEntry(
                    at=e.at,
                    what="Selected" if removing else "Kept",
                    detail=f"scale-down evaluation: {why}" + (f": {c.message}" if c.message else ""),
                    workflow_id=wf,
                )
            )
    return out


def _removal_entries(scale_down: RecordedHistory) -> list[TrailEntry]:
    wf = scale_down.workflow_id
    out: list[TrailEntry] = []
    evicted: list[str] = []
    soft_marked = False
    for e in scale_down.events:
        if e.kind == "signal" and e.name == "remove_now":
            out.append(TrailEntry(at=e.at, what="Operator", detail="operator: remove now", workflow_id=wf))
        if e.kind != "activity":
            continue
        inp = first_input(e) or {}
        if e.name == contracts.PLAN_REPLACEMENT and isinstance(e.result, dict):
            plan = ReplacementPlan.model_validate(e.result)
            detail = (
                f"replacement: {len(plan.new_nodes)} successor(s) "
                + ", ".join(n.candidates[0].name for n in plan.new_nodes if n.candidates)
                + f"; {plan.pods_fit_existing} pod(s) fit other nodes"
            )
            if plan.nodes:
                detail += f"; replaces {', '.join(plan.nodes)}"
            if plan.problems:
                detail = f"replacement: no successor can hold {plan.problems[0].name}: {plan.problems[0].message}"
            if plan.refused:
                detail = f"multi-node consolidation: nothing worth doing: {plan.refused}"
            out.append(TrailEntry(at=e.at, what="ReplacementPlanned", detail=detail, workflow_id=wf))
        elif e.name == contracts.CREATE_NODE:
            res = e.result or {}
            made = f", node {res['node_name']}" if res.get("node_name") else ""
            pool = (inp.get("pool") or {}).get("name", "?")
            detail = f"successor {inp.get('request_id')} on pool {pool}: {res.get('outcome') or e.failed or 'no answer'}{made}"
            out.append(TrailEntry(at=e.at, what="SuccessorAttempt", detail=detail, workflow_id=wf))
        elif e.name == contracts.WAIT_NODE_READY:
            ready = "became Ready" if e.result is True else "did not become Ready in time"
            out.append(
                TrailEntry(
                    at=e.completed_at or e.at,
                    what="SuccessorReady",
                    detail=f"successor {inp.get('node_name')} {ready}",
                    workflow_id=wf,
                )
            )
        elif e.name == contracts.TAINT_DISRUPTED:
            present = bool(inp.get("present"))
            detail = (
                "tainted karpenter.sh/disrupted:NoSchedule: no new pods while its successors are made"
                if present
                else "karpenter.sh/disrupted taint lifted: it keeps serving, new pods too"
            )
            what = "DisruptionTainted" if present else "DisruptionUntainted"
            out.append(TrailEntry(at=e.at, what=what, detail=detail, workflow_id=wf))
        elif e.name == contracts.MARK_NODE_FOR_SCALE_DOWN:
            at = inp.get("scale_down_at")
            if inp.get("candidate"):
                soft_marked = True
                what, detail = "Marked", f"soft-tainted {TAINT_DELETION_CANDIDATE}:PreferNoSchedule, ScaleDownAt {at}"
            elif soft_marked:  # the wait is over: the hard taint before the re-check
                what, detail = "Tainted", f"tainted {TAINT_TO_BE_DELETED}:NoSchedule, the wait over"
            else:
                what, detail = "Marked", f"tainted, ScaleDownAt {at}"
            out.append(TrailEntry(at=e.at, what=what, detail=detail, workflow_id=wf))
        elif e.name == contracts.CHECK_NODE_REMOVAL and isinstance(e.result, dict):
            blockers = e.result.get("blockers") or []
            moving = e.result.get("pods_to_evict") or []
            detail = (
                "re-check: blocked by "
                + ", ".join(str(b.get("reason", b)) if isinstance(b, dict) else str(b) for b in blockers)
                if blockers
                else f"re-check passed: {len(moving)} pod(s) to move"
            )
            out.append(TrailEntry(at=e.at, what="Rechecked", detail=detail, workflow_id=wf))
        elif e.name == contracts.EVICT_POD:
            evicted.append(f"{inp.get('namespace')}/{inp.get('name')}")
            out.append(
                TrailEntry(
                    at=e.at,
                    what="Evicted",
                    detail=f"pod {inp.get('namespace')}/{inp.get('name')} evicted",
                    workflow_id=wf,
                )
            )
        elif e.name == contracts.DELETE_NODE:
            out.append(
                TrailEntry(
                    at=e.at,
                    what="DeletedAtProvider",
                    detail=f"{inp.get('provider')} {inp.get('provider_id') or ''}".strip(),
                    workflow_id=wf,
                )
            )
        elif e.name == contracts.DELETE_NODE_OBJECT:
            moved = f"; pods moved: {', '.join(evicted)}" if evicted else "; no pods to move"
            out.append(TrailEntry(at=e.at, what="Removed", detail=f"Node object deleted{moved}", workflow_id=wf))
    for e in scale_down.events:
        if e.kind == "closed":
            out.append(TrailEntry(at=e.at, what="ScaleDownEnded", detail=f"{wf} {e.name.lower()}", workflow_id=wf))
    return out


def node_trail(
    node: str,
    autoscaler: RecordedHistory,
    request: RecordedHistory | None = None,
    scale_down: RecordedHistory | None = None,
    max_entries: int = MAX_ENTRIES,
) -> Trail:
    """One timeline for `node` from the histories given (module doc)."""
    trail = Trail(subject=node, sources=[autoscaler.workflow_id])
    entries: list[TrailEntry] = []
    request_id = request_of_node(autoscaler, node)
    if request is not None and split_request_id(request_id)[0] != request.workflow_id:
        request_id = request.workflow_id  # a NodeRequest's own history, its node not yet reported
    if request_id:
        entries += _planned(autoscaler, request_id)
        if not entries:
            trail.notes.append(f"{request_id} was planned before the history read begins")
    else:
        trail.notes.append(f"no NodeRequest in {autoscaler.workflow_id}'s history names node {node}")
    if request is not None:
        trail.sources.append(request.workflow_id)
        entries += _request_entries(request, node, request_id)
    elif request_id:
        entries += _reported_entries(autoscaler, request_id)
        trail.notes.append(f"{request_id}'s own history was not read: attempts as the loop heard them")
    entries += _evaluations(autoscaler, node)
    if scale_down is not None:
        trail.sources.append(scale_down.workflow_id)
        entries += _removal_entries(scale_down)
    trail.entries = fold_repeats(entries)
    trail.truncated = "; ".join(
        t
        for t in (
            autoscaler.truncated,
            request.truncated if request else "",
            scale_down.truncated if scale_down else "",
        )
        if t
    )
    return bounded(trail, max_entries)
