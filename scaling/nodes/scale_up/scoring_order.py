"""A plan's new nodes as the scheduler will fill them: a node its scoring leaves empty is not bought.

The packer puts each pod on the node of least cost; the scheduler binds each pod, in its queue,
to the feasible node it scores best (scaling.kube.scheduling.scoring: LeastAllocated over the
non-zero requests and BalancedAllocation over the real ones, which prefer the emptier node). Once a plan's nodes are Ready together, a
pod that may go anywhere takes room on a large node the packer meant for a pod that may go
only there, or a zone anti-affine pod lands on a roomy node in another zone: the node bought
for it then runs nothing, and the pod it was meant for may wait for the next loop. So the plan
is played through the scheduler's choice, pod by pod: every filter the planner models (labels,
taints, room and extended resources, the shape's own ports, anti-affinity and spread, the
clashes between shapes), a domain's share free to take any domain its skew or its one-per-domain
rule allows, least constrained pods first (the scheduler's queue order is the pods' creation
order, which the planner does not see: the pods with most choice taking room first is the case
that leaves a node empty). Nodes it leaves empty are dropped; the pods they were for are counted
on the nodes the play gave them. The play costs a filter and a score per pod and node, so it
runs for plans of up to MAX_NODES nodes and MAX_PODS pods (where one node's choice shows; a
large burst's nodes are packed full and each is needed).
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from scaling.kube.affinity import per_node_cap
from scaling.kube.models import LABEL_HOSTNAME, NodeInfo, Resources, fit_count, vec
from scaling.kube.pods import implied_score_requests
from scaling.kube.scheduling import framework
from scaling.kube.scheduling.framework import SchedulingState
from scaling.kube.scheduling.placed import self_limit, with_placed
from scaling.kube.scheduling.scoring import resource_score
from scaling.nodes.models import PlannedNode, PodProblem
from scaling.nodes.scale_up.demand import PodShape
from scaling.nodes.scale_up.topology import base_key

MAX_NODES = 64
MAX_PODS = 1_000
# The queue orders played: the scheduler's is the pods' creation order, which the planner does not see.
WAITING_FOR_PLANNED_PODS = "WaitingForPlannedPods"
WAITING_MESSAGE = (
    "the scheduler's scoring gives the room planned for it to other pods of the same plan "
    "(it prefers the emptier nodes): planned again once they are placed"
)
ORDERS = ("smallest", "largest", "flexible", "shuffled-1", "shuffled-2", "shuffled-3")


@dataclass
class _Node:
    view: NodeInfo  # the pool's next node (scaling.nodes.scale_up.claims), named
    room: list[int]  # cpu, memory, pod slots left
    extended: Counter[str]
    alloc: tuple[int, int]
    # cpu, memory the play's pods request: real, then non-zero (the scores' reads, _Kind.score)
    used: list[int] = field(default_factory=lambda: [0, 0, 0, 0])
    pods: Counter[str] = field(default_factory=Counter)  # shape key -> pods the play put here


@dataclass
class _Kind:
    """One planned shape in the play: its filters' state, and the domain its share may leave."""

    shape: PodShape
    state: SchedulingState
    count: int
    free_key: str | None  # the key a domain's share was pinned on (None: not a share)
    score: tuple[int, int, int, int] = (0, 0, 0, 0)  # PodShape.score_requests (or implied)
    admitted: int = 0  # nodes whose filters admit it at the start
    rank: int = 0  # its choice (_setup): least last


