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
win and neither resource is stranded.

That value packing is not cheapest on every workload (two pod sizes far apart, one size only):
`pack` also tries, for each type, its pods first-fit decreasing onto that type alone (what
Cluster Autoscaler buys when its expander picks that group) and Karpenter's launch (so never
dearer than that, by construction), improves the cheapest plans as Karpenter's consolidation
would (cheaper types, backfill, pair merges, partial moves to a cheaper type) and keeps the
cheapest. Measured on the bundled benchmark: within 5 % of the LP lower bound on the mixed
workload, never dearer than Cluster Autoscaler's price and least-waste choices or Karpenter's,
before or after consolidation, on any family (bench/plan_scale_up.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from scaling.kube.models import Vec, fit_count
from scaling.nodes.scale_up.money import PriceBudget


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


def _per_node(item: Item, cap: Vec) -> int:
    """How many of the item's pods one node of `cap` holds (its per-node cap included)."""
    n = fit_count(item.req, cap)
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


def _repeat_limit(
    b: Bin,
    counts: dict[int, int],
    remaining: Sequence[int],
    budget_left: int | None,
    price_budgets: Sequence[PriceBudget],
) -> int:
    """How often one node's contents may repeat: counts, the pool's slots, node budgets, money."""
    repeat = min(remaining[i] // n for i, n in counts.items())
    if b.slots is not None:
        repeat = min(repeat, b.slots)
    if budget_left is not None:
        repeat = min(repeat, budget_left)
    for pb in price_budgets:
        affordable = pb.nodes_affordable(b.price)
        if affordable is not None:
            repeat = min(repeat, affordable)
    return max(repeat, 1)


def _take(
    result: PackResult,
    b: Bin,
    counts: dict[int, int],
    used: Vec,
    repeat: int,
    remaining: list[int],
    budgets: Sequence[Budget],
    price_budgets: Sequence[PriceBudget],
) -> None:
    for i, n in counts.items():
        remaining[i] -= n * repeat
    if b.slots is not None:
        b.slots -= repeat
    for bg in budgets:
        bg.take(repeat)
    for pb in price_budgets:
        pb.take(repeat, b.price)
    result.patterns.append(Pattern(bin=b.key, counts=counts, repeat=repeat, used=used))


def _budget_left(budgets: Sequence[Budget]) -> int | None:
    return min((bg.left for bg in budgets if bg.left is not None), default=None)


def _nodes_needed(item: Item) -> int:
    """The fewest nodes a capped item's pods need (0 uncapped): among pods of one size, those
    needing the most nodes go first, so the others fill those nodes' room."""
    return 0 if item.per_node is None else -(-item.count // max(item.per_node, 1))


def _grown(
    counts: dict[int, int], room: list[int], item: int, req: Vec, k: int, m: int
) -> tuple[dict[int, int], list[int], int]:
    """`m` nodes like (`counts`, `room`) with `k` more pods of `item`."""
    grown = dict(counts)
    grown[item] = grown.get(item, 0) + k
    return grown, [room[0] - req[0] * k, room[1] - req[1] * k, room[2] - req[2] * k], m


def _first_type(
    start: Bin,
    items: Sequence[Item],
    remaining: list[int],
    budgets: Sequence[Budget],
    price_budgets: Sequence[PriceBudget],
) -> PackResult:
    """Every pod `start` holds onto nodes of `start` alone (what Cluster Autoscaler's estimator
    buys when its expander picks that group): first-fit decreasing across nodes, on counts, so
    pods capped per node spread over the nodes opened before the rest fill them. Each item (largest first; of one
    size, the capped ones needing the most nodes first) goes into every open node's room in turn, then
    into new nodes, within the pool's slots, the node budgets and the money. Nodes with the same
    contents become one pattern."""
    limits = [start.slots, _budget_left(budgets), *(pb.nodes_affordable(start.price) for pb in price_budgets)]
    if not all(pb.affords(start.price) for pb in price_budgets):
        return PackResult()
    most = min((n for n in limits if n is not None), default=None)
    order = sorted(
        (i for i, it in enumerate(items) if remaining[i] > 0 and start.key in it.bins),
        key=lambda i: (-(items[i].req[0] / start.cap[0] + items[i].req[1] / start.cap[1]), -_nodes_needed(items[i]), i),
    )
    # Runs of identical nodes (pods per item, room left, how many): an item fills a run's nodes
    # alike, so first-fit over 1,000 nodes walks a few dozen runs.
    nodes: list[tuple[dict[int, int], list[int], int]] = []
    opened = 0
    for i in order:
        req, cap, n = items[i].req, items[i].per_node, remaining[i]
        pos = 0
        while pos < len(nodes) and n > 0:
            counts, room, m = nodes[pos]
            k = min(n, fit_count(req, room), n if cap is None else cap - counts.get(i, 0))
            if k <= 0:
                pos += 1
                continue
            full = min(m, n // k)
            short = n - full * k if full < m else 0  # one node takes the last few
            parts = [_grown(counts, room, i, req, k, full)] if full else []
            if short:
                parts.append(_grown(counts, room, i, req, short, 1))
            if m - full - (1 if short else 0):
                parts.append((counts, room, m - full - (1 if short else 0)))
            n -= full * k + short
            nodes[pos : pos + 1] = parts
            pos += len(parts)
        k = min(n, fit_count(req, start.cap), n if cap is None else cap)
        if k <= 0:
            continue
        full, short = n // k, n % k
        if most is not None:
            full = min(full, most - opened)
            short = short if opened + full < most else 0
        for take, count in ((k, full), (short, 1 if short else 0)):
            if count > 0:
                nodes.append(_grown({}, list(start.cap), i, req, take, count))
                opened += count
    groups: dict[tuple[tuple[int, int], ...], list[int]] = {}
    repeats: dict[tuple[tuple[int, int], ...], int] = {}
    for counts, room, m in nodes:
        key = tuple(sorted(counts.items()))
        groups.setdefault(key, room)
        repeats[key] = repeats.get(key, 0) + m
    result = PackResult()
    for key, room in groups.items():
        used = (start.cap[0] - room[0], start.cap[1] - room[1], start.cap[2] - room[2])
        _take(result, start, dict(key), used, repeats[key], remaining, budgets, price_budgets)
    return result


# --- a Karpenter-like launch ----------------------------------------------------------------


@dataclass
class _Claim:
    """`nodes` identical node claims: their pods, the room they use and the bins (cheapest
    first) that still hold and admit all of them."""

    counts: dict[int, int]
    used: Vec
    options: list[Bin]
    nodes: int


def _claimed(c: _Claim | None, opts: Sequence[Bin], item: int, req: Vec, k: int, nodes: int) -> _Claim:
    """`nodes` claims like `c` (or new ones) holding `k` more pods of `item`, with the bins of
    `opts` that hold them."""
    counts = dict(c.counts) if c else {}
    counts[item] = counts.get(item, 0) + k
    base = c.used if c else (0, 0, 0)
    used = (base[0] + req[0] * k, base[1] + req[1] * k, base[2] + req[2] * k)
    held = [b for b in opts if used[0] <= b.cap[0] and used[1] <= b.cap[1] and used[2] <= b.cap[2]]
    return _Claim(counts=counts, used=used, options=held, nodes=nodes)


def _launch(
    items: Sequence[Item],
    bins: Sequence[Bin],
    budgets: Sequence[Budget],
    price_budgets: Sequence[PriceBudget],
    remaining: list[int],
) -> PackResult:
    """Karpenter's provisioning, on counts: pods largest first (by their share of the largest
    type) go into the first node claim that one of its types still holds, else into a new claim
    open to every type that holds one; each claim then launches as the cheapest type still
    holding it, within slots and budgets (what no type takes stays in `remaining`).

    Pod by pod, identical pods fill a claim until its roomiest remaining type is full (or the
    pod's per-node cap), so identical claims are kept as one with a count of nodes, and a dozen
    shapes of 30,000 pods make a few dozen claims. A plan built so is never dearer than
    Karpenter's launch, whatever the other strategies miss (two pods sizes far apart, caps)."""
    big0, big1 = max(b.cap[0] for b in bins), max(b.cap[1] for b in bins)
    order = sorted(
        (i for i, k in enumerate(remaining) if k > 0),
        key=lambda i: (-(items[i].req[0] / big0 + items[i].req[1] / big1), i),
    )
    by_price = sorted(bins, key=lambda b: (b.price, b.key))
    claims: list[_Claim] = []
    for i in order:
        it, n = items[i], remaining[i]
        req = it.req
        pos = 0
        while pos < len(claims) and n > 0:
            c = claims[pos]
            opts = [b for b in c.options if b.key in it.bins]
            room = max((fit_count(req, [b.cap[d] - c.used[d] for d in range(3)]) for b in opts), default=0)
            k = min(n, room, n if it.per_node is None else it.per_node - c.counts.get(i, 0))
            if k <= 0:
                pos += 1
                continue
            full = min(c.nodes, n // k)
            rest, short = c.nodes - full, n - full * k
            parts = [_claimed(c, opts, i, req, k, full)] if full else []
            if rest and short:
                parts.append(_claimed(c, opts, i, req, short, 1))
                rest -= 1
            else:
                short = 0
            if rest:
                parts.append(replace(c, nodes=rest))
            n -= full * k + short
            claims[pos : pos + 1] = parts
            pos += len(parts)
        opts = [b for b in by_price if b.key in it.bins]
        k = max((fit_count(req, b.cap) for b in opts), default=0)
        k = min(k, n if it.per_node is None else it.per_node)
        if n > 0 and k > 0:
            if n // k:
                claims.append(_claimed(None, opts, i, req, k, n // k))
            if n % k:
                claims.append(_claimed(None, opts, i, req, n % k, 1))
    result = PackResult()
    for c in claims:
        for b in c.options:
            limits = [c.nodes, b.slots, _budget_left(budgets), *(pb.nodes_affordable(b.price) for pb in price_budgets)]
            take = min(x for x in limits if x is not None)
            if take > 0:
                _take(result, b, dict(c.counts), c.used, take, remaining, budgets, price_budgets)
                c.nodes -= take
            if c.nodes == 0:
                break
    return result


def pack(
    items: Sequence[Item],
    bins: Sequence[Bin],
    budgets: Sequence[Budget] = (),
    price_budgets: Sequence[PriceBudget] = (),
) -> PackResult:
    """Place items' pods on new nodes of `bins` at low cost, within pool slots and budgets
    (node counts) and price budgets (money per hour: a bin is open only while one more of its
    nodes is affordable, and a pattern repeats only as often as the money allows).

    No one packing order is cheapest on every workload, so several are tried on copies of the
    limits: the value-scored packing (`_pack_by_value`), for each bin, its pods first-fit
    decreasing onto that bin alone with the rest packed by value, and Karpenter's launch
    (`_launch`). The cheapest plans are then improved (`improve`: cheaper types, backfill,
    merges, partial moves); the one placing the most pods at the least cost wins and spends the
    real limits. Pods that cannot be placed are in `leftover`.
    """
    parts = _components(items)
    unlimited = all(b.slots is None for b in bins) and all(bg.left is None for bg in budgets)
    if len(parts) > 1 and unlimited and all(pb.left is None for pb in price_budgets):
        # Pods that share no pool (one zone's share each) are packed apart: the strategies
        # then try each part's own types, not every zone's. Only without limits, which the
        # parts would otherwise have to share.
        result = PackResult()
        for part in parts:
            sub = pack(
                [items[i] for i in part],
                [b for b in bins if any(b.key in items[i].bins for i in part)],
            )
            for p in sub.patterns:
                result.patterns.append(replace(p, counts={part[i]: n for i, n in p.counts.items()}))
            result.leftover.update({part[i]: n for i, n in sub.leftover.items()})
        return result
    built: list[tuple[tuple[int, float, int], PackResult]] = []
    # None: by value; a bin: that bin first; True: Karpenter's launch.
    starts: list[Bin | bool | None] = [None, *_first_type_starts(bins, items), True]
    static = _value_facts(items, bins)
    for n, start in enumerate(starts):
        trial_bins = [replace(b) for b in bins]
        trial_budgets = [replace(bg) for bg in budgets]
        trial_prices = [replace(pb) for pb in price_budgets]
        remaining = [it.count for it in items]
        result = PackResult()
        if start is True:
            result = _launch(items, trial_bins, trial_budgets, trial_prices, remaining)
        elif isinstance(start, Bin):
            first = next(b for b in trial_bins if b.key == start.key)
            result = _first_type(first, items, remaining, trial_budgets, trial_prices)
        rest = _pack_by_value(items, trial_bins, trial_budgets, trial_prices, remaining, static)
        result.patterns.extend(rest.patterns)
        result.leftover = {i: k for i, k in enumerate(remaining) if k > 0}
        built.append((_rank(result, bins, n), result))
    # Improving is the costly part: only the few cheapest constructions get it.
    built.sort(key=lambda rr: rr[0])
    best: tuple[tuple[int, float, int], PackResult] | None = None
    for (_, _, n), result in built[:IMPROVE_BEST]:
        improve(result, items, bins)
        rank = _rank(result, bins, n)
        if best is None or rank < best[0]:
            best = (rank, result)
    assert best is not None
    result = best[1]
    _spend(result, bins, budgets, price_budgets)
    return result


def pack_apart(
    items: Sequence[Item],
    clashes: Sequence[frozenset[int]],
    bins: Sequence[Bin],
    budgets: Sequence[Budget] = (),
    price_budgets: Sequence[PriceBudget] = (),
) -> PackResult:
    """`pack` for items some of which may not share a node (`clashes[i]`: the items `i` may
    never sit beside: anti-affinity, host ports, an extended resource the packer counts per
    item only). Items are packed in parts that hold no clashing pair, then the parts share
    room: each node whose pods all fit the room of the others' nodes (beside nothing they clash
    with) is dropped, its limits given back. The scheduler sees one plan, not parts: a pod left
    on a node of its own while a node of another part has room for it would go there, and its
    own node would stay empty (a GPU workload's node, bought after the hostname anti-affine pod
    that missed the first GPU node's room got a small node of its own)."""
    parts = _apart(clashes)
    if len(parts) == 1:
        return pack(items, bins, budgets, price_budgets)
    result = PackResult()
    for part in parts:
        sub = pack([items[i] for i in part], bins, budgets, price_budgets)
        result.patterns += [replace(p, counts={part[i]: n for i, n in p.counts.items()}) for p in sub.patterns]
        result.leftover.update({part[i]: n for i, n in sub.leftover.items()})
    before = _nodes_on(result.patterns)
    # Every node may go, however full: the scheduler would leave it empty all the same.
    if backfill(result, items, bins, clashes, max_fill=1.0):
        after = _nodes_on(result.patterns)
        for b in bins:
            freed = before.get(b.key, 0) - after.get(b.key, 0)
            if b.slots is not None:
                b.slots += freed
            for bg in budgets:
                bg.take(-freed)
            for pb in price_budgets:
                pb.take(-freed, b.price)
    return result


def _apart(clashes: Sequence[frozenset[int]]) -> list[list[int]]:
    """Items in parts that hold no clashing pair, each into the first part it may join (one
    part in the common case)."""
    parts: list[list[int]] = []
    for i, apart in enumerate(clashes):
        for part in parts:
            if not apart.intersection(part):
                part.append(i)
                break
        else:
            parts.append([i])
    return parts


def _first_type_starts(bins: Sequence[Bin], items: Sequence[Item]) -> list[Bin]:
    """The bins to try each alone first: every bin some item may use, but one per (room,
    price): the same type in several zones, with pods free to use any zone, gives nearly the
    same plan from each, and trying each tripled an affinity-heavy plan's time over three zones.
    A single zone, or zone shares packed apart (_components), has no such twins."""
    seen: set[tuple[Vec, float]] = set()
    out = []
    for b in bins:
        if (b.cap, b.price) in seen or not any(b.key in it.bins for it in items):
            continue
        seen.add((b.cap, b.price))
        out.append(b)
    return out


def _components(items: Sequence[Item]) -> list[list[int]]:
    """Items grouped so that no two groups share a bin (each list in index order)."""
    parts: list[tuple[set[str], list[int]]] = []
    for i, it in enumerate(items):
        joined = [p for p in parts if p[0] & it.bins]
        keys, members = set(it.bins), [i]
        for p in joined:
            keys |= p[0]
            members += p[1]
            parts.remove(p)
        parts.append((keys, sorted(members)))
    return [m for _, m in parts]


# Constructed plans (cheapest first) that the improvement passes run on.
IMPROVE_BEST = 4


def _rank(result: PackResult, bins: Sequence[Bin], n: int) -> tuple[int, float, int]:
    """Most pods placed, then least cost, then the earlier strategy."""
    return (sum(result.leftover.values()), round(plan_price(result, bins), 9), n)


def plan_price(result: PackResult, bins: Sequence[Bin]) -> float:
    price = {b.key: b.price for b in bins}
    return sum(price[p.bin] * p.repeat for p in result.patterns)


def _spend(
    result: PackResult, bins: Sequence[Bin], budgets: Sequence[Budget], price_budgets: Sequence[PriceBudget]
) -> None:
    """Take the chosen plan's nodes from the real limits (shared with later tiers and groups)."""
    by_key = {b.key: b for b in bins}
    for p in result.patterns:
        b = by_key[p.bin]
        if b.slots is not None:
            b.slots -= p.repeat
        for bg in budgets:
            bg.take(p.repeat)
        for pb in price_budgets:
            pb.take(p.repeat, b.price)


def _value_facts(
    items: Sequence[Item], bins: Sequence[Bin]
) -> tuple[dict[str, list[int]], list[list[tuple[float, str]]]]:
    """Static facts of a packing, the same for every strategy tried: which items each bin admits
    and holds, and each item's standalone price per bin (price / how many fit), cheapest first."""
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
    return holds, share_prices


def _pack_by_value(
    items: Sequence[Item],
    bins: Sequence[Bin],
    budgets: Sequence[Budget],
    price_budgets: Sequence[PriceBudget],
    remaining: list[int],
    static: tuple[dict[str, list[int]], list[list[tuple[float, str]]]] | None = None,
) -> PackResult:
    """The value-scored packing: price each item standalone; for every open bin build one
    node's contents (largest first, balanced); take the bin whose node costs the smallest
    fraction of its pods' worth; shrink it to the cheapest bin that still holds those pods;
    repeat that node as often as counts, slots and budgets allow."""
    result = PackResult()
    bins = list(bins)
    holds, share_prices = static or _value_facts(items, bins)
    while True:
        budget_left = _budget_left(budgets)
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
        repeat = _repeat_limit(b, counts, remaining, budget_left, price_budgets)
        allowed = frozenset.intersection(*(items[i].bins for i in counts))
        smaller = _cheapest_holding(open_bins, used, allowed, repeat)
        if smaller is not None and smaller.price < b.price:
            b = smaller
        _take(result, b, counts, used, repeat, remaining, budgets, price_budgets)
    return result


# --- backfill -------------------------------------------------------------------------------

# Nodes fuller than this are never emptied: moving their pods rarely frees a whole node.
BACKFILL_MAX_FILL = 0.6
# Nodes tried per plan: each try walks every pattern, and a plan rarely has more light nodes.
BACKFILL_MAX_ATTEMPTS = 64


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


def _receivers(patterns: Sequence[Pattern], donor: Pattern, cap: dict[str, Vec]) -> list[_Receiver]:
    """Every pattern's nodes, fullest first, as room for one `donor` node's pods (that node
    itself excepted)."""
    return [
        _Receiver(pattern=p, cap=cap[p.bin], untouched=p.repeat - (1 if p is donor else 0))
        for p in sorted(patterns, key=lambda p: -_fill_fraction(p.used, cap[p.bin]))
        if p.repeat > 0 and (p is not donor or p.repeat > 1)
    ]


def _received(receivers: Sequence[_Receiver]) -> list[Pattern]:
    """Each receiver node that took pods, as a pattern of its own (its old pattern loses it)."""
    out = []
    for r in receivers:
        for extra, room in r.taken:
            counts = dict(r.pattern.counts)
            for i, k in extra.items():
                counts[i] = counts.get(i, 0) + k
            used = (r.cap[0] - room[0], r.cap[1] - room[1], r.cap[2] - room[2])
            out.append(Pattern(bin=r.pattern.bin, counts=counts, repeat=1, used=used))
            r.pattern.repeat -= 1
    return out


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
            k = min(fit_count(req, room), n, cap(r, extra))
            if k > 0:
                extra[item] = extra.get(item, 0) + k
                for d in range(3):
                    room[d] -= req[d] * k
                n -= k
            if n == 0:
                return 0
        while r.untouched > 0 and n > 0:
            room = r.room()
            k = min(fit_count(req, room), n, cap(r, {}))
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


def backfill(
    result: PackResult,
    items: Sequence[Item],
    bins: Sequence[Bin],
    clashes: Sequence[frozenset[int]] | None = None,
    max_fill: float = BACKFILL_MAX_FILL,
) -> int:
    """Empty lightly used new nodes into the free room of the others (Karpenter's
    consolidation, applied to the plan before anything is bought). Returns nodes dropped.

    Donors are taken emptiest first, one node at a time; a donor goes only if every one of
    its pods finds room on a node that admits it (and holds no item that `clashes[item]`
    names), and nodes that received pods are never emptied afterwards (no cycles)."""
    cap = {b.key: b.cap for b in bins}
    order = sorted(
        range(len(result.patterns)),
        key=lambda i: (_fill_fraction(result.patterns[i].used, cap[result.patterns[i].bin]), i),
    )
    dropped = attempts = 0
    received: set[int] = set()  # ids of patterns that took pods: they stay
    patterns = result.patterns
    for di in order:
        donor = patterns[di]
        if id(donor) in received or _fill_fraction(donor.used, cap[donor.bin]) > max_fill:
            continue
        while donor.repeat > 0 and attempts < BACKFILL_MAX_ATTEMPTS:
            attempts += 1
            receivers = _receivers(patterns, donor, cap)
            ok = True
            for item, n in sorted(donor.counts.items(), key=lambda kv: -items[kv[0]].req[0]):
                apart = clashes[item] if clashes else frozenset()
                allowed = [
                    r
                    for r in receivers
                    if r.pattern.bin in items[item].bins and not (apart and apart.intersection(r.pattern.counts))
                ]
                if _place(items[item].req, n, item, allowed, items[item].per_node) > 0:
                    ok = False
                    break
            if not ok:
                break
            # Commit: the donor loses a node; each taken receiver node becomes its own pattern.
            donor.repeat -= 1
            dropped += 1
            for grown in _received(receivers):
                patterns.append(grown)
                received.add(id(grown))
    result.patterns = [p for p in patterns if p.repeat > 0]
    return dropped


# Node-and-type tries per plan for `downsize` (each walks every pattern).
DOWNSIZE_MAX_TRIES = 96


def _unload(
    donor: Pattern, target: Bin | None, patterns: Sequence[Pattern], items: Sequence[Item], cap: dict[str, Vec]
) -> tuple[dict[int, int], Vec, list[_Receiver]] | None:
    """Moves that leave one node of `donor` holding only what `target` admits and holds (None:
    nothing): pods the target does not admit go first, then the largest, only as many as needed.
    Returns the pods that stay, their use and the receivers with their extra pods; None if the
    others' free room is short."""
    stay, used = dict(donor.counts), list(donor.used)
    room = target.cap if target else (0, 0, 0)
    free = [0, 0, 0]
    for p in patterns:
        n = p.repeat - (1 if p is donor else 0)
        for d in range(3):
            free[d] += (cap[p.bin][d] - p.used[d]) * n
    if any(used[d] - room[d] > free[d] for d in range(3)):
        return None  # even all the others' room together would not do
    receivers = _receivers(patterns, donor, cap)
    order = sorted(stay, key=lambda i: (target is None or target.key in items[i].bins, -sum(items[i].req[:2]), i))
    for i in order:
        req = items[i].req
        if target is None or target.key not in items[i].bins:
            k = stay[i]
        else:
            over = [-(-(used[d] - room[d]) // req[d]) for d in range(3) if used[d] > room[d] and req[d] > 0]
            k = min(stay[i], max(over, default=0))
        if k <= 0:
            continue
        # Nodes whose own pods leave no room or reach the cap never take one: skipped up front.
        cap_i = items[i].per_node
        allowed = [
            r
            for r in receivers
            if r.pattern.bin in items[i].bins
            and (cap_i is None or r.pattern.counts.get(i, 0) < cap_i)
            and fit_count(req, r.room()) > 0
        ]
        k -= _place(req, k, i, allowed, cap_i)
        if k == 0:
            continue
        stay[i] -= k
        for d in range(3):
            used[d] -= req[d] * k
    if any(n > 0 for i, n in stay.items() if target is None or target.key not in items[i].bins):
        return None
    if any(used[d] > room[d] for d in range(3)):
        return None
    return {i: n for i, n in stay.items() if n > 0}, (used[0], used[1], used[2]), receivers


def downsize(result: PackResult, items: Sequence[Item], bins: Sequence[Bin]) -> int:
    """Single-node consolidation with moves: some of a node's pods go into the other nodes'
    free room, so that what stays fits a cheaper type (or nothing is left). Karpenter's
    single-node consolidation schedules a candidate's pods onto the rest of the cluster and the
    rest onto one cheaper node; `backfill` (all pods move) and `shrink` (none) are its two ends,
    and a node too full for backfill may still drop to a cheaper type when a few pods move.
    Dearest nodes first, cheapest replacement first. Returns nodes replaced or removed."""
    price = {b.key: b.price for b in bins}
    cap = {b.key: b.cap for b in bins}
    by_price = sorted(bins, key=lambda b: (b.price, b.key))
    changed = tries = 0
    for donor in sorted(result.patterns, key=lambda p: -price[p.bin]):
        while donor.repeat > 0 and tries < DOWNSIZE_MAX_TRIES:
            on = _nodes_on(result.patterns)
            targets: list[Bin | None] = [None]
            for b in by_price:
                free = _free_slots(b, on)
                if b.price < price[donor.bin] and (free is None or free > 0):
                    targets.append(b)
            done = None
            for t in targets:
                tries += 1
                done = _unload(donor, t, result.patterns, items, cap)
                if done is not None or tries >= DOWNSIZE_MAX_TRIES:
                    break
            if done is None:
                break
            stay, used, receivers = done
            donor.repeat -= 1
            changed += 1
            if stay:
                result.patterns.append(Pattern(bin=t.key, counts=stay, repeat=1, used=used))  # type: ignore[union-attr]
            result.patterns.extend(_received(receivers))
    result.patterns = [p for p in result.patterns if p.repeat > 0]
    return changed


# --- improvement: Karpenter's consolidation methods, on the plan before anything is bought --


def _allowed(p: Pattern, items: Sequence[Item]) -> frozenset[str]:
    return frozenset.intersection(*(items[i].bins for i in p.counts))


def _nodes_on(patterns: Sequence[Pattern]) -> dict[str, int]:
    on: dict[str, int] = {}
    for p in patterns:
        on[p.bin] = on.get(p.bin, 0) + p.repeat
    return on


def _free_slots(b: Bin, on: dict[str, int]) -> int | None:
    return None if b.slots is None else b.slots - on.get(b.key, 0)


def shrink(result: PackResult, items: Sequence[Item], bins: Sequence[Bin]) -> int:
    """Single-node replacement: each node moves to the cheapest bin that admits and holds its
    pods, where that bin has slots left (`bins` carry the slots before this plan). Returns
    nodes moved."""
    price = {b.key: b.price for b in bins}
    on = _nodes_on(result.patterns)
    moved = 0
    for p in result.patterns:
        allowed = _allowed(p, items)
        best = None
        for b in bins:
            free = _free_slots(b, on)
            if b.key not in allowed or (free is not None and free < p.repeat) or b.price >= price[p.bin]:
                continue
            if all(u <= c for u, c in zip(p.used, b.cap)) and (
                best is None or (b.price, b.key) < (best.price, best.key)
            ):
                best = b
        if best is not None:
            on[p.bin] -= p.repeat
            on[best.key] = on.get(best.key, 0) + p.repeat
            p.bin = best.key
            moved += p.repeat
    return moved


# Merges look at this many of the emptiest patterns (pairs: quadratic), for at most this
# many rounds (each merges one pair's nodes).
MERGE_CANDIDATES = 40
MERGE_ROUNDS = 32


def merge(result: PackResult, items: Sequence[Item], bins: Sequence[Bin]) -> int:
    """Multi-node replacement: two nodes whose pods one cheaper node holds become that node
    (most money saved first, until no pair saves). Returns nodes saved."""
    price = {b.key: b.price for b in bins}
    cap = {b.key: b.cap for b in bins}
    envelope = tuple(max(b.cap[d] for b in bins) for d in range(3))
    saved_nodes = 0
    for _ in range(MERGE_ROUNDS):
        on = _nodes_on(result.patterns)
        pats = sorted((p for p in result.patterns if p.repeat > 0), key=lambda p: _fill_fraction(p.used, cap[p.bin]))[
            :MERGE_CANDIDATES
        ]
        best: tuple[float, int, int, Bin, int] | None = None
        # Per round: each pattern's allowed bins, and the bins of each allowed set cheapest
        # first (an affinity-heavy plan over three zones spent most of merge recomputing them).
        allowed_of = [_allowed(p, items) for p in pats]
        by_allowed: dict[frozenset[str], list[Bin]] = {}
        for a in range(len(pats)):
            for c in range(a, len(pats)):
                pa, pc = pats[a], pats[c]
                k = pa.repeat // 2 if a == c else min(pa.repeat, pc.repeat)
                if k <= 0:
                    continue
                u0, u1, u2 = pa.used[0] + pc.used[0], pa.used[1] + pc.used[1], pa.used[2] + pc.used[2]
                if u0 > envelope[0] or u1 > envelope[1] or u2 > envelope[2]:
                    continue
                if any(
                    items[i].per_node is not None and pa.counts.get(i, 0) + pc.counts.get(i, 0) > items[i].per_node
                    for i in set(pa.counts) | set(pc.counts)
                ):
                    continue
                allowed = allowed_of[a] & allowed_of[c]
                candidates = by_allowed.get(allowed)
                if candidates is None:
                    candidates = by_allowed[allowed] = [b for b in bins if b.key in allowed]
                for b in candidates:
                    if u0 > b.cap[0] or u1 > b.cap[1] or u2 > b.cap[2]:
                        continue
                    gain = price[pa.bin] + price[pc.bin] - b.price
                    if gain <= 1e-12:
                        continue
                    free = _free_slots(b, on)
                    # The merged nodes free their old slots only afterwards: be conservative.
                    n = k if free is None else min(k, free)
                    if n > 0 and (best is None or gain * n > best[0]):
                        best = (gain * n, a, c, b, n)
        if best is None:
            break
        _, a, c, b, n = best
        pa, pc = pats[a], pats[c]
        counts = dict(pa.counts)
        for i, k in pc.counts.items():
            counts[i] = counts.get(i, 0) + k
        used = (pa.used[0] + pc.used[0], pa.used[1] + pc.used[1], pa.used[2] + pc.used[2])
        pa.repeat -= n * (2 if a == c else 1)
        if a != c:
            pc.repeat -= n
        result.patterns = [p for p in result.patterns if p.repeat > 0]
        result.patterns.append(Pattern(bin=b.key, counts=counts, repeat=n, used=used))
        saved_nodes += n
    return saved_nodes


def improve(result: PackResult, items: Sequence[Item], bins: Sequence[Bin]) -> None:
    """Consolidate a plan as Karpenter would after launch: cheaper types for nodes that allow
    one, emptying light nodes into others' room (backfill), merging pairs into one cheaper
    node, moving some pods so that a node fits a cheaper type (`downsize`), and cheaper types
    again for what changed."""
    shrink(result, items, bins)
    backfill(result, items, bins)
    merge(result, items, bins)
    downsize(result, items, bins)
    shrink(result, items, bins)
