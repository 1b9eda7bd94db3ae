"""Scale-down evaluations run beside the cluster: the NodeAutoscaler's loop (evaluate_scale_down)
and the re-check of one node (check_node_removal: NodeScaleDown's timer fired, or an operator's
remove_node).

The workflow owns the timers and acts; the cluster's nodes and pods never cross its history.
It sends its state (ScaleDownEvaluationInput), the activity lists the cluster and calls
``evaluate_scale_down`` here: the pure planner (``plan_from_input``) plus the one other check the
loop needs (has a pod landed on a node waiting as EMPTY?), reduced to what the workflow reads.

What bounds the result (ScaleDownEvaluation):
- ``to_remove``: at most ``max_removals_per_loop`` nodes, each with the fields starting its
  NodeScaleDown reads (no pod lists: the child re-checks and drains on its own).
- ``unneeded_started`` / ``unneeded_ended``: the changes to the loop's unneeded timers, by
  node name (``apply_unneeded`` folds them into the workflow's map). The map itself is the
  workflow's state and is sent in the input: one entry per unneeded managed node, ~50 bytes
  each, never capped (dropping a timer would restart it).
- ``candidates``: the status query's per-node view, growth-managed nodes only (unmanaged ones
  were never shown). The most telling states first (Removing, Empty, Underused,
  UnneededWaiting, Blocked, Utilized; then least utilized), at most MAX_CANDIDATES of them and
  CANDIDATES_MAX_BYTES of JSON, each message at most MESSAGE_MAX_CHARS. Counts per state of
  every managed node (``candidates_by_state``) keep the whole picture when the list is cut.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from typing import Any

from scaling.kube.drain import (
    long_terminating_after,
    marked_for_deletion,
    pod_key,
    pods_by_node,
    pods_to_evict,
    without_long_terminating,
)
from scaling.kube.models import NodeInfo, PodInfo
from scaling.nodes.contracts import (
    NodeRemovalCheck,
    NodeRemovalCheckInput,
    RemovalTarget,
    ScaleDownEvaluation,
    ScaleDownEvaluationInput,
    ScaleDownObservation,
)
from scaling.nodes.disruption.budgets import next_edge
from scaling.nodes.disruption.orchestration import untracked_disrupted
from scaling.nodes.models import LABEL_GROUP
from scaling.nodes.scale_down.candidates import plan_from_input
from scaling.nodes.scale_down.checks import is_empty, pool_for, pool_of
from scaling.nodes.scale_down.methods import REMOVABLE_NOW
from scaling.nodes.scale_down.models import (
    NodeDecision,
    NodeRemoval,
    NodeState,
    ScaleDownInput,
    ScaleDownLoopSettings,
    ScaleDownPlan,
    ScaleDownReuse,
)
from scaling.nodes.scale_down.recheck import still_removable
from scaling.nodes.scale_down.removals import CandidateState
from scaling.nodes.scale_down.soft_taints import (
    soft_deletion_taints,
    timers_from_soft_taints,
    unneeded_nodes,
    young_soft_taints,
)
from scaling.text import shorten

# The loop's state carries them across continue-as-new: at 1,000 and 100 KB an idle 330-node
# cluster's continue-as-new wrote 94 KB twice (the old run's last event, the new run's first).
MAX_CANDIDATES = 100
CANDIDATES_MAX_BYTES = 32_000
MESSAGE_MAX_CHARS = 200
DEFAULT_SETTINGS = ScaleDownLoopSettings()
LATER_SETTINGS = ("max_bulk_soft_taint_count", "deletion_candidate_ttl_s")  # added since keys were kept
REUSE_MAX_S = 300.0  # how long an evaluation is reused at most while nothing changes
# Most telling first: what the loop is doing, what it could do, what holds it, then the rest.
STATE_RANK = {
    s: i
    for i, s in enumerate(
        [
            NodeState.REMOVING,
            *REMOVABLE_NOW,
            NodeState.UNNEEDED_WAITING,
            NodeState.BLOCKED,
            NodeState.UTILIZED,
        ]
    )
}


def candidate_of(d: NodeDecision) -> CandidateState:
    """One managed node's decision as the status query shows it."""
    return CandidateState(
        node=d.name,
        state=d.state.value,
        reason=d.reason,
        message=shorten("; ".join(b.message for b in d.reasons), MESSAGE_MAX_CHARS),
        group=d.group,
        pool=d.pool,
        utilization=round(d.utilization, 3),
        unneeded_since=d.unneeded_since,
        removable_at=d.removable_at,
    )