def follow_scoring(
    nodes: Sequence[PlannedNode],
    shapes: Mapping[str, PodShape],
    claims: Mapping[str, Mapping[str, NodeInfo]],
    pinned: Mapping[str, Mapping[str, str]],
    fixed: frozenset[str] = frozenset(),
    elsewhere: Mapping[str, Mapping[str, int]] | None = None,
) -> tuple[list[PlannedNode], list[PodProblem]]:
    """`nodes` without those the scheduler's scoring would leave empty, their pods counted where
    it puts them. `shapes`: the planned shapes by key; `claims`: group -> pool -> the pool's next
    node; `pinned`: base shape key -> the node selector it had before a domain's share pinned
    it; `fixed`: shapes whose pods stay on the nodes the packer gave them (a self-affine group
    on one node); `elsewhere`: base shape key -> domain -> its pods in-flight nodes were made
    for (a zone spread's skew counts them)."""
    elsewhere = elsewhere or {}
    if not nodes or len(nodes) > MAX_NODES or sum(sum(n.pods.values()) for n in nodes) > MAX_PODS:
        return list(nodes), []
    if any(k not in shapes for n in nodes for k in n.pods):
        return list(nodes), []  # a shape the caller did not pass: nothing to play
    out, problems = list(nodes), []
    for order in ORDERS:
        sims, kinds, moving = _setup(out, shapes, claims, pinned, fixed, elsewhere)
        if not any(k.free_key or k.admitted < len(sims) for k in moving):
            # Every pod may go on every node: which node each gets is the packer's choice of
            # types and tiers, and in the cluster the order the nodes turn Ready decides.
            break
        _play(sims, moving, order, elsewhere)
        if not all(sim.pods for sim in sims):
            out, waiting = _rewrite(out, sims, kinds, shapes, claims)
            problems += waiting
    return out, problems


def _setup(
    nodes: Sequence[PlannedNode],
    shapes: Mapping[str, PodShape],
    claims: Mapping[str, Mapping[str, NodeInfo]],
    pinned: Mapping[str, Mapping[str, str]],
    fixed: frozenset[str],
    elsewhere: Mapping[str, Mapping[str, int]],
) -> tuple[list[_Node], dict[str, _Kind], list[_Kind]]:
    """The plan's nodes, empty but for the fixed shapes' pods; the shapes that move, with their choice."""
    sims = [_node(i, claims[n.group][n.pool]) for i, n in enumerate(nodes)]
    kinds: dict[str, _Kind] = {}
    for n in nodes:
        for key, count in n.pods.items():
            kind = kinds.get(key)
            if kind is None:
                s = shapes[key]
                score = s.score_requests or implied_score_requests(s.requests)
                kind = kinds[key] = _Kind(s, s.scheduling or SchedulingState(), 0, _free_key(s, pinned), score)
            kind.count += count
    for i, n in enumerate(nodes):  # fixed shapes first, where the packer put them
        for key, count in n.pods.items():
            if key in fixed:
                _place(kinds[key], sims[i], count)
                kinds[key].count -= count
    moving = [k for k in kinds.values() if k.shape.key not in fixed]
    for k in moving:
        # Choice: pods without rules about other pods before those with them, then by how
        # many nodes admit them.
        domains = _domains(k, sims, elsewhere)
        k.admitted = sum(1 for sim in sims if _admits(k, sim, domains))
        k.rank = k.admitted - (len(sims) + 1) * bool(k.free_key or k.shape.scheduling)
    return sims, kinds, moving


def _play(sims: Sequence[_Node], moving: list[_Kind], order: str, elsewhere: Mapping[str, Mapping[str, int]]) -> None:
    """The scheduler's placement of the moving shapes' pods, shapes in `order`."""
    if order.startswith("shuffled"):
        random.Random(order).shuffle(moving)
    elif order == "flexible":
        moving.sort(key=lambda k: -k.rank)  # stable: the plan's order among equals
    else:  # by size, and among pods of one size those with most choice first
        sign = 1 if order == "smallest" else -1
        moving.sort(key=lambda k: (sign * _size(k.shape), -k.rank))
    while True:  # passes until one places nothing, as the scheduler retries its unschedulable pods
        placed = 0
        for k in moving:
            while k.count > 0:
                best = _best(k, sims, elsewhere)
                if best is None:
                    break
                _place(k, best, 1)
                k.count -= 1
                placed += 1
        if not placed or all(k.count == 0 for k in moving):
            break


def _size(s: PodShape) -> float:
    return s.requests.size


def _node(i: int, claim: NodeInfo) -> _Node:
    name = f"planned-{i}"
    view = claim.model_copy(update={"name": name, "labels": {**claim.labels, LABEL_HOSTNAME: name}})
    room = claim.allocatable
    return _Node(view, list(vec(room)), Counter(dict(room.extended)), (room.cpu_m, room.memory))


