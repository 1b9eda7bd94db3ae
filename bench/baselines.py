"""What Cluster Autoscaler and Karpenter would buy for the same pending pods, simplified to
their documented choice rules, so the planner's cost can be compared with theirs.

- Cluster Autoscaler: each scale-up round estimates, for every node group (here: every pool
  type), how many nodes the pods it can help need (first-fit decreasing, like its binpacking
  estimator) and lets the expander pick one option; rounds repeat until every pod is placed.
  `price` (expander/price) takes the lowest price of the nodes per unit of pod requests they
  place; `least-waste` (expander/waste/waste.go) the least wasted fraction of cpu plus
  memory of the option's nodes. Upstream breaks ties at random; here the cheaper option wins,
  which can only make the baseline cheaper.
- Karpenter: pods largest first go onto the first open node claim that one of its remaining
  instance types can still hold, else open a claim with every type; at launch each claim
  takes the cheapest type that holds what it got. With `consolidate`, the disruption
  controller's methods then run until none acts (karpenter.sh concepts/disruption):
  deletion (a node's pods all fit the others' free room), single-node replacement (by the
  cheapest type that holds its pods) and multi-node replacement (two nodes by one cheaper node
  that holds both). With `into_room` (the consolidation bench's Karpenter-like, since 29 Nov
  2026), as Karpenter's are: replacements place pods in the others' room before they open a
  node, and multi-node replacement is Karpenter's binary search for the longest prefix of the
  nodes by price per pod whose pods the others' room and one node cheaper than them all hold
  (then the whole prefix once, as growth's plan tries it), pairs besides.

Pods carry a per-node limit (hostname anti-affinity or spread; scaling.kube.affinity) that
every placement here keeps, like the planner's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from scaling.kube.affinity import per_node_cap
from scaling.kube.models import PodInfo, Resources
from scaling.nodes.disruption.budgets import UNLIMITED, scaled_nodes
from scaling.nodes.models import ServerType

Vec = tuple[int, int, int]


@dataclass(frozen=True)
class _Pod:
    req: Vec
    kind: str  # pods of one kind share a per-node limit
    cap: int | None


@dataclass
class _Node:
    cap: Vec
    used: list[int] = field(default_factory=lambda: [0, 0, 0])
    pods: list[_Pod] = field(default_factory=list)
    kinds: dict[str, int] = field(default_factory=dict)

    def takes(self, p: _Pod, cap: Vec | None = None) -> bool:
        c = cap or self.cap
        if p.cap is not None and self.kinds.get(p.kind, 0) >= p.cap:
            return False
        return all(u + r <= x for u, r, x in zip(self.used, p.req, c))

    def copy(self) -> _Node:
        """The same node, its room to be filled apart (C-speed copies: the consolidation methods copy
        every node once per candidate they try)."""
        return _Node(cap=self.cap, used=list(self.used), pods=list(self.pods), kinds=dict(self.kinds))

    def add(self, p: _Pod) -> None:
        for d in range(3):
            self.used[d] += p.req[d]
        self.pods.append(p)
        self.kinds[p.kind] = self.kinds.get(p.kind, 0) + 1


def _pods(pods: Sequence[PodInfo]) -> list[_Pod]:
    return [
        _Pod(
            req=(p.requests.cpu_m, p.requests.memory, max(p.requests.pods, 1)),
            kind=p.labels.get("app", p.name),
            cap=per_node_cap(p.spreads),
        )
        for p in pods
    ]


def _cap(t: ServerType) -> Vec:
    return (t.allocatable.cpu_m, t.allocatable.memory, t.allocatable.pods)


def _weight(req: Vec, cap: Vec) -> float:
    return req[0] / cap[0] + req[1] / cap[1]


def _ffd(pods: Sequence[_Pod], cap: Vec) -> list[_Node]:
    """First-fit decreasing onto nodes of `cap` (CA's binpacking estimator, simplified)."""
    nodes: list[_Node] = []
    for p in sorted(pods, key=lambda p: -_weight(p.req, cap)):
        for n in nodes:
            if n.takes(p):
                n.add(p)
                break
        else:
            n = _Node(cap=cap)
            n.add(p)
            nodes.append(n)
    return nodes


def cluster_autoscaler(pods: Sequence[PodInfo], types: Sequence[ServerType], expander: str = "price") -> float:
    """Hourly cost of what CA buys with the `price` or `least-waste` expander."""
    left = _pods(pods)
    largest = max(types, key=lambda t: _cap(t)[0] + _cap(t)[1] / 2**20)
    norm = _cap(largest)
    cost = 0.0
    while left:
        best: tuple[float, float, list[int]] | None = None
        for t in types:
            cap = _cap(t)
            helped = [i for i, p in enumerate(left) if _Node(cap=cap).takes(p)]
            if not helped:
                continue
            n = len(_ffd([left[i] for i in helped], cap))
            price = n * t.price_hourly
            if expander == "price":
                score = price / sum(_weight(left[i].req, norm) for i in helped)
            else:  # least-waste: wasted share of the option's cpu plus that of its memory
                cpu = sum(left[i].req[0] for i in helped)
                mem = sum(left[i].req[1] for i in helped)
                score = (n * cap[0] - cpu) / (n * cap[0]) + (n * cap[1] - mem) / (n * cap[1])
            if best is None or (score, price) < best[:2]:
                best = (score, price, helped)
        if best is None:
            raise ValueError("a pod fits no type")
        cost += best[1]
        keep = set(best[2])
        left = [p for i, p in enumerate(left) if i not in keep]
    return cost


def _cheapest(caps: Sequence[tuple[Vec, float]], pods: Sequence[_Pod]) -> int | None:
    """Index of the cheapest type one node of which holds `pods` (None: none does)."""
    best = None
    for i, (cap, price) in enumerate(caps):
        n = _Node(cap=cap)
        if all(n.takes(p) and (n.add(p) or True) for p in pods):
            if best is None or price < caps[best][1]:
                best = i
    return best


def _launch(pods: list[_Pod], caps: Sequence[tuple[Vec, float]]) -> list[tuple[_Node, int]]:
    """Karpenter's provisioning: claims filled largest first, each launched as the cheapest
    of the types still holding it. Returns (node, type index)."""
    big = max(c[0][0] for c in caps), max(c[0][1] for c in caps)
    claims: list[tuple[_Node, list[int]]] = []
    for p in sorted(pods, key=lambda p: -(p.req[0] / big[0] + p.req[1] / big[1])):
        for node, options in claims:
            still = [i for i in options if node.takes(p, caps[i][0])]
            if still:
                node.add(p)
                options[:] = still
                break
        else:
            options = [i for i, (cap, _) in enumerate(caps) if _Node(cap=cap).takes(p)]
            if not options:
                raise ValueError("a pod fits no type")
            node = _Node(cap=(0, 0, 0))
            node.add(p)
            claims.append((node, options))
    out = []
    for node, options in claims:
        i = min(options, key=lambda i: caps[i][1])
        node.cap = caps[i][0]
        out.append((node, i))
    return out


def _rebuild(pods: Sequence[_Pod], cap: Vec) -> _Node:
    n = _Node(cap=cap)
    for p in pods:
        n.add(p)
    return n


def _delete_one(nodes: list[tuple[_Node, int]], caps: Sequence[tuple[Vec, float]]) -> bool:
    """Deletion: the emptiest node whose pods all fit the others' free room goes."""
    free = [k for k in range(len(nodes)) if nodes[k][1] != HELD]
    order = sorted(free, key=lambda k: _weight(tuple(nodes[k][0].used), nodes[k][0].cap))  # type: ignore[arg-type]
    for k in order:
        others = [n.copy() for j, (n, _) in enumerate(nodes) if j != k]
        if all(any(o.takes(p) and (o.add(p) or True) for o in others) for p in nodes[k][0].pods):
            kept = [t for j, (_, t) in enumerate(nodes) if j != k]
            nodes[:] = list(zip(others, kept))
            return True
    return False


def _fill_others(
    nodes: list[tuple[_Node, int]], leaving: set[int], pods: Sequence[_Pod]
) -> tuple[list[tuple[_Node, int]], list[_Pod]]:
    """The nodes not ``leaving``, copied, with as many of ``pods`` (largest first) as their free room
    takes, first fit (Karpenter's scheduler tries the existing nodes before any new claim); and the
    pods left over for a new node."""
    others = [(n.copy(), t) for j, (n, t) in enumerate(nodes) if j not in leaving]
    left = []
    for p in sorted(pods, key=lambda p: -(p.req[0] + p.req[1] / 2**20)):
        home = next((o for o, _ in others if o.takes(p)), None)
        if home is None:
            left.append(p)
        else:
            home.add(p)
    return others, left


def _replace(nodes: list[tuple[_Node, int]], caps: Sequence[tuple[Vec, float]], leaving: Sequence[int]) -> bool:
    """``leaving`` go when their pods fit the others' room plus at most one new node of the cheapest
    type that holds the rest, and that node costs less than they do (else nothing changes)."""
    pods = [p for k in leaving for p in nodes[k][0].pods]
    others, left = _fill_others(nodes, set(leaving), pods)
    price = sum(caps[nodes[k][1]][1] for k in leaving)
    if not left:
        nodes[:] = others
        return True
    i = _cheapest(caps, left)
    if i is None or caps[i][1] >= price - 1e-12:
        return False
    nodes[:] = [*others, (_rebuild(left, caps[i][0]), i)]
    return True


def _replace_alone(nodes: list[tuple[_Node, int]], caps: Sequence[tuple[Vec, float]]) -> bool:
    """Single-node replacement by the cheapest type that holds the node's pods alone (the scale-up
    bench's baseline: it ignores the others' room)."""
    for k, (node, t) in enumerate(nodes):
        if t == HELD:
            continue
        i = _cheapest(caps, node.pods)
        if i is not None and caps[i][1] < caps[t][1]:
            nodes[k] = (_rebuild(node.pods, caps[i][0]), i)
            return True
    return False


def _replace_one(nodes: list[tuple[_Node, int]], caps: Sequence[tuple[Vec, float]]) -> bool:
    """Single-node replacement: a node whose pods the others' room and one cheaper node hold. A node
    whose requests exceed, in some resource, the others' free room plus the largest cheaper type is
    not tried (a necessary condition, summed: it only spares the placements that must fail)."""
    free = [sum(n.cap[d] - n.used[d] for n, _ in nodes) for d in range(3)]
    for k, (node, t) in enumerate(nodes):
        cheaper = [c for c, price in caps if price < caps[t][1]] if t != HELD else []
        if not cheaper:
            continue
        room = [free[d] - (node.cap[d] - node.used[d]) + max(c[d] for c in cheaper) for d in range(3)]
        if all(node.used[d] <= room[d] for d in range(3)) and _replace(nodes, caps, [k]):
            return True
    return False


MAX_COMMAND = 100  # Karpenter's multi-node consolidation takes at most 100 candidates


def _merge_many(nodes: list[tuple[_Node, int]], caps: Sequence[tuple[Vec, float]], limit: int = UNLIMITED) -> bool:
    """Multi-node replacement as Karpenter searches it: the candidates by price per pod moved (its
    SavingsRatio), at most ``limit`` (the budget) and MAX_COMMAND of them, and a binary search for the
    longest prefix of two or more whose pods the others' room and one node cheaper than them all hold;
    then, where that search's assumption (a longer prefix that saves implies the shorter ones do) fails,
    the whole prefix once, as growth's plan tries it (scaling/nodes/disruption/multi_node.py): at least
    what Karpenter finds, in log(n) trials."""
    free = [k for k in range(len(nodes)) if nodes[k][1] != HELD]
    order = sorted(free, key=lambda k: -caps[nodes[k][1]][1] / (1 + len(nodes[k][0].pods)))
    order = order[: min(limit, MAX_COMMAND)]
    lo, hi, found = 2, len(order), None
    while lo <= hi:
        mid = (lo + hi) // 2
        trial = list(nodes)
        if _replace(trial, caps, order[:mid]):
            found, lo = trial, mid + 1
        else:
            hi = mid - 1
    if found is None and len(order) > 2:
        trial = list(nodes)
        found = trial if _replace(trial, caps, order) else None
    if found is None:
        return False
    nodes[:] = found
    return True


def _merge_two(nodes: list[tuple[_Node, int]], caps: Sequence[tuple[Vec, float]]) -> bool:
    """Any pair whose pods one cheaper node holds, most saved first: pairs the prefix search skips."""
    best: tuple[float, int, int, int] | None = None
    free = [k for k in range(len(nodes)) if nodes[k][1] != HELD]
    for x, a in enumerate(free):
        for b in free[x + 1 :]:
            i = _cheapest(caps, nodes[a][0].pods + nodes[b][0].pods)
            if i is None:
                continue
            saved = caps[nodes[a][1]][1] + caps[nodes[b][1]][1] - caps[i][1]
            if saved > 1e-12 and (best is None or saved > best[0]):
                best = (saved, a, b, i)
    if best is None:
        return False
    _, a, b, i = best
    merged = (_rebuild(nodes[a][0].pods + nodes[b][0].pods, caps[i][0]), i)
    nodes[:] = [n for j, n in enumerate(nodes) if j not in (a, b)] + [merged]
    return True


HELD = -1  # the type index of a node consolidation keeps (do-not-disrupt): its room takes pods, it stays


def karpenter(
    pods: Sequence[PodInfo],
    types: Sequence[ServerType],
    consolidate: bool = False,
    rooms: Sequence[Resources] = (),
    budget: str | None = None,
    into_room: bool = False,
    start: Sequence[tuple[Sequence[PodInfo], ServerType]] | None = None,
) -> float:
    """Hourly cost of what Karpenter launches, and with `consolidate` what it keeps after its
    consolidation methods ran to a fixed point. ``rooms``: the free room of nodes it may not
    disrupt, which its deletions may move pods into (their price is the caller's). ``budget``: the
    pool's nodes budget ("3", "20%" of its nodes, held ones too, rounded up), which limits the nodes
    of one command as Karpenter's does (None: no budget). ``into_room``: replacements place pods in
    the others' room first and N nodes merge, as Karpenter's do (the consolidation bench); without it
    a node is replaced by what holds its pods alone and only pairs merge (the scale-up bench: the
    full methods took 90-450 s per capped family at 2,000 pods). ``start``: the nodes as they are
    (each one's pods and type, one of ``types``), consolidated instead of a launch of ``pods``."""
    caps = [(_cap(t), t.price_hourly) for t in types]
    if start is None:
        nodes = _launch(_pods(pods), caps)
    else:
        index = {t.name: i for i, t in enumerate(types)}
        nodes = [(_rebuild(_pods(on), caps[index[t.name]][0]), index[t.name]) for on, t in start]
    nodes += [(_Node(cap=(r.cpu_m, r.memory, r.pods)), HELD) for r in rooms]
    while consolidate:
        limit = UNLIMITED if budget is None else scaled_nodes(budget, len(nodes))
        if limit < 1 or not (
            _delete_one(nodes, caps)
            or (into_room and _merge_many(nodes, caps, limit))
            or (limit >= 2 and _merge_two(nodes, caps))
            or (_replace_one(nodes, caps) if into_room else _replace_alone(nodes, caps))
        ):
            break
    return sum(caps[t][1] for _, t in nodes if t != HELD)