def _rank(d: NodeDecision) -> int:
    """A utilized node something holds out of consolidation (do-not-disrupt) ranks with the blocked:
    its reason is what explain node and the DisruptionBlocked Event read."""
    state = NodeState.BLOCKED if d.state == NodeState.UTILIZED and d.reasons else d.state
    return STATE_RANK.get(state, len(STATE_RANK))


def compact_candidates(
    decisions: dict[str, NodeDecision],
    max_count: int = MAX_CANDIDATES,
    max_bytes: int = CANDIDATES_MAX_BYTES,
) -> tuple[list[CandidateState], dict[str, int]]:
    """The managed nodes' decisions, most telling first, cut at ``max_count`` entries or
    ``max_bytes`` of JSON; and the count per state of all of them."""
    managed = [d for d in decisions.values() if d.state != NodeState.NOT_MANAGED]
    by_state: dict[str, int] = {}
    for d in managed:
        by_state[d.state.value] = by_state.get(d.state.value, 0) + 1
    managed.sort(key=lambda d: (_rank(d), not d.selected, d.utilization, d.name))
    out: list[CandidateState] = []
    size = 2  # "[]"
    for d in managed[:max_count]:
        c = candidate_of(d)
        size += len(c.model_dump_json()) + 1
        if size > max_bytes:
            break
        out.append(c)
    return out, by_state


def candidates_digest(candidates: list[CandidateState], by_state: dict[str, int], in_progress: list[str]) -> str:
    """What the status query would show, as a short digest (the nodes being removed included:
    the workflow overrides their reasons)."""
    body = json.dumps([[c.model_dump(mode="json") for c in candidates], by_state, sorted(in_progress)], sort_keys=True)
    return hashlib.sha256(body.encode()).hexdigest()[:24]


def not_empty(nodes: list[NodeInfo], pods: list[PodInfo], names: list[str], now: float) -> list[str]:
    """Of ``names`` (nodes waiting as EMPTY), those that exist and now run a pod to evict
    (seed 004: a pod landing on a marked empty node cancels its scale-down)."""
    if not names:
        return []  # the usual case: no walk over every pod
    by_name = {n.name: n for n in nodes}
    live = pods_by_node(without_long_terminating(pods, now))
    return [n for n in names if (node := by_name.get(n)) is not None and not is_empty(node, live.get(n, []))]


def apply_unneeded(unneeded_since: dict[str, float], ev: ScaleDownEvaluation, now: float) -> dict[str, float]:
    """The plan's unneeded timers from the ones sent and the changes returned."""
    ended = set(ev.unneeded_ended)
    out = {n: t for n, t in unneeded_since.items() if n not in ended}
    out.update((n, now) for n in ev.unneeded_started)
    out.update(ev.unneeded_adopted)
    return out


def evaluate_scale_down(obs: ScaleDownObservation, inp: ScaleDownEvaluationInput) -> ScaleDownEvaluation:
    """One scale-down evaluation of the observed cluster with the workflow's state."""
    return for_input(evaluation_of(obs, inp), inp)


def reuse_key(inp: ScaleDownEvaluationInput) -> str:
    """The input but for `now` and what only shapes the answer's size: two inputs with the same
    key, on the same cluster, evaluate alike until the first's ``stable_until``."""
    # Fields added since keys were first kept count only when set: a key carried over continue-as-new
    # from before matches, so a recorded run's reuse replays as it was decided. Never the first
    # evaluation's flag: the second would not stand for the first where it did when recorded (an
    # evaluation that took timers changed the input's unneeded_since, so it is not reused anyway).
    exclude: dict[str, Any] = {"now": True, "fresh": True, "candidates_digest": True, "first_evaluation": True}
    if not inp.replacing:
        exclude["replacing"] = True
    if at_default := {f for f in LATER_SETTINGS if getattr(inp.settings, f) == getattr(DEFAULT_SETTINGS, f)}:
        exclude["settings"] = at_default
    body = inp.model_dump_json(exclude=exclude)
    return hashlib.sha256(body.encode()).hexdigest()[:24]