def _free_key(s: PodShape, pinned: Mapping[str, Mapping[str, str]]) -> str | None:
    """The key a domain's share was pinned on (a zone spread's, or a shape's whose pods repel
    each other on the key): the scheduler puts its pods in any domain the rule allows."""
    before = pinned.get(base_key(s.key))
    if before is None or s.key == base_key(s.key):
        return None
    anti = s.scheduling.affinity.self_anti if s.scheduling and s.scheduling.affinity else ()
    spread = {t.key for t in s.topology_spreads}
    added = [k for k in s.node_selector if k not in before and (k in anti or k in spread)]
    return added[0] if len(added) == 1 else None


def _admits(k: _Kind, sim: _Node, domains: _Domains | None) -> bool:
    """Every modelled filter but room admits one more pod of `k` on `sim` now; `domains`: the
    share's domains as the play stands (_domains), None when `k` is not a share."""
    s = k.shape
    if k.free_key is not None:
        assert domains is not None
        selector = {key: v for key, v in s.node_selector.items() if key != k.free_key}
        if not domains.open(sim.view.labels.get(k.free_key)):
            return False
        pod = s.model_copy(update={"node_selector": selector})
    else:
        pod = s
    if framework.filter(pod, k.state, sim.view, resources=False) is not None:
        return False
    if s.host_ports and sim.pods[s.key] > 0:
        return False
    cap = per_node_cap(s.spreads)
    if cap is not None and sim.pods[s.key] >= cap:
        return False
    limit = self_limit(s, k.state, sim.view)
    if limit is not None and limit <= 0:
        return False
    conflicts = set(s.conflicts)
    return not any(base_key(other) in conflicts and n > 0 for other, n in sim.pods.items())


@dataclass(frozen=True)
class _Domains:
    """Which domains a share's next pod may take: one pod per domain for a shape whose pods repel
    each other on the key (`counts` None; pods running there are the filters' to count), else a
    zone spread's skew over `counts`."""

    placed: Counter[str]  # the family's pods in the play, by domain
    counts: Counter[str] | None = None
    least: int = 0
    self_count: int = 0
    max_skew: int = 0

    def open(self, domain: str | None) -> bool:
        if domain is None:
            return False
        if self.counts is None:
            return self.placed[domain] == 0
        return self.counts[domain] + self.self_count - self.least <= self.max_skew


def _domains(k: _Kind, sims: Sequence[_Node], elsewhere: Mapping[str, Mapping[str, int]]) -> _Domains | None:
    """The domains `k`'s share may take as the play stands, counted once for every node a pod is
    tried on (they do not depend on the node): for a zone spread, the skew over the running pods,
    those in-flight nodes were made for (`elsewhere`) and the family's pods in the play."""
    key = k.free_key
    if key is None:
        return None
    family = base_key(k.shape.key)
    placed: Counter[str] = Counter()
    for other in sims:
        d = other.view.labels.get(key)
        if d is not None:
            placed[d] += sum(n for o, n in other.pods.items() if base_key(o) == family)
    spreads = [t for t in k.shape.topology_spreads if t.key == key]
    if not spreads:
        return _Domains(placed)
    t = spreads[0]
    counts = Counter(k.shape.domain_counts[0] if k.shape.domain_counts else {})
    counts.update(elsewhere.get(family, {}))
    for other in sims:
        counts[other.view.labels.get(key, "")] += 0  # every planned node's domain is one the pod may use
    del counts[""]
    if t.counts_self:
        counts.update(placed)
    least = min(counts.values(), default=0)
    if t.min_domains is not None and len(counts) < t.min_domains:
        least = 0  # fewer domains than minDomains: the scheduler's global minimum is 0
    return _Domains(placed, counts, least, 1 if t.counts_self else 0, t.max_skew)


