"""Where the kube-scheduler puts pods that arrive together, in every order they may arrive.

A plan that moves pods (a consolidation's deletion or replacement) counts them into the room of
other nodes and of its successors, first fit. The scheduler takes the recreated pods one at a
time in its queue's order (priority, then creation time; a drain's evictions race, so any order
of them) and binds each to the feasible node it scores best: NodeResourcesFit's LeastAllocated
plus BalancedAllocation (scaling.kube.scheduling.scoring), at random among equal scores
(schedule_one.go selectHost). It prefers the emptiest node, so an early pod may take the room a
plan kept for a later, larger one, which then waits for a node: a consolidation that bought for
it comes back in the next loop, and the cycle goes on (docs/nodes-benchmarks.md, the
consolidation bench's cycles). ``stranded`` plays every distinct order and every tie;
``placing_order`` looks for one order that places every pod whatever the ties (a drain that evicts
in it, one pod at a time, brings them in it); ``bound_in_turn`` plays one order, one tie each (where
the pods of another drain, already under way, are about to go).

What it reads: room (cpu, memory, pod slots), what ``admits`` says of labels and taints, and
TaintToleration's score (weight 3: the PreferNoSchedule taints a pod does not tolerate, normalized
over the nodes it fits; scaling.kube.scheduling.tainttoleration), which the simulated scheduler
scores too. Left out: the other score plugins (preferred affinity, default topology spreading,
image locality), which the simulated scheduler does not score either, and
percentageOfNodesToScore (clusters above 100 nodes are scored in part). The play stops after
MAX_WORK node scores (a large cluster's many roomy nodes): its answer then says it is incomplete.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from scaling.kube.models import NodeInfo, PodInfo
from scaling.kube.pods import implied_score_requests
from scaling.kube.scheduling.scoring import resource_score
from scaling.kube.scheduling.tainttoleration import PREFERRED, preferred_untolerated, weighted_scores

MAX_WORK = 200_000  # node scores: a few tenths of a second

Admits = Callable[[PodInfo, NodeInfo], bool]


@dataclass(frozen=True)
class Target:
    """A node the arriving pods may take: its free cpu, memory and pod slots, and what its pods
    request as the scores read it (real cpu, memory, then non-zero cpu, memory)."""

    node: NodeInfo
    room: tuple[int, int, int]
    used: tuple[int, int, int, int]


@dataclass
class Arrivals:
    """``stranded``: a pod some arrival order leaves without a node (None: every order places
    every pod); ``order``: that order, up to it; ``complete``: every order was played."""

    stranded: PodInfo | None = None
    order: list[PodInfo] = field(default_factory=list)
    complete: bool = True


def score_reads(pod: PodInfo) -> tuple[int, int, int, int]:
    return pod.score_requests or implied_score_requests(pod.requests)


@dataclass
class _Kind:
    pod: PodInfo  # the first of its pods
    need: tuple[int, int, int]
    score: tuple[int, int, int, int]
    admitted: tuple[int, ...]  # targets its filters admit
    soft: tuple[int, ...]  # per target, the PreferNoSchedule taints it does not tolerate (() when none has one)


class _OutOfWork(Exception):
    pass


class _Play:
    """The pods in kinds (one per need, score reads and admitting targets) over the targets some
    pod fits: what both plays read."""

    def __init__(self, pods: Sequence[PodInfo], targets: Sequence[Target], admits: Admits) -> None:
        needs = [(p.requests.cpu_m, p.requests.memory, max(p.requests.pods, 1)) for p in pods]
        # A target no pod fits now never takes one (room only shrinks): left out of the play's states.
        self.targets = [t for t in targets if any(fits(n, t.room) for n in set(needs))]
        kinds: dict[tuple, _Kind] = {}
        members: dict[tuple, list[PodInfo]] = {}
        soft_taints = _soft_tainted(self.targets)
        for p, need in zip(pods, needs, strict=True):
            admitted = tuple(i for i, t in enumerate(self.targets) if admits(p, t.node))
            reads = score_reads(p)
            soft = (
                tuple(preferred_untolerated(p.tolerations, t.node.taints) for t in self.targets) if soft_taints else ()
            )
            key = (need, reads, admitted, soft)
            kinds.setdefault(key, _Kind(p, need, reads, admitted, soft))
            members.setdefault(key, []).append(p)
        self.kinds = list(kinds.values())
        self.named = list(members.values())
        total = tuple(sum(n[r] for n in needs) for r in range(3))
        self.trivial = all(_always_placed(k, self.targets, len(pods), total) for k in self.kinds)
        self.alloc = [(t.node.allocatable.cpu_m, t.node.allocatable.memory) for t in self.targets]
        # What tells two targets apart for every kind beyond room: which kinds they admit, how they score its taints.
        self.alike = [
            tuple((i in k.admitted, k.soft[i] if k.soft else 0) for k in self.kinds) for i in range(len(self.targets))
        ]
        self.work = 0

    def best(self, k: _Kind, rooms: Sequence[Sequence[int]], used: Sequence[Sequence[int]]) -> list[int]:
        """The targets the scheduler may bind a pod of ``k`` to: the best-scoring ones it fits, one of
        each set of targets alike in every respect the play reads (they lead to the same states)."""
        self.work += len(k.admitted)
        if self.work > MAX_WORK:
            raise _OutOfWork
        scored = [(i, _resource_score(k.score, used[i], self.alloc[i])) for i in k.admitted if fits(k.need, rooms[i])]
        scored = _with_taint_scores(scored, k.soft)
        top = max((s for _, s in scored), default=-1)
        distinct: dict[tuple, int] = {}
        for i, s in scored:
            if s == top:
                distinct.setdefault((tuple(rooms[i]), tuple(used[i]), self.alloc[i], self.alike[i]), i)
        return list(distinct.values())

    def pods(self, kinds: Sequence[int]) -> list[PodInfo]:
        """The pods a sequence of kinds names, each kind's in turn."""
        taken = [0] * len(self.kinds)
        order: list[PodInfo] = []
        for j in kinds:
            order.append(self.named[j][taken[j]])
            taken[j] += 1
        return order