def reuse_of(ev: ScaleDownEvaluation, key: str) -> ScaleDownReuse | None:
    """What the loop keeps of an evaluation made for an input of ``key``; None when it may not stand
    for the next (it acts, it may change at once, or the worker gave no token)."""
    if ev.stable_until is None or not ev.view:
        return None
    return ScaleDownReuse(view=ev.view, key=key, until=ev.stable_until)


def stands(reuse: ScaleDownReuse | None, view: str, key: str, now: float) -> bool:
    """Whether the last evaluation is what one now would say: the observation shows the same cache
    (``view``), the input is the same (``key``) and no timer of it has run out."""
    return reuse is not None and bool(view) and reuse.view == view and reuse.key == key and now < reuse.until


def evaluation_of(
    obs: ScaleDownObservation, inp: ScaleDownEvaluationInput, prices: dict[str, float] | None = None
) -> ScaleDownEvaluation:
    """The evaluation with every candidate (``for_input`` leaves out the ones the workflow holds),
    and until when the same cluster and input give the same one (``stable_until``). ``prices``: the
    catalogue's (scaling.nodes.catalogue.hourly_prices), for consolidation's order."""
    # A Cluster Autoscaler stopped for growth hands over the timers its soft taints say, once.
    adopted = (
        timers_from_soft_taints(obs.nodes, inp.settings.deletion_candidate_ttl_s, inp.now)
        if inp.first_evaluation
        else {}
    )
    plan = plan_from_input(
        ScaleDownInput(
            nodes=obs.nodes,
            pods=obs.pods,
            pdbs=obs.pdbs,
            groups=obs.groups,
            storage=obs.storage,
            now=inp.now,
            unneeded_since={**adopted, **inp.unneeded_since},
            last_scale_up_at=inp.last_scale_up_at,
            protected=inp.protected,
            in_progress=inp.in_progress,
            settings=inp.settings,
            refused=inp.refused,
            prices=prices or {},
            replacing=inp.replacing,
        )
    )
    provider_ids = {n.name: n.provider_id for n in obs.nodes}
    candidates, by_state = compact_candidates(plan.decisions)
    young = (
        young_soft_taints(obs.nodes, inp.settings.deletion_candidate_ttl_s, inp.now)
        if inp.settings.max_bulk_soft_taint_count <= 0
        else {}
    )
    # As Cluster Autoscaler, only in a loop that starts no removal: a started one marks its own node.
    soft_taint, soft_untaint = (
        ([], [])
        if plan.to_remove or plan.consolidation
        else soft_deletion_taints(
            obs.nodes,
            unneeded_nodes(plan.decisions, plan.unneeded_since),
            inp.in_progress,
            inp.settings.max_bulk_soft_taint_count,
            young,
        )
    )
    return ScaleDownEvaluation(
        to_remove=[removal_target(r, provider_ids) for r in plan.to_remove],
        consolidate=[removal_target(r, provider_ids) for r in plan.consolidation],
        consolidate_allowed=plan.consolidation_allowed,
        unneeded_started=sorted(n for n in plan.unneeded_since if n not in inp.unneeded_since and n not in adopted),
        unneeded_adopted={n: t for n, t in adopted.items() if n in plan.unneeded_since and n not in inp.unneeded_since},
        unneeded_ended=sorted(n for n in inp.unneeded_since if n not in plan.unneeded_since),
        candidates=candidates,
        candidates_by_state=by_state,
        candidates_digest=candidates_digest(candidates, by_state, inp.in_progress),
        not_empty=not_empty(obs.nodes, obs.pods, inp.watch_empty, inp.now),
        gone=sorted(set(inp.watch_empty).difference(n.name for n in obs.nodes)),
        disrupted_untracked=untracked_disrupted(obs.nodes, inp.in_progress),
        refusals_ended=plan.refusals_ended,
        soft_taint=soft_taint,
        soft_untaint=soft_untaint,
        nodes=len(obs.nodes),
        pods=len(obs.pods),
        # Taints to change: the next loop evaluates again (the change, or its failure, is new).
        stable_until=None if soft_taint or soft_untaint else stable_until(plan, obs, inp.now, young.values()),
    )