def _best(k: _Kind, sims: Sequence[_Node], elsewhere: Mapping[str, Mapping[str, int]]) -> _Node | None:
    req = vec(k.shape.requests)
    best: tuple[int, _Node] | None = None
    domains = _domains(k, sims, elsewhere)
    cpu, memory, nz_cpu, nz_memory = k.score
    best_effort = cpu == 0 and memory == 0
    for sim in sims:
        if fit_count(req, sim.room) <= 0:
            continue
        if any(sim.extended[name] < q for name, q in k.shape.requests.extended):
            continue
        if not _admits(k, sim, domains):
            continue
        used = sim.used
        score = resource_score(
            (used[2] + nz_cpu, used[3] + nz_memory), (used[0] + cpu, used[1] + memory), sim.alloc, best_effort
        )
        if best is None or score > best[0]:
            best = (score, sim)
    return None if best is None else best[1]


def _place(k: _Kind, sim: _Node, n: int) -> None:
    req = vec(k.shape.requests)
    for r in range(3):
        sim.room[r] -= req[r] * n
    for r in range(4):
        sim.used[r] += k.score[r] * n
    for name, q in k.shape.requests.extended:
        sim.extended[name] -= q * n
    sim.pods[k.shape.key] += n
    if k.shape.scheduling:
        k.state = with_placed(k.shape, k.state, sim.view, n)


def _rewrite(
    nodes: Sequence[PlannedNode],
    sims: Sequence[_Node],
    kinds: Mapping[str, _Kind],
    shapes: Mapping[str, PodShape],
    claims: Mapping[str, Mapping[str, NodeInfo]],
) -> tuple[list[PlannedNode], list[PodProblem]]:
    """The nodes the play used, each with the pods it placed there plus those it left unplaced
    that the packer had put there (they wait, as they would in the cluster); a dropped node's
    unplaced pods are planned again in the next loop. The named pods of each shape are dealt
    out again in node order."""
    owner = {p.uid: key for key, s in shapes.items() for p in s.pods}
    named: dict[str, list[str]] = {}
    for n in nodes:
        for uid in n.pod_uids:
            named.setdefault(owner.get(uid, ""), []).append(uid)
    left = {key: k.count for key, k in kinds.items()}
    out: list[PlannedNode] = []
    for n, sim in zip(nodes, sims, strict=True):
        if not sim.pods:
            continue
        pods = Counter(sim.pods)
        for key, count in n.pods.items():
            stay = min(count, left.get(key, 0), _fits(kinds[key], sim))
            if stay > 0:
                _place(kinds[key], sim, stay)
                pods[key] += stay
                left[key] -= stay
        uids: list[str] = []
        for key, count in pods.items():
            uids += named.get(key, [])[:count]
            del named.get(key, [])[:count]
        requirements = Resources.total(
            Resources(
                cpu_m=shapes[key].requests.cpu_m * count,
                memory=shapes[key].requests.memory * count,
                pods=shapes[key].requests.pods * count,
                extended=tuple((name, q * count) for name, q in shapes[key].requests.extended),
            )
            for key, count in pods.items()
        )
        room = claims[n.group]
        candidates = [
            c
            for c in n.candidates
            if c.name == n.pool or (c.name in room and requirements.fits_in(room[c.name].allocatable))
        ]
        update = {"pods": dict(pods), "requirements": requirements, "pod_uids": uids, "candidates": candidates}
        out.append(n.model_copy(update=update))
    problems: list[PodProblem] = []
    for key, count in left.items():
        refs = {p.uid: p for p in shapes[key].pods}
        named_left = [refs[u] for u in named.get(key, []) if u in refs][:count]
        problems += [
            PodProblem(
                namespace=p.namespace,
                name=p.name,
                uid=p.uid,
                key=base_key(key),
                reason=WAITING_FOR_PLANNED_PODS,
                message=WAITING_MESSAGE,
            )
            for p in named_left
        ]
        if count > len(named_left) and problems and problems[-1].key == base_key(key):
            problems[-1].count += count - len(named_left)
    return out, problems


def _fits(k: _Kind, sim: _Node) -> int:
    """Pods of `k` the node's room left holds (cpu, memory, pod slots and extended resources)."""
    n = fit_count(vec(k.shape.requests), sim.room)
    for name, q in k.shape.requests.extended:
        n = min(n, sim.extended[name] // q) if q > 0 else n
    return max(n, 0)
