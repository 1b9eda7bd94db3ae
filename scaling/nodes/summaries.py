"""What the Temporal Web UI shows for the nodes loop's workflows without opening a query.

A start's `static_summary` is the one line in the workflow list (fixed for the run), its
`static_details` the fixed block on the workflow page; the workflow's current details
(`workflow.set_current_details`) change with its phase. A NodeRequest keeps its final record for a
TTL after it ends: its details say it is finished, and until when the record stays.
"""

from __future__ import annotations

from scaling.nodes.explain import when
from scaling.nodes.models import RequestPhase
from scaling.nodes.scale_down.removals import NodeScaleDownInput, ScaleDownPhase, ScaleDownStatus
from scaling.nodes.scale_up.requests import (
    NodeRequestBatchInput,
    NodeRequestBatchStatus,
    NodeRequestInput,
    NodeRequestStatus,
    RequestSettings,
    least_advanced,
)
from scaling.nodes.settings import AutoscalerSettings
from scaling.nodes.state import NodeAutoscalerState

FINISHED_REQUEST = (RequestPhase.READY, RequestPhase.UNMET, RequestPhase.REPLANNED)


def _pods(n: int) -> str:
    return f"{n} pod" if n == 1 else f"{n} pods"


def request_summary(inp: NodeRequestInput) -> str:
    """`NodeRequest cx32 for 7 pods of web, pool kwok-cx32` (web: the node group)."""
    return _summary("NodeRequest", "", inp, sum(inp.pods.values()) or len(inp.pod_uids))


def _summary(kind: str, count: str, inp: RequestSettings, pods: int) -> str:
    what = f"for {_pods(pods)} of {inp.group}" if pods else f"for node group {inp.group} (no pending pods)"
    if not inp.candidates:
        return f"{kind} {what}, no pool fits"
    first = inp.candidates[0]
    return f"{kind} {count}{first.server_type} {what}, pool {first.name}"


def request_static_details(inp: NodeRequestInput) -> str:
    pools = ", ".join(f"{p.name} ({p.provider} {p.server_type})" for p in inp.candidates) or "none"
    need = inp.requirements
    return (
        f"cluster {inp.cluster}, node group {inp.group}\n"
        f"needs {need.cpu_m}m CPU, {need.memory // 2**20} MiB memory, {need.pods} pods\n"
        f"pools in order: {pools}\n"
        f"up to {inp.max_attempts} attempts, {inp.readiness_timeout_s:g} s each to become Ready; "
        f"the final record stays {inp.ttl_s:g} s"
    )


def request_details(status: NodeRequestStatus, ttl_s: float) -> str:
    attempt = f"attempt {len(status.attempts)}" if status.attempts else "no attempt yet"
    node = f", node {status.node_name}" if status.node_name else ""
    wait = status.approval
    if status.phase == RequestPhase.AWAITING_APPROVAL and wait is not None:
        return f"AwaitingApproval: pool {status.current_pool or '-'}: {wait.reason}; {wait.default} at {when(wait.deadline)}"
    if status.phase not in FINISHED_REQUEST or status.finished_at is None:
        return f"{status.phase.value}: pool {status.current_pool or '-'}{node} ({attempt})"
    kept = status.finished_at.timestamp() + ttl_s
    message = f": {status.message}" if status.message else ""
    return (
        f"Finished {status.phase.value} at {when(status.finished_at)}{node}, pool {status.current_pool or '-'}"
        f"{message}. Record kept until {when(kept)}"
    )


def batch_summary(inp: NodeRequestBatchInput) -> str:
    """`NodeRequestBatch 12 × cx32 for 84 pods of web, pool kwok-cx32`."""
    pods = sum(sum(m.pods.values()) or len(m.pod_uids) for m in inp.members)
    return _summary("NodeRequestBatch", f"{len(inp.members)} × ", inp, pods)


def batch_static_details(inp: NodeRequestBatchInput) -> str:
    head = f"{len(inp.members)} nodes, each its own request (id <batch id>#<index>)\n"
    return head + (request_static_details(inp.member_input(0)) if inp.members else "")


def batch_details(status: NodeRequestBatchStatus, ttl_s: float) -> str:
    """Counts by phase, then the least advanced member as a NodeRequest shows itself."""
    counts: dict[str, int] = {}
    for m in status.members:
        counts[m.phase.value] = counts.get(m.phase.value, 0) + 1
    phases = ", ".join(f"{n} {phase}" for phase, n in counts.items())
    lagging = least_advanced(status.members)
    if lagging is None:
        return f"{len(status.members)} nodes"
    return f"{len(status.members)} nodes: {phases}. {lagging.id.rpartition('/')[2]}: {request_details(lagging, ttl_s)}"


def scale_down_summary(inp: NodeScaleDownInput) -> str:
    where = f", pool {inp.pool}" if inp.pool else ""
    return f"NodeScaleDown {inp.node} ({inp.kind.lower()}), cluster {inp.cluster}{where}"


def replacement_summary(inp: NodeScaleDownInput, others: int = 0) -> str:
    where = f", pool {inp.pool}" if inp.pool else ""
    more = f" and up to {others} more (multi-node)" if others else ""
    return f"NodeReplacement {inp.node}{more} ({inp.kind.lower()}), cluster {inp.cluster}{where}"


def replacement_details(status: ScaleDownStatus) -> str:
    """A replacement's Web UI details: its successors' progress until the drain, then the removal's."""
    if status.final or status.phase != ScaleDownPhase.MARKED:
        return scale_down_details(status)
    return f"Replacing: {status.message}" if status.message else "Replacing"


def scale_down_details(status: ScaleDownStatus) -> str:
    if status.final:
        why = f": {status.reason}" if status.reason else ""
        message = f" ({status.message})" if status.message else ""
        return f"Finished {status.phase.value}{why}{message}"
    at = f", removal at {when(status.scale_down_at)}" if status.scale_down_at else ""
    evicted = f", {len(status.evicted)} pods evicted" if status.evicted else ""
    return f"{status.phase.value}{at}{evicted}"


def autoscaler_summary(settings: AutoscalerSettings) -> str:
    cap = f", at most {settings.max_nodes_total} nodes" if settings.max_nodes_total is not None else ""
    return f"NodeAutoscaler of cluster {settings.cluster}, every {settings.scan_interval_s:g} s{cap}"


def autoscaler_details(state: NodeAutoscalerState) -> str:
    ll = state.last_loop
    head = "PAUSED" if state.paused else "running"
    lines = [f"{head}: loop {state.iterations}, run {state.runs}; {state.nodes_created} nodes created"]
    if ll.at is not None:
        lines.append(
            f"last loop {when(ll.at)}: {ll.unschedulable} unschedulable pods, {ll.planned_nodes} nodes planned, "
            f"{ll.nodes} nodes, {ll.problems} problems"
        )
    lines.append(f"{len(state.in_flight)} NodeRequests in flight, {len(state.scale_downs)} scale-downs under way")
    if state.banned_pools:
        lines.append(f"banned pools: {', '.join(state.banned_pools)}")
    return "\n".join(lines)


def machine_gc_summary(cluster: str, interval_s: float) -> str:
    return f"MachineGC of cluster {cluster}, every {interval_s:g} s"


def machine_gc_details(rounds: int, machines_seen: int, collected_total: int, last_error: str) -> str:
    error = f"; last error: {last_error}" if last_error else ""
    return f"round {rounds}: {machines_seen} machines seen, {collected_total} collected in all{error}"
