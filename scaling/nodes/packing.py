"""Cost-aware bin packing of identical-pod groups ("items") onto server types ("bins").

Packing works on counts, not pods: pods of one shape are interchangeable, so the packer builds
one node's contents (a pattern: how many of each item), repeats it as often as the counts
allow, and only then looks again. 30,000 pods of a dozen shapes take a few dozen patterns.

Choosing the type: every item gets a standalone price, the cheapest share of a node it needs
on its own (a node's price / how many of its pods fit there, so a pod too big for two of a
type pays for the whole node).
A candidate node is worth the standalone prices of the pods it would hold; the packer opens
the node whose price is the smallest fraction of that worth. A node that only fills memory is
worth about its price; one that mixes cpu-heavy and memory-heavy pods is worth more, so mixes
win and neither resource is stranded. Measured on the bundled benchmark: within 5 % of the LP
lower bound (bench/plan_scale_up.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from scaling.nodes.money import PriceBudget

Vec = tuple[int, int, int]  # cpu millicores, memory bytes, pod slots


@dataclass
class Bin:
    """One pool the packer may open nodes in."""

    key: str  # pool name
    cap: Vec
    price: float
    slots: int | None  # nodes this pool may still add; None = unlimited


@dataclass
class Item:
    """Identical pods: `count` of them, each needing `req`, allowed on the bins in `bins`,
    at most `per_node` on one node (None: as many as fit)."""

    req: Vec
    count: int
    bins: frozenset[str]
    per_node: int | None = None


@dataclass
class Pattern:
    bin: str
    counts: dict[int, int]  # item index -> pods per node
    repeat: int
    used: Vec = (0, 0, 0)


@dataclass
class Budget:
    """A node limit shared by several packings (a group's maxNodes, the cluster total)."""

    left: int | None

    def take(self, n: int) -> None:
        if self.left is not None:
            self.left -= n


@dataclass
class PackResult:
    patterns: list[Pattern] = field(default_factory=list)
    leftover: dict[int, int] = field(default_factory=dict)  # item index -> pods not placed


def _fits(req: Vec, room: Sequence[int]) -> int:
    """How many of `req` fit in `room`."""
    n = None
    for r, c in zip(req, room):
        if r > 0:
            k = c // r
            n = k if n is None else min(n, k)
    return 0 if n is None else n


def _per_node(item: Item, cap: Vec) -> int:
    """How many of the item's pods one node of `cap` holds (its per-node cap included)."""
    n = _fits(item.req, cap)
    return n if item.per_node is None else min(n, item.per_node)


_BIG = 1 << 62


def _fill(
    b: Bin, items: Sequence[Item], cands: Sequence[int], remaining: Sequence[int], weights: Sequence[float]
) -> tuple[dict[int, int], Vec]:
    """One node's contents: largest-first by a weighted dot product with the room left.

    Each step takes the item that best lines up with what is still free on the node, so
    cpu-heavy and memory-heavy pods share a node instead of each stranding the other
    resource. Items are added in batches of a quarter of what fits, to keep it fast.
    `cands` are the items this bin admits and can hold one of.
    """
    c0, c1, c2 = b.cap
    room0, room1, room2 = c0, c1, c2
    counts: dict[int, int] = {}
    live = [i for i in cands if remaining[i] > 0]
    # Normalised, weighted requests are fixed per node; only the room changes.
    w0 = weights[0] / (c0 * c0) if c0 else 0.0
    w1 = weights[1] / (c1 * c1) if c1 else 0.0
    w2 = weights[2] / (c2 * c2) if c2 else 0.0
    reqs = {i: items[i].req for i in live}
    # What may still go on this node: the pods left, and no more than the item's per-node cap.
    left = {i: remaining[i] if items[i].per_node is None else min(remaining[i], items[i].per_node) for i in live}
    while live:
        best = -1
        best_score = -1.0
        best_fit = 0
        alive = []
        for i in live:
            q0, q1, q2 = reqs[i]
            fit = min(room0 // q0 if q0 else _BIG, room1 // q1 if q1 else _BIG, room2 // q2 if q2 else _BIG)
            if fit <= 0 or left[i] <= 0:
                continue
            alive.append(i)
            score = q0 * room0 * w0 + q1 * room1 * w1 + q2 * room2 * w2
            if score > best_score:
                best, best_score, best_fit = i, score, fit
        if best < 0:
            break
        live = alive
        # Batches of about a quarter of what still fits: few steps, balance mostly kept.
        n = min(left[best], max(1, best_fit // 4))
        q0, q1, q2 = reqs[best]
        room0 -= q0 * n
        room1 -= q1 * n
        room2 -= q2 * n
        left[best] -= n
        counts[best] = counts.get(best, 0) + n
    return counts, (c0 - room0, c1 - room1, c2 - room2)


def _cheapest_holding(bins: Sequence[Bin], used: Vec, allowed: frozenset[str], slots_needed: int) -> Bin | None:
    """The cheapest bin that can hold `used`, for shrinking a pattern's node after the fact."""
    best = None
    for b in bins:
        if b.key not in allowed or (b.slots is not None and b.slots < slots_needed):
            continue
        if used[0] <= b.cap[0] and used[1] <= b.cap[1] and used[2] <= b.cap[2]:
            if best is None or (b.price, b.key) < (best.price, best.key):
                best = b
    return best


# Fill balance: cpu and memory count fully, pod slots a little (they rarely bind).
WEIGHTS = (1.0, 1.0, 0.05)


def pack(
    items: Sequence[Item],
    bins: Sequence[Bin],
    budgets: Sequence[Budget] = (),
    price_budgets: Sequence[PriceBudget] = (),
) -> PackResult:
    """Place items' pods on new nodes of `bins` at low cost, within pool slots and budgets
    (node counts) and price budgets (money per hour: a bin is open only while one more of its
    nodes is affordable, and a pattern repeats only as often as the money allows).

    Loop: price each item standalone; for every open bin build one node's contents (largest
    first, balanced); take the bin whose node costs the smallest fraction of its pods' worth;
    shrink it to the cheapest bin that still holds those pods; repeat that node as often as
    counts, slots and budgets allow. Pods that cannot be placed are returned in `leftover`.
    """
    remaining = [it.count for it in items]
    result = PackResult()
    bins = list(bins)
    # Static facts, computed once: which items each bin admits and holds, and each item's
    # standalone price per bin (price / how many fit), cheapest first.
    holds: dict[str, list[int]] = {
        b.key: [i for i, it in enumerate(items) if b.key in it.bins and _per_node(it, b.cap) > 0] for b in bins
    }
    share_prices: list[list[tuple[float, str]]] = [[] for _ in items]
    for b in bins:
        for i in holds[b.key]:
            share = 1 / _per_node(items[i], b.cap)  # whole pods: a pod too big for two pays the node
            share_prices[i].append((b.price * share, b.key))
    for sp in share_prices:
        sp.sort()
    while True:
        budget_left = min((bg.left for bg in budgets if bg.left is not None), default=None)
        if budget_left is not None and budget_left <= 0:
            break
        open_bins = [
            b for b in bins if (b.slots is None or b.slots > 0) and all(pb.affords(b.price) for pb in price_budgets)
        ]
        open_keys = {b.key for b in open_bins}
        # Each item's standalone price among the bins still open.
        pi: list[float] = []
        placeable = False
        for i in range(len(items)):
            v = next((v for v, k in share_prices[i] if k in open_keys), None) if remaining[i] > 0 else None
            placeable = placeable or v is not None
            pi.append(v or 0.0)
        if not placeable:
            break
        best: tuple[float, float, str] | None = None
        best_fill: tuple[Bin, dict[int, int], Vec] | None = None
        for b in open_bins:
            counts, used = _fill(b, items, holds[b.key], remaining, WEIGHTS)
            if not counts:
                continue
            value = sum(pi[i] * n for i, n in counts.items())
            score = b.price / value if value > 0 else float("inf")
            rank = (score, -sum(counts.values()), b.key)
            if best is None or rank < best:
                best, best_fill = rank, (b, counts, used)
        if best_fill is None:
            break
        b, counts, used = best_fill
        repeat = min(remaining[i] // n for i, n in counts.items())
        if b.slots is not None:
            repeat = min(repeat, b.slots)
        if budget_left is not None:
            repeat = min(repeat, budget_left)
        for pb in price_budgets:
            affordable = pb.nodes_affordable(b.price)
            if affordable is not None:
                repeat = min(repeat, affordable)
        repeat = max(repeat, 1)
        allowed = frozenset.intersection(*(items[i].bins for i in counts))
        smaller = _cheapest_holding(open_bins, used, allowed, repeat)
        if smaller is not None and smaller.price < b.price:
            b = smaller
        for i, n in counts.items():
            remaining[i] -= n * repeat
        if b.slots is not None:
            b.slots -= repeat
        for bg in budgets:
            bg.take(repeat)
        for pb in price_budgets:
            pb.take(repeat, b.price)
        result.patterns.append(Pattern(bin=b.key, counts=counts, repeat=repeat, used=used))
    backfill(result, items, bins)
    result.leftover = {i: n for i, n in enumerate(remaining) if n > 0}
    return result


# --- backfill -------------------------------------------------------------------------------

# Nodes fuller than this are never emptied: moving their pods rarely frees a whole node.
BACKFILL_MAX_FILL = 0.6


def _fill_fraction(used: Vec, cap: Vec) -> float:
    return max(used[0] / cap[0] if cap[0] else 0.0, used[1] / cap[1] if cap[1] else 0.0)


@dataclass
class _Receiver:
    """A pattern's nodes while a donor's pods are tried on them: some taken (with extras)."""

    pattern: Pattern
    cap: Vec
    untouched: int  # nodes of the pattern without extra pods yet
    taken: list[tuple[dict[int, int], list[int]]] = field(default_factory=list)  # (extra, room)

    def room(self) -> list[int]:
        u = self.pattern.used
        return [self.cap[0] - u[0], self.cap[1] - u[1], self.cap[2] - u[2]]


def _place(req: Vec, n: int, item: int, receivers: Sequence[_Receiver], per_node: int | None = None) -> int:
    """Put up to `n` pods of `item` in the receivers' free room (nodes already taken first,
    then fresh ones), at most `per_node` of them on one node (anti-affinity, spread);
    returns how many did not fit."""

    def cap(r: _Receiver, extra: dict[int, int]) -> int:
        if per_node is None:
            return n
        return max(per_node - r.pattern.counts.get(item, 0) - extra.get(item, 0), 0)

    for r in receivers:
        for extra, room in r.taken:
            k = min(_fits(req, room), n, cap(r, extra))
            if k > 0:
                extra[item] = extra.get(item, 0) + k
                for d in range(3):
                    room[d] -= req[d] * k
                n -= k
            if n == 0:
                return 0
        while r.untouched > 0 and n > 0:
            room = r.room()
            k = min(_fits(req, room), n, cap(r, {}))
            if k <= 0:
                break
            r.untouched -= 1
            for d in range(3):
                room[d] -= req[d] * k
            r.taken.append(({item: k}, room))
            n -= k
        if n == 0:
            return 0
    return n


def backfill(result: PackResult, items: Sequence[Item], bins: Sequence[Bin]) -> int:
    """Empty lightly used new nodes into the free room of the others (Karpenter's
    consolidation, applied to the plan before anything is bought). Returns nodes dropped.

    Donors are taken emptiest first, one node at a time; a donor goes only if every one of
    its pods finds room on a node that admits it, and nodes that received pods are never
    emptied afterwards (no cycles)."""
    cap = {b.key: b.cap for b in bins}
    order = sorted(
        range(len(result.patterns)),
        key=lambda i: (_fill_fraction(result.patterns[i].used, cap[result.patterns[i].bin]), i),
    )
    dropped = 0
    received: set[int] = set()  # ids of patterns that took pods: they stay
    patterns = result.patterns
    for di in order:
        donor = patterns[di]
        if id(donor) in received or _fill_fraction(donor.used, cap[donor.bin]) > BACKFILL_MAX_FILL:
            continue
        while donor.repeat > 0:
            receivers = [
                _Receiver(pattern=p, cap=cap[p.bin], untouched=p.repeat - (1 if p is donor else 0))
                for p in sorted(patterns, key=lambda p: -_fill_fraction(p.used, cap[p.bin]))
                if p.repeat > 0 and (p is not donor or p.repeat > 1)
            ]
            ok = True
            for item, n in sorted(donor.counts.items(), key=lambda kv: -items[kv[0]].req[0]):
                allowed = [r for r in receivers if r.pattern.bin in items[item].bins]
                if _place(items[item].req, n, item, allowed, items[item].per_node) > 0:
                    ok = False
                    break
            if not ok:
                break
            # Commit: the donor loses a node; each taken receiver node becomes its own pattern.
            donor.repeat -= 1
            dropped += 1
            for r in receivers:
                for extra, room in r.taken:
                    counts = dict(r.pattern.counts)
                    for i, k in extra.items():
                        counts[i] = counts.get(i, 0) + k
                    used = (r.cap[0] - room[0], r.cap[1] - room[1], r.cap[2] - room[2])
                    grown = Pattern(bin=r.pattern.bin, counts=counts, repeat=1, used=used)
                    patterns.append(grown)
                    received.add(id(grown))
                    r.pattern.repeat -= 1
    result.patterns = [p for p in patterns if p.repeat > 0]
    return dropped