def stranded(pods: Sequence[PodInfo], targets: Sequence[Target], admits: Admits) -> Arrivals:
    """Whether the scheduler, taking ``pods`` in some order and each to its best-scoring target
    (any of the best when several tie), leaves one with no target its room and filters admit."""
    play = _Play(pods, targets, admits)
    if play.trivial:
        return Arrivals()
    ks = play.kinds
    left = [len(m) for m in play.named]
    rooms = [list(t.room) for t in play.targets]
    used = [list(t.used) for t in play.targets]
    seen: set[tuple] = set()

    def move(k: _Kind, i: int, sign: int) -> None:
        for r in range(3):
            rooms[i][r] -= sign * k.need[r]
        for r in range(4):
            used[i][r] += sign * k.score[r]

    def visit() -> list[int] | None:
        key = (tuple(left), tuple(tuple(r) for r in rooms), tuple(tuple(u) for u in used))
        if key in seen:
            return None
        for j, k in enumerate(ks):
            if not left[j]:
                continue
            choices = play.best(k, rooms, used)
            if not choices:
                return [j]
            left[j] -= 1
            for i in choices:
                move(k, i, 1)
                failed = visit()
                move(k, i, -1)
                if failed is not None:
                    left[j] += 1
                    return [j, *failed]
            left[j] += 1
        seen.add(key)
        return None

    try:
        failed = visit()
    except _OutOfWork:
        return Arrivals(complete=False)
    if failed is None:
        return Arrivals()
    order = play.pods(failed)
    return Arrivals(stranded=order[-1], order=order)


# A state of the play: each target's room (cpu, memory, slots) and its pods' score reads.
_State = tuple[tuple[tuple[int, ...], tuple[int, ...]], ...]


def placing_order(pods: Sequence[PodInfo], targets: Sequence[Target], admits: Admits) -> list[PodInfo] | None:
    """An order of ``pods`` that the scheduler, taking them one at a time in it, places every one of,
    whichever of the best-scoring targets it picks at each tie (None: no order does, or the search
    ran out of work). A drain that evicts in it, each pod once the one before is bound again, leaves
    no pod pending. Larger pods are tried first (Resources.size: the planner's first-fit order, which
    plans most often rely on)."""
    play = _Play(pods, targets, admits)
    if play.trivial:
        return list(pods)
    ks = play.kinds
    by_size = sorted(range(len(ks)), key=lambda j: (-ks[j].pod.requests.size, j))
    start: _State = tuple((t.room, t.used) for t in play.targets)
    failed: set[tuple] = set()

    def after(k: _Kind, states: frozenset[_State]) -> frozenset[_State] | None:
        """Every state a pod of ``k`` may leave, from any of ``states`` (None: one leaves it pending)."""
        out: set[_State] = set()
        for state in states:
            rooms, used = [s[0] for s in state], [s[1] for s in state]
            choices = play.best(k, rooms, used)
            if not choices:
                return None
            for i in choices:
                play.work += len(state)
                room, u = state[i]
                moved = (
                    tuple(room[r] - k.need[r] for r in range(3)),
                    tuple(u[r] + k.score[r] for r in range(4)),
                )
                out.add((*state[:i], moved, *state[i + 1 :]))
        return frozenset(out)

    def search(left: tuple[int, ...], states: frozenset[_State]) -> list[int] | None:
        if not any(left):
            return []
        if (left, states) in failed:
            return None
        for j in by_size:
            if not left[j] or (nxt := after(ks[j], states)) is None:
                continue
            rest = search((*left[:j], left[j] - 1, *left[j + 1 :]), nxt)
            if rest is not None:
                return [j, *rest]
        failed.add((left, states))
        return None

    try:
        found = search(tuple(len(m) for m in play.named), frozenset([start]))
    except _OutOfWork:
        return None
    return None if found is None else play.pods(found)


