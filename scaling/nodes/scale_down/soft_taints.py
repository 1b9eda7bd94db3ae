"""Cluster Autoscaler's soft taint on unneeded nodes (core/scaledown/actuation/softtaint.go
UpdateSoftDeletionTaints, which core/static_autoscaler.go calls when a loop deleted nothing).

DeletionCandidateOfClusterAutoscaler:PreferNoSchedule goes on each node found unneeded and comes
off each node needed again, lifts first, at most --max-bulk-soft-taint-count of both a loop; a node
tainted ToBeDeleted is left alone. The scheduler then puts a new pod on an unneeded node only when
no other node fits (TaintToleration's score), so the node empties instead of taking pods that would
hold it, and a pod that fits nowhere else still lands. The taint is a hint, not a removal: the node
serves, its room counts and it stays a candidate (scaling.kube.drain.marked_for_deletion).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping

from scaling.kube.drain import TAINT_DELETION_CANDIDATE, TAINT_DISRUPTED, marked_for_deletion
from scaling.kube.models import NodeInfo
from scaling.nodes.billing import BILLING_PERIOD
from scaling.nodes.headroom import HEADROOM
from scaling.nodes.scale_down.checks import is_managed
from scaling.nodes.scale_down.models import NodeDecision, NodeState

# Nodes with an unneeded timer that CA would not list as unneeded: Utilized ones (the timer is
# multi-node consolidation's) and the replacements (Drifted, Expired, Consolidated: their pods need a
# successor, they do not fit elsewhere).
NOT_UNNEEDED = frozenset(
    {NodeState.UTILIZED, NodeState.DRIFTED, NodeState.EXPIRED, NodeState.CONSOLIDATED, NodeState.REMOVING}
)
KEPT_FOR_PODS = frozenset({BILLING_PERIOD, HEADROOM})
_UNIX_TIME = re.compile(r"[+-]?[0-9]{1,18}")  # base 10, within int64
OFF_LIFTS_MAX = 20  # soft taints lifted an evaluation when they are off (each name crosses the history)


def timers_from_soft_taints(nodes: Iterable[NodeInfo], ttl_s: float, now: float) -> dict[str, float]:
    """The unneeded timers a soft taint's value says (the unix time it was put on), for the nodes
    whose taint is younger than ``ttl_s``, as Cluster Autoscaler started with
    --node-deletion-candidate-ttl loads them (core/scaledown/unneeded/nodes.go LoadFromExistingTaints):
    a CA stopped for growth hands over the timers it kept. A value that is no unix time is skipped; a
    time to come is taken as now. None with ``ttl_s`` 0 (CA's default: off)."""
    if ttl_s <= 0:
        return {}
    out: dict[str, float] = {}
    for node in nodes:
        value = next((t.value for t in node.taints if t.key == TAINT_DELETION_CANDIDATE), None)
        if value is None or not _UNIX_TIME.fullmatch(value):  # as Go's strconv.ParseInt reads it
            continue
        since = float(int(value))
        if since + ttl_s >= now:
            out[node.name] = min(since, now)
    return out


def young_soft_taints(nodes: Iterable[NodeInfo], ttl_s: float, now: float) -> dict[str, float]:
    """While the soft taints are off, the ones left on, by node: when each turns stale (its value
    plus ``ttl_s``). CA's condition (utils/taints getDeletionCandidateTTLCondition) keeps a taint
    younger than the TTL (strictly) and cleans one without a readable time; none is kept at TTL 0."""
    stale_at = {name: since + ttl_s for name, since in timers_from_soft_taints(nodes, ttl_s, now).items()}
    return {name: at for name, at in stale_at.items() if at > now}


def unneeded_nodes(decisions: Mapping[str, NodeDecision], unneeded_since: Iterable[str]) -> set[str]:
    """The nodes CA would list as unneeded: their pods fit elsewhere and their timer runs, whatever
    holds them when it runs out (min size, a budget: CA's unneeded list keeps such nodes too). Not a
    node kept for what growth means it to hold, which CA has no notion of: one a paid billing period
    holds (arriving pods should use what is paid for) or the last holding its group's headroom (room
    kept for pods to come)."""
    return {
        n
        for n in unneeded_since
        if (d := decisions.get(n)) is not None
        and d.state not in NOT_UNNEEDED
        and not any(r.code in KEPT_FOR_PODS for r in d.reasons)
    }


def soft_deletion_taints(
    nodes: list[NodeInfo],
    unneeded: Collection[str],
    in_progress: Collection[str],
    budget: int,
    young: Collection[str] = (),
) -> tuple[list[str], list[str]]:
    """(nodes to soft-taint, nodes to lift the soft taint from), together at most ``budget``, lifts
    first. growth's nodes only (CA: its node groups' nodes). Left out: a node a removal holds or
    marked (its own soft or hard mark), and one a command's karpenter.sh/disrupted taint is on:
    those taints are the removals' and untracked_disrupted's to lift. With a budget of 0 or less the
    soft taints are off: every one left is lifted, OFF_LIFTS_MAX an evaluation, but on the ``young``
    nodes (young_soft_taints), as CA with --max-bulk-soft-taint-count=0 cleans the ones older
    than --node-deletion-candidate-ttl when it starts (cleanUpIfRequired:
    CleanStaleDeletionCandidates; every one at the TTL's default 0)."""
    if budget <= 0:
        unneeded, budget = (), OFF_LIFTS_MAX
    else:
        young = ()
    held, unneeded = set(in_progress), set(unneeded)
    taint: list[str] = []
    untaint: list[str] = []
    for node in sorted(nodes, key=lambda n: n.name):
        if not is_managed(node) or node.name in held or marked_for_deletion(node):
            continue
        keys = {t.key for t in node.taints}
        if TAINT_DISRUPTED in keys:
            continue
        soft = TAINT_DELETION_CANDIDATE in keys
        if node.name in unneeded and not soft:
            taint.append(node.name)
        elif node.name not in unneeded and soft and node.name not in young:
            untaint.append(node.name)
    untaint = untaint[:budget]
    return taint[: budget - len(untaint)], untaint
