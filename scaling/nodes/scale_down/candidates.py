"""Which nodes to remove, and when (seed 004 steps 8-9 with Cluster Autoscaler's safety rules).

The kinds of removal are RemovalMethods (``methods/``), walked in order, empty first:
- Empty (seed 004): selected at once with ``scale_down_at = now + unneeded_time_s``: the NodeScaleDown
  workflow taints it and waits on a durable timer, then calls ``still_removable``.
- Underused (Cluster Autoscaler): it must stay unneeded (below the threshold, no blocker, its pods fit
  elsewhere) for ``unneeded_time_s`` before it is selected, with ``scale_down_at = now``: the waiting
  already happened untainted.

A NotReady node waits ``unready_time_s`` (loop-wide, Cluster Autoscaler's
scale-down-unready-time, 20 min) instead of its group's ``unneeded_time_s``, in either kind.

Pods deleted for longer than their grace period plus 30 s (``is_long_terminating``) are
treated as gone on the nodes considered for removal: they do not pin a node, are not moved and
do not count as utilization. On target nodes their requests still count: the scheduler keeps
counting a terminating pod's room until it is gone.

Both wait ``delay_after_add_s`` after the last scale-up, both obey the pool's minNodes, the
group's headroom (a node stays when no other node of its group would hold it once the node's
pods moved; scaling.nodes.headroom) and a per-loop removal limit. Several nodes removed in one
loop are checked together: pods of an earlier node take room on the targets, PDB budgets are
shared, a node being removed is never a target and never counts as the schedulable home of a
Longhorn replica.

Pods that need room elsewhere are those a workload controller recreates (ReplicaSet,
StatefulSet, ReplicationController, Job). A bare pod or a custom-controller pod may only be
evicted with ``safe-to-evict: "true"`` and then is not re-placed: a bare pod is gone after
eviction, and a per-node operator pod (Longhorn's instance-manager) is recreated by its
operator on the nodes that remain.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from scaling.kube.drain import Blocker, PdbInfo, marked_for_deletion, pods_by_node, without_long_terminating
from scaling.kube.labels import label_value
from scaling.kube.models import NodeInfo, PodInfo, Resources
from scaling.nodes.disruption.do_not_disrupt import DO_NOT_DISRUPT
from scaling.nodes.disruption.refusals import (
    RefusedConsolidation,
    cluster_digest,
    expiry,
    prices_digest,
    refusal_blocker,
    standing_refusals,
)
from scaling.nodes.models import LABEL_GROUP, NodeGroup, ScaleDownSettings
from scaling.nodes.scale_down.arrivals import deletion_strands
from scaling.nodes.scale_down.checks import (
    billing_hold,
    group_settings,
    headroom_kept,
    individual_blockers,
    is_managed,
    is_target,
    pool_for,
    pool_of,
    removal_wait_s,
    used_by_node,
)
from scaling.nodes.scale_down.consolidation import consolidating, consolidation_blockers
from scaling.nodes.scale_down.landing import (
    FirstOfEachKey,
    about_to_land,
    awaiting_scheduler,
    land_removals_first,
    pods_of_removals,
    removals_need,
    successor_held,
)
from scaling.nodes.scale_down.methods import PLANNED, Candidate, RemovalMethod, Wait
from scaling.nodes.scale_down.methods.consolidated import CONSOLIDATED
from scaling.nodes.scale_down.methods.underused import UNDERUSED
from scaling.nodes.scale_down.models import (
    GROUP_SCALE_DOWN_DISABLED,
    NodeDecision,
    NodeState,
    ScaleDownInput,
    ScaleDownLoopSettings,
    ScaleDownPlan,
)
from scaling.nodes.scale_down.select import select_removals
from scaling.nodes.scale_down.storage import LonghornState
from scaling.text import when

UNNEEDED_TIME = "UnneededTimeNotElapsed"
UNREADY_TIME = "UnreadyTimeNotElapsed"
DELAY_AFTER_ADD = "ScaleDownDelayAfterAdd"


def plan_scale_down(
    nodes: list[NodeInfo],
    pods: list[PodInfo],
    pdbs: list[PdbInfo],
    groups: list[NodeGroup],
    storage: LonghornState | None,
    now: float,
    unneeded_since: dict[str, float],
    last_scale_up_at: float | None,
    protected: set[str],
    in_progress: set[str],
    settings: ScaleDownLoopSettings | None = None,
    refused: list[RefusedConsolidation] | None = None,
    prices: Mapping[str, float] | None = None,
    replacing: Collection[str] = (),
) -> ScaleDownPlan:
    """One scale-down evaluation: a state per node and the nodes to start removing now. ``refused``:
    consolidations found not worth it, whose nodes consolidation leaves alone while nothing changed;
    ``prices``: the catalogue's (catalogue.hourly_prices), which order consolidation's
    candidates (none: by disruption cost alone); ``replacing``: the multi-node commands with a node
    in flight (their successors are held)."""
    settings = settings or ScaleDownLoopSettings()
    standing, ended = (
        standing_refusals(
            refused,
            cluster_digest(nodes, pods),
            now,
            {n.name for n in nodes},
            prices_digest(groups, prices) if prices else None,
        )
        if refused
        else ({}, [])
    )
    kinds = frozenset(settings.replicated_kinds)
    by_group = {g.name: g for g in groups}
    used = used_by_node(pods)  # what targets hold, long-terminating pods included
    pods = without_long_terminating(pods, now)
    on_node = pods_by_node(pods)  # each node's own pods: the per-node rules never scan them all
    targets = sorted((n for n in nodes if is_target(n, in_progress)), key=lambda n: n.name)
    # Nodes seen on their way out (tainted for deletion or cordoned): a removal reported done while the
    # node is still listed. A node seen serving (its command refused) holds no successor.
    leaving_seen = {n.name for n in nodes if marked_for_deletion(n) or n.unschedulable}
    commands = {label_value(c) for c in replacing}
    waiting = awaiting_scheduler(pods)
    # The room the pods of removals in progress and the pods waiting for the scheduler are about to
    # take is taken before any fit, and the ones about to land on a candidate move with it
    # (scale_down.landing).
    landing = land_removals_first(pods_of_removals(nodes, on_node, kinds), waiting, targets, used)
    distinct = FirstOfEachKey(waiting)  # what about_to_land needs to read of them
    plan = ScaleDownPlan(refusals_ended=ended)
    ready: list[tuple[NodeDecision, ScaleDownSettings, bool, RemovalMethod]] = []  # (..., billed, method)
    spare: list[NodeDecision] = []  # utilized nodes a multi-node consolidation may take
    refused_ready: list[NodeDecision] = []  # candidates but for a standing refusal: they rejoin a new one

    for node in sorted(nodes, key=lambda n: n.name):
        candidate = Candidate(node, on_node.get(node.name, []))
        mine = candidate.pods
        dec = NodeDecision(
            name=node.name,
            state=NodeState.NOT_MANAGED,
            group=node.labels.get(LABEL_GROUP),
            pool=pool_of(node),
            utilization=candidate.utilization,
        )
        plan.decisions[node.name] = dec
        if not is_managed(node):
            continue
        if node.name in in_progress:
            dec.state = NodeState.REMOVING
            continue
        if held := successor_held(node, in_progress, leaving_seen, commands):
            # The successor of a node being replaced: empty until that node's pods arrive.
            dec.state = NodeState.BLOCKED
            dec.reasons = [held]
            continue
        gs = group_settings(node, by_group, settings)
        candidate.group, candidate.now = by_group.get(dec.group or ""), now
        # Scale-down off (or consolidateAfter: Never) stops consolidation, not replacements.
        qualified = [m for m in PLANNED if (gs.enabled or m.replaces) and m.is_candidate(candidate, gs)]
        if not qualified and not gs.enabled:
            dec.state = NodeState.BLOCKED
            dec.reasons = [
                Blocker(code=GROUP_SCALE_DOWN_DISABLED, message=f"scale-down is disabled for group {dec.group}")
            ]
            continue
        if not qualified:
            dec.state = NodeState.UTILIZED
            held = consolidation_blockers(node, mine, gs, pdbs, storage, targets, used, protected, kinds)
            if held and (kept := [b for b in held if b.code == DO_NOT_DISRUPT]):
                # Karpenter's DisruptionBlocked: explain node and an Event name what keeps it out.
                dec.reasons = kept
                continue
            if node.name in standing:  # not worth it when last asked, and nothing changed since
                dec.reasons, dec.removable_at = [refusal_blocker(standing[node.name])], expiry(standing[node.name])
                if node.ready and held == []:
                    refused_ready.append(dec)
                continue
            if held == []:
                # Karpenter's multi-node consolidation considers every node, not only underused ones:
                # its timer runs as an unneeded node's, and once out it may join a command.
                since = unneeded_since.get(node.name, now)
                dec.unneeded_since = plan.unneeded_since[node.name] = since
                hold = billing_hold(node, pool_for(node, groups), now)
                # removable_at: when the evaluation may change (scale_down.evaluation.stable_until)
                if now - since < gs.unneeded_time_s:
                    dec.removable_at = since + gs.unneeded_time_s
                elif last_scale_up_at is not None and now - last_scale_up_at < gs.delay_after_add_s:
                    dec.removable_at = last_scale_up_at + gs.delay_after_add_s
                elif hold is not None:
                    dec.removable_at = hold[0]
                elif node.ready:
                    spare.append(dec)
            continue
        # The first method nothing holds names the removal (a later one may bring its own room, as a
        # replacement does); when all are held, the first one's blockers say why.
        method, blockers, fit = None, [], None
        for m in qualified:
            held, fit = individual_blockers(
                node,
                mine,
                pdbs,
                storage,
                targets,
                used,
                protected,
                kinds,
                check_fit=not m.replaces,
                one_at_a_time=consolidating(gs),
                landing=None if m.require_empty else landing,  # an empty node: about_to_land below
            )
            if not held:
                method = m
                break
            blockers = blockers or held
        if method is not None and method.require_empty and not method.replaces:
            # Tainted as soon as selected: not while the scheduler is about to bind pods to it. From
            # the room before the waiting pods landed: one placed here took room it must still find.
            lands = about_to_land(node, used.get(node.name, Resources()), distinct)
            lands = lands or removals_need(node, landing, targets)
            method, blockers = (None, [lands]) if lands else (method, blockers)
        if method is CONSOLIDATED and node.name in standing:
            method, blockers = None, [refusal_blocker(standing[node.name])]
            dec.removable_at = expiry(standing[node.name])
            refused_ready.append(dec)
        if method is None:
            dec.state = NodeState.BLOCKED
            dec.reasons = blockers
            continue
        # Unneeded from here on: the timer starts (or keeps running).
        since = unneeded_since.get(node.name, now)
        dec.unneeded_since = since
        plan.unneeded_since[node.name] = since
        wait_s = removal_wait_s(node, gs, settings)
        pool = pool_for(node, groups)
        hold = billing_hold(node, pool, now)
        if hold is not None:  # paid for a while yet: kept untainted, so arriving pods can use it
            dec.state = NodeState.UNNEEDED_WAITING
            dec.removable_at, blocker = hold
            dec.reasons = [blocker]
            continue
        billed = pool is not None and pool.billing is not None and node.created_at is not None
        # The messages below name times, not "for Xs": an evaluation that finds nothing new
        # says the same words loop after loop (so its candidates are not sent again).
        if method.wait is Wait.BEFORE_SELECTION and now - since < wait_s:
            dec.state = NodeState.UNNEEDED_WAITING
            dec.removable_at = since + wait_s
            code, what = (UNNEEDED_TIME, "unneeded") if node.ready else (UNREADY_TIME, "NotReady and unneeded")
            dec.reasons = [
                Blocker(
                    code=code,
                    message=f"node {node.name} {what} since {when(since)}: removable after {wait_s:.0f}s of it",
                )
            ]
            # select_removals keeps the last node holding its group's headroom when the timer is out;
            # said while it runs too, so the node is not soft-tainted until then (scale_down.soft_taints).
            if fit is not None and (room := headroom_kept(node, by_group, targets, landing, fit, mine)) is not None:
                dec.reasons.append(room)
            continue
        if last_scale_up_at is not None and now - last_scale_up_at < gs.delay_after_add_s:
            dec.state = NodeState.UNNEEDED_WAITING
            dec.removable_at = last_scale_up_at + gs.delay_after_add_s
            dec.reasons = [
                Blocker(
                    code=DELAY_AFTER_ADD,
                    message=f"last scale-up at {when(last_scale_up_at)}: removals wait {gs.delay_after_add_s:.0f}s",
                )
            ]
            continue
        if method is UNDERUSED and consolidating(gs) and deletion_strands(node, mine, targets, on_node, landing, kinds):
            # First fit places its pods, but the scheduler may not (scale_down.arrivals): its
            # consolidation drains it in an order that places every pod, or refuses.
            if node.name in standing:  # refused when last asked, and nothing changed since
                dec.state, dec.reasons = NodeState.BLOCKED, [refusal_blocker(standing[node.name])]
                dec.removable_at = expiry(standing[node.name])
                refused_ready.append(dec)
                continue
            method = CONSOLIDATED
        dec.state = NodeState(method.kind)
        ready.append((dec, gs, billed, method))

    select_removals(
        plan,
        ready,
        nodes,
        on_node,
        pdbs,
        groups,
        storage,
        now,
        targets,
        landing.used,
        in_progress,
        settings,
        kinds,
        spare,
        prices,
        refused_ready,
        landing,
    )
    return plan


def plan_from_input(inp: ScaleDownInput) -> ScaleDownPlan:
    return plan_scale_down(
        inp.nodes,
        inp.pods,
        inp.pdbs,
        inp.groups,
        inp.storage,
        inp.now,
        inp.unneeded_since,
        inp.last_scale_up_at,
        set(inp.protected),
        set(inp.in_progress),
        inp.settings,
        inp.refused,
        inp.prices,
        inp.replacing,
    )