def bound_in_turn(
    pods: Sequence[PodInfo], targets: Sequence[Target], admits: Admits, work: int = MAX_WORK
) -> list[int]:
    """Where the scheduler binds ``pods`` taken one at a time in the given order: the index of the
    target each goes to, the best-scoring one that ``admits`` it and has its room (the first of
    several that tie, where the scheduler picks one at random), or -1 when none has (it stays
    pending and takes no room). It stops before the pod that would pass ``work`` node scores: a
    shorter answer names the first pods only."""
    rooms = [list(t.room) for t in targets]
    used = [list(t.used) for t in targets]
    alloc = [(t.node.allocatable.cpu_m, t.node.allocatable.memory) for t in targets]
    soft_taints = _soft_tainted(targets)
    out: list[int] = []
    for pod in pods:
        if work < len(targets):
            break
        work -= len(targets)
        need = (pod.requests.cpu_m, pod.requests.memory, max(pod.requests.pods, 1))
        reads = score_reads(pod)
        scored = [
            (i, _resource_score(reads, used[i], alloc[i]))
            for i, t in enumerate(targets)
            if fits(need, rooms[i]) and admits(pod, t.node)
        ]
        soft = tuple(preferred_untolerated(pod.tolerations, t.node.taints) for t in targets) if soft_taints else ()
        best, top = -1, -1
        for i, s in _with_taint_scores(scored, soft):
            if s > top:
                best, top = i, s
        if best >= 0:
            for r in range(3):
                rooms[best][r] -= need[r]
            for r, v in enumerate(reads):
                used[best][r] += v
        out.append(best)
    return out


def _with_taint_scores(scored: list[tuple[int, int]], soft: Sequence[int]) -> list[tuple[int, int]]:
    """(target, resource score) of the feasible targets, TaintToleration's weighted score added:
    normalized over these targets, so it moves no choice when none has a taint the pod minds."""
    if not soft or not any(soft[i] for i, _ in scored):
        return scored
    extra = weighted_scores([soft[i] for i, _ in scored])
    return [(i, s + e) for (i, s), e in zip(scored, extra, strict=True)]


def _resource_score(reads: Sequence[int], used: Sequence[int], alloc: tuple[int, int]) -> int:
    """The resource scores of a target whose pods' score reads are ``used``, with a pod's ``reads`` added."""
    cpu, mem, nz_cpu, nz_mem = reads
    return resource_score(
        (used[2] + nz_cpu, used[3] + nz_mem), (used[0] + cpu, used[1] + mem), alloc, cpu == 0 and mem == 0
    )


def _soft_tainted(targets: Sequence[Target]) -> bool:
    return any(t.effect == PREFERRED for target in targets for t in target.node.taints)


def fits(need: Sequence[int], room: Sequence[int]) -> bool:
    """Whether ``need`` (cpu, memory, pod slots) fits in ``room``."""
    return need[0] <= room[0] and need[1] <= room[1] and need[2] <= room[2]


def _always_placed(k: _Kind, targets: Sequence[Target], pods: int, total: Sequence[int]) -> bool:
    """A pod of ``k`` finds room in every order, whatever the scores: more admitting targets it fits
    than other pods (each of them takes room on one target), or one that holds it beside them all
    (``total``: the ``pods``' summed cpu, memory and pod slots)."""
    room_for = [i for i in k.admitted if fits(k.need, targets[i].room)]
    return len(room_for) >= pods or any(fits(total, targets[i].room) for i in room_for)