def removal_target(r: NodeRemoval, provider_ids: dict[str, str]) -> RemovalTarget:
    return RemovalTarget(
        name=r.name,
        group=r.group,
        pool=r.pool,
        kind=r.kind,
        scale_down_at=r.scale_down_at,
        provider_id=provider_ids.get(r.name, ""),
    )


def for_input(ev: ScaleDownEvaluation, inp: ScaleDownEvaluationInput) -> ScaleDownEvaluation:
    """``ev`` as the caller gets it: without the candidates it already holds (same digest)."""
    if not inp.candidates_digest or inp.candidates_digest != ev.candidates_digest:
        return ev
    return ev.model_copy(update={"candidates": [], "candidates_unchanged": True})


def stable_until(
    plan: ScaleDownPlan, obs: ScaleDownObservation, now: float, taints_stale_at: Iterable[float] = ()
) -> float | None:
    """Until when (epoch seconds) evaluating the same cluster with the same input at a later
    ``now`` gives this plan again; None when it may differ at once.

    Time enters the plan only through these: an unneeded node's timer, the delay after a
    scale-up and a billing hold (each a decision's ``removable_at``), a billed pool's paid
    period (a node unneeded inside its removal window is held again once the period ends), a
    deleted pod that turns long terminating, a disruption budget's window opening or closing,
    and a soft taint left on, the soft taints being off, turning stale (``taints_stale_at``).
    A plan that removes nodes, or finds removable nodes it did not select (the per-loop limit),
    changes the workflow's state: no reuse. At most REUSE_MAX_S ahead, whatever the plan says:
    a bound on any staleness not foreseen here."""
    if plan.to_remove or plan.consolidation:
        return None
    until = now + REUSE_MAX_S
    nodes = {n.name: n for n in obs.nodes}
    for d in plan.decisions.values():
        if d.state in REMOVABLE_NOW:
            return None
        if d.removable_at is not None:
            until = min(until, d.removable_at)
        # (a utilized node's timer is multi-node consolidation's: its removable_at bounds the next change)
        if d.name in plan.unneeded_since and d.state != NodeState.UTILIZED:
            pool = pool_for(nodes[d.name], obs.groups)
            if pool is not None and pool.billing is not None:
                return None
    for pod in obs.pods:
        after = long_terminating_after(pod)
        if after is not None and after >= now:
            until = min(until, after)
    edge = next_edge((g.disruption for g in obs.groups), now)
    if edge is not None:
        until = min(until, edge)
    until = min([until, *taints_stale_at])
    return until if until > now else None


def check_node_removal(obs: ScaleDownObservation, inp: NodeRemovalCheckInput) -> NodeRemovalCheck:
    """still_removable for one node of the observed cluster, and the pods a drain would evict.
    Nodes tainted for deletion, ``in_progress`` and the node itself count as leaving."""
    node = next((n for n in obs.nodes if n.name == inp.node), None)
    if node is None:
        return NodeRemovalCheck(found=False)
    leaving = {n.name for n in obs.nodes if marked_for_deletion(n)} | set(inp.in_progress) | {node.name}
    check = still_removable(
        node,
        obs.pods,
        obs.pdbs,
        obs.storage,
        obs.nodes,
        groups=obs.groups,
        protected=set(inp.protected),
        in_progress=leaving,
        require_empty=inp.require_empty,
        settings=inp.settings,
        now=inp.now,
        moving_with=sorted(set(inp.moving_with) - {node.name}),
    )
    live = without_long_terminating(obs.pods, inp.now)
    return NodeRemovalCheck(
        found=True,
        managed=LABEL_GROUP in node.labels,
        group=node.labels.get(LABEL_GROUP),
        pool=pool_of(node),
        provider_id=node.provider_id,
        blockers=check.blockers,
        pods_to_evict=sorted(pod_key(p) for p in pods_to_evict(node.name, live)),
    )
