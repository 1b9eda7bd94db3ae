"""The scale-up planner: unschedulable pods in, new nodes (with fallback pools) out.

Steps, each on groups of identical pods ("shapes", scaling.nodes.scale_up.demand) so 30,000 replicas
cost what a dozen do:
  a. pods that fit the free room of Ready, schedulable nodes are left to the scheduler (the
     observer settles them: plan_demand starts from what is left);
  b. pods an in-flight NodeRequest was made for, or that fit its spare room, are covered;
  c. the rest are matched to exactly one node group (ambiguity and no match are problems) by
     labels and taints, and within it to the pools whose next node every scheduler filter
     admits (scaling.nodes.scale_up.claims; a pod no pool admits is NeverSatisfiable in the
     scheduler's words); pod affinity among planned pods first (scaling.nodes.scale_up.pod_affinity);
  d. per group, pods go to the highest-priority tier with a type that can hold them, packed
     at least cost (scaling.nodes.scale_up.packing) within per-pool, per-group and cluster node limits;
     a shape with hostname anti-affinity or spread puts at most its limit on each new node;
     shapes that clash (hostname anti-affinity either way, host ports, one extended resource)
     never share a new node, and a node whose pods fit the room of the plan's other nodes
     is not bought (packing.pack_apart: the scheduler would leave it empty);
  e. pods no type of any matching pool can hold are NeverSatisfiable; pods left over when
     limits run out are MaxNodesReached (NoAvailablePool when only pools in backoff could),
     or PriceLimitReached when a money cap stopped them (scaling.nodes.scale_up.money).
Before b, a shape with zone or region spread is shared out over the domains its pools reach
(split_by_topology); pods no domain may take are TopologySpread problems, and pods the room of
their domain's Ready nodes holds (kept off it by the skew for now) fit existing nodes.

`unavailable_pools` holds (group, pool name) pairs or (provider, server type) pairs: both
forms are accepted, so a provider-wide backoff of one type can be passed as it is.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field

from scaling.kube.affinity import per_node_cap
from scaling.kube.models import (
    LABEL_HOSTNAME,
    NodeInfo,
    NodeSelectorTerm,
    PodInfo,
    Resources,
    Toleration,
    Vec,
    fit_count,
    vec,
)
from scaling.kube.pods import TERMINAL_PHASES
from scaling.kube.quantity import format_cpu, format_memory
from scaling.kube.scheduling.cluster import Cluster
from scaling.kube.scheduling.interpodaffinity import AFFINITY
from scaling.kube.scheduling.placed import hostname_cap
from scaling.kube.scheduling.podtopologyspread import REASON as SPREAD_REASON
from scaling.kube.scheduling.volumes import Volumes
from scaling.nodes.matching import eligible_pools, labels_admit, node_allocatable, node_labels_for, tolerates
from scaling.nodes.models import (
    InFlightRequest,
    NodeGroup,
    PlannedNode,
    PodProblem,
    Pool,
    ScaleUpPlan,
    ServerType,
    is_unavailable,
)
from scaling.nodes.nodegroups import flatten_pools, priority_tiers
from scaling.nodes.scale_up.claims import (
    admitting,
    claim_node,
    describe_refusals,
    extended_per_node,
    filtered,
    refusal,
)
from scaling.nodes.scale_up.daemonsets import daemonset_overhead, room_for_pods
from scaling.nodes.scale_up.demand import NodeTally, PendingDemand, PodRef, PodShape, observe_demand
from scaling.nodes.scale_up.extended import may_overflow
from scaling.nodes.scale_up.money import (
    PRICE_LIMIT_REACHED,
    PriceBudget,
    blocking_caps,
    cluster_price_budget,
    group_price_budget,
    within_price_caps,
)
from scaling.nodes.scale_up.packing import Bin, Budget, Item, pack_apart
from scaling.nodes.scale_up.pod_affinity import split_by_pod_affinity
from scaling.nodes.scale_up.scoring_order import follow_scoring
from scaling.nodes.scale_up.topology import base_key, reachable_domains, share_key, share_out

Catalogue = Mapping[tuple[str, str], ServerType]


@dataclass
class _Shape:
    """Pending pods the planner cannot tell apart: `count` of them, the first of which are named."""

    key: str
    req: tuple[int, int, int]
    node_selector: dict[str, str]
    tolerations: tuple[Toleration, ...]
    node_affinity: tuple[NodeSelectorTerm, ...]
    count: int
    pods: list[PodRef]  # the first pods of the shape (all of them in-process, a sample observed)
    cap: int | None = None  # at most this many per new node (hostname anti-affinity, spread, ports)
    taken: int = 0  # pods at the front already placed or reported
    eligible: dict[str, list[Pool]] = field(default_factory=dict)  # group -> pools admitting it
    src: PodShape | None = None  # the observed shape: what the filters read
    # Pods that go on one node together (a self-affine group's first pods): the packer sees
    # one item of `together` pods; `count` and `taken` count such items.
    together: int = 1

    @property
    def left(self) -> int:
        return self.count - self.taken

    def take(self, n: int) -> list[PodRef]:
        """Place or report `n` more items; returns the named pods among them."""
        out = self.pods[self.taken * self.together : (self.taken + n) * self.together]
        self.taken += n
        return out

    @property
    def conflicts(self) -> frozenset[str]:
        return frozenset(self.src.conflicts) if self.src is not None else frozenset()

    def admits(self, labels: Mapping[str, str], taints: Sequence, node_name: str = "") -> bool:
        return labels_admit(self.node_selector, self.node_affinity, labels, node_name) and tolerates(
            self.tolerations, taints
        )


def _shapes(demand: Sequence[PodShape], together: Mapping[str, int] | None = None) -> list[_Shape]:
    out = []
    for d in demand:
        if d.count <= 0:
            continue
        caps = [c for c in (per_node_cap(d.spreads), hostname_cap(d, d.scheduling)) if c is not None]
        k = (together or {}).get(d.key, 1)
        out.append(
            _Shape(
                key=d.key,
                req=tuple(q * k for q in vec(d.requests)),  # type: ignore[arg-type]
                node_selector=dict(d.node_selector),
                tolerations=tuple(d.tolerations),
                node_affinity=tuple(d.node_affinity),
                count=d.count // k,
                pods=list(d.pods),
                cap=min(caps) if caps else None,
                src=d,
                together=k,
            )
        )
    return out


def split_by_topology(
    demand: Sequence[PodShape], groups: Sequence[NodeGroup], catalogue: Catalogue
) -> tuple[list[PodShape], list[tuple[PodShape, str]], list[PodShape]]:
    """Zone/region spread: each such shape becomes one share per domain its pools can add nodes
    in (scaling.nodes.scale_up.topology.share_out), restricted to that domain by a node selector and
    keyed "<key>@<domain>" so in-flight requests keep covering it. A share goes first to the
    room the domain's Ready nodes still hold for it (PodShape.domain_room): the scheduler puts
    those pods there once the skew allows, and share_out sends pods to that room whenever the
    skew admits them there. Returns the shapes to plan, the pods no domain may
    take (with why) and the pods that wait for that room."""
    out: list[PodShape] = []
    blocked: list[tuple[PodShape, str]] = []
    waiting: list[PodShape] = []
    for d in demand:
        if not d.topology_spreads or d.count <= 0:
            out.append(d)
            continue
        spread = d.topology_spreads[0]
        counts = d.domain_counts[0] if d.domain_counts else {}
        reachable = reachable_domains(spread.key, d.node_selector, d.tolerations, d.node_affinity, groups, catalogue)
        if not reachable and not any(
            eligible_pools(d.node_selector, list(d.tolerations), g, catalogue, node_affinity=d.node_affinity)
            for g in groups
        ):
            out.append(d)  # no group admits it at all: the planner says so (NoMatchingNodeGroup)
            continue
        room = d.domain_room[0] if d.domain_room else {}
        share, left = share_out(counts, reachable, d.count, spread, room)
        if d.scheduling is not None and d.scheduling.spread is not None:
            # The shares already keep this constraint's skew, counting the pods planned in the
            # other domains; the filter on a planned node would count only the running ones.
            d = d.model_copy(
                update={
                    "scheduling": d.scheduling.model_copy(update={"spread": d.scheduling.spread.dropping(spread.key)})
                }
            )
        pods = list(d.pods)
        for domain, n in sorted(share.items()):
            held = min(n, room.get(domain, 0))
            if held:
                waiting.append(d.model_copy(update={"count": held, "pods": pods[:held]}))
                del pods[:held]
                n -= held
            if n == 0:
                continue
            out.append(
                d.model_copy(
                    update={
                        "key": share_key(d.key, domain),
                        "node_selector": {**d.node_selector, spread.key: domain},
                        "count": n,
                        "pods": pods[:n],
                    }
                )
            )
            del pods[:n]
        if left:
            where = f"{SPREAD_REASON}: {spread.key} spread (maxSkew {spread.max_skew}, pods per domain {dict(sorted(counts.items()))})"
            if reachable:
                msg = f"{where}: the least loaded domain is one no matching pool adds nodes in (pools reach {', '.join(sorted(reachable))})"
            else:
                msg = f"{where}: no matching pool's nodes carry the label {spread.key}"
            blocked.append((d.model_copy(update={"count": left, "pods": pods}), msg))
    return out, blocked, waiting


def _usable_type(pool: Pool, catalogue: Catalogue) -> ServerType | None:
    t = catalogue.get((pool.provider, pool.server_type.lower()))
    return None if t is None or t.deprecated else t


def fallback_candidates(
    group: NodeGroup,
    chosen: Pool,
    requirements: Resources,
    catalogue: Catalogue,
    unavailable: Collection[tuple[str, str]] = (),
    *,
    allowed: Collection[str] | None = None,
    room: Mapping[str, Resources] | None = None,
) -> list[Pool]:
    """The pools a NodeRequest tries, in order: `chosen`, then the rest of its tier cheapest
    first, then lower tiers (priority descending, cheapest first within each).

    Only pools whose type is known, not deprecated and can hold `requirements`; `unavailable`
    pools are left out; `allowed` (pool names) narrows to pools whose labels the pods accept;
    `room` (pool name -> room for pods, after DaemonSets) replaces a type's allocatable.
    """

    def ok(p: Pool) -> ServerType | None:
        t = _usable_type(p, catalogue)
        if t is None or not requirements.fits_in((room or {}).get(p.name, t.allocatable)):
            return None
        if is_unavailable(p, unavailable) or (allowed is not None and p.name not in allowed):
            return None
        return t

    out: list[Pool] = [chosen] if ok(chosen) else []
    for tier in priority_tiers(flatten_pools(group)):
        if tier[0].priority > chosen.priority:
            continue
        priced = [(t.price_hourly, p.name, p) for p in tier if p.name != chosen.name and (t := ok(p))]
        out.extend(p for _, _, p in sorted(priced, key=lambda x: (x[0], x[1])))
    return out


def _problems(shape: _Shape, reason: str, message: str) -> list[PodProblem]:
    """Report every pod of `shape` still left: one problem per named pod, the unnamed rest
    counted on the last one."""
    n = shape.left
    named = shape.take(n)
    if not named:
        return []
    out = [
        PodProblem(
            namespace=p.namespace, name=p.name, uid=p.uid, key=base_key(shape.key), reason=reason, message=message
        )
        for p in named
    ]
    out[-1].count += n - len(named)
    return out


def _describe(req: tuple[int, int, int]) -> str:
    return f"cpu={format_cpu(req[0])} memory={format_memory(req[1])} pods={req[2]}"


def _pool_room(group: NodeGroup, pool: Pool, t: ServerType, daemonsets: Sequence[PodShape]) -> Resources:
    """Room for pending pods on a new node of `pool`: allocatable (the pool's own resources
    included) less its DaemonSets."""
    alloc = node_allocatable(pool, t)
    if not daemonsets:
        return alloc
    overhead = daemonset_overhead(daemonsets, node_labels_for(group, pool, t), group.template_taints)
    return room_for_pods(alloc, overhead)


def _covered_in_flight(
    shapes: list[_Shape],
    in_flight: Sequence[InFlightRequest],
    groups: Mapping[str, NodeGroup],
    catalogue: Catalogue,
    daemonsets: Sequence[PodShape] = (),
    claims: Mapping[str, Mapping[str, NodeInfo]] | None = None,
) -> tuple[int, list[str]]:
    """Step b: pods a request was made for (counted per shape; by uid for requests recorded
    before shapes), then pods that fit a request's spare room where every filter admits them
    on its node and none of the shapes it was made for repels them. Returns how many, and the
    named ones."""
    made_for: Counter[str] = Counter()
    assigned: set[str] = set()
    for r in in_flight:
        if r.successor:
            continue  # made for pods that run elsewhere (InFlightRequest.successor)
        if r.pods:
            made_for.update(r.pods)
        else:
            assigned.update(r.pod_uids)
    covered, out = 0, []

    def cover(s: _Shape, n: int) -> None:
        nonlocal covered
        covered += n * s.together
        out.extend(p.uid for p in s.take(n))

    for s in shapes:
        cover(s, min(s.left, made_for[s.key] // s.together))
        if assigned:
            rest = s.pods[s.taken :]
            hit = [p for p in rest if p.uid in assigned]
            if hit:
                s.pods[s.taken :] = hit + [p for p in rest if p.uid not in assigned]
                cover(s, min(len(hit), s.left))
    # Up to 1,500 requests, most of the same few pools: a pool's node (labels, room) and which
    # shapes it admits are worked out once; shapes with nothing left are not looked at again.
    nodes: dict[tuple[str, str, str, str], tuple[Vec, list[tuple[_Shape, bool]]] | None] = {}
    for r in in_flight:
        if not any(s.left > 0 for s in shapes):
            break
        where = (r.group, r.pool, r.provider, r.server_type.lower())
        if where not in nodes:
            nodes[where] = _in_flight_node(shapes, groups.get(r.group), r.pool, catalogue.get(where[2:]), daemonsets)
        node = nodes[where]
        if node is None:
            continue  # without its group's labels we cannot tell which pods its node admits
        base, admitted = node
        room = [c - q for c, q in zip(base, vec(r.requirements), strict=True)]
        claim = (claims or {}).get(r.group, {}).get(r.pool)
        for s, admits in admitted:
            if s.left <= 0 or not admits or s.together > 1:
                continue
            if s.src is not None and filtered(s.src):
                # Spare room by cpu and memory only: a shape with extended resources waits for
                # the node rather than being counted into room it may not have.
                if claim is None or s.src.requests.extended or refusal(s.src, claim) is not None:
                    continue
            if s.conflicts & set(r.pods):
                continue
            n = min(fit_count(s.req, room), s.left)
            if s.cap is not None:  # its node holds the pods it was made for, and takes cap in all
                n = min(n, s.cap - r.pods.get(s.key, 0))
            if n <= 0:
                continue
            for i in range(3):
                room[i] -= s.req[i] * n
            cover(s, n)
    return covered, out


def _in_flight_node(
    shapes: list[_Shape],
    group: NodeGroup | None,
    pool_name: str,
    stype: ServerType | None,
    daemonsets: Sequence[PodShape],
) -> tuple[Vec, list[tuple[_Shape, bool]]] | None:
    """An in-flight request's node as the planner sees it: its room for pods before the pods it
    was made for, and whether it admits each shape; None when its group, pool or type is gone."""
    if group is None or stype is None:
        return None
    pool = next((p for p in flatten_pools(group) if p.name == pool_name), None)
    if pool is None:
        return None
    labels = node_labels_for(group, pool, stype)
    return vec(_pool_room(group, pool, stype, daemonsets)), [
        (s, s.admits(labels, group.template_taints)) for s in shapes
    ]


def _node_counts(tally: NodeTally, in_flight: Sequence[InFlightRequest]) -> tuple[dict, dict]:
    per_pool: dict[tuple[str, str], int] = defaultdict(int)
    per_group: dict[str, int] = defaultdict(int)
    for c in tally.groups:
        per_group[c.group] += c.count
        if c.pool:
            per_pool[(c.group, c.pool)] += c.count
    for r in in_flight:
        per_group[r.group] += 1
        per_pool[(r.group, r.pool)] += 1
    return per_pool, per_group


def _per_node(s: _Shape, names: frozenset[str], rooms: Mapping[str, Resources]) -> int | None:
    """Pods of the shape on one new node: its own cap, and what the extended resources of the
    smallest admitting type hold (the packer counts cpu, memory and pod slots only)."""
    caps = [] if s.cap is None else [s.cap]
    if s.src is not None and s.src.requests.extended:
        caps.append(min((extended_per_node(s.src.requests, rooms[n]) or 0) // s.together for n in names if n in rooms))
    return min(caps) if caps else None


def _clashes(owners: Sequence[_Shape], items: Sequence[Item], rooms: Mapping[str, Resources]) -> list[frozenset[int]]:
    """For each shape, the shapes it may not share a planned node with: anti-affinity on the
    hostname either way, clashing host ports, or an extended resource both ask for where,
    together, they could ask a node of one of `rooms`' pools for more than it has
    (scaling.nodes.scale_up.extended). All empty in the common case."""
    by_base: dict[str, list[int]] = defaultdict(list)
    by_resource: dict[str, list[tuple[int, int]]] = defaultdict(list)  # name -> (shape, amount per item)
    for i, s in enumerate(owners):
        by_base[base_key(s.key)].append(i)
        for k, q in s.src.requests.extended if s.src is not None else ():
            by_resource[k].append((i, q * s.together))
    out: list[set[int]] = [set() for _ in owners]
    for i, s in enumerate(owners):
        for c in s.conflicts:
            for j in by_base.get(c, ()):
                out[i].add(j)
                out[j].add(i)
    for name, users in by_resource.items():
        for pool, room in rooms.items() if len(users) > 1 else ():
            on = [(i, q) for i, q in users if pool in items[i].bins]
            asks = [(items[i].req, _most_per_node(items[i]), q) for i, q in on]
            if len(on) > 1 and may_overflow(asks, vec(room), room.amount(name)):
                for i, _ in on:
                    out[i].update(j for j, _ in on if j != i)
    return [frozenset(c) for c in out]


def _most_per_node(item: Item) -> int:
    return item.count if item.per_node is None else min(item.count, item.per_node)


def _requirements(items: Sequence[Item], owners: Sequence[_Shape], counts: Mapping[int, int]) -> Resources:
    extended: Counter[str] = Counter()
    for i, n in counts.items():
        src = owners[i].src
        for k, q in src.requests.extended if src is not None else ():
            extended[k] += q * n * owners[i].together
    return Resources(
        cpu_m=sum(items[i].req[0] * n for i, n in counts.items()),
        memory=sum(items[i].req[1] * n for i, n in counts.items()),
        pods=sum(items[i].req[2] * n for i, n in counts.items()),
        extended=tuple(sorted(extended.items())),
    )


def _label_pools(d: PodShape, g: NodeGroup, catalogue: Catalogue, flat: Mapping[str, list[Pool]]) -> list[Pool]:
    """The group's pools whose next node's labels and taints admit the shape."""
    return eligible_pools(
        d.node_selector, list(d.tolerations), g, catalogue, flat[g.name], node_affinity=d.node_affinity
    )


def _claim_nodes(
    groups: Sequence[NodeGroup], flat: Mapping[str, list[Pool]], catalogue: Catalogue, daemonsets: Sequence[PodShape]
) -> dict[str, dict[str, NodeInfo]]:
    """Each pool's next node as the filters see it (scaling.nodes.scale_up.claims)."""
    out: dict[str, dict[str, NodeInfo]] = {}
    for g in groups:
        out[g.name] = {}
        for p in flat[g.name]:
            t = _usable_type(p, catalogue)
            if t is not None:
                out[g.name][p.name] = claim_node(g, p, t, _pool_room(g, p, t, daemonsets))
    return out


def _together_size(
    d: PodShape,
    groups: Sequence[NodeGroup],
    catalogue: Catalogue,
    flat: Mapping[str, list[Pool]],
    claims: Mapping[str, Mapping[str, NodeInfo]],
) -> int:
    """How many of a self-affine group's first pods one node of an admitting pool holds."""
    best = 0
    for g in groups:
        for p in admitting(d, _label_pools(d, g, catalogue, flat), claims[g.name])[0]:
            room = claims[g.name][p.name].allocatable
            n = fit_count(vec(d.requests), vec(room))
            ext = extended_per_node(d.requests, room)
            best = max(best, n if ext is None else min(n, ext))
    return min(best, d.count)


def _largest(rooms: Sequence[tuple[Pool, Resources]], daemonsets: bool) -> str:
    if not rooms:
        return "no pool has a known, current server type"
    pool, r = max(rooms, key=lambda pr: (pr[1].cpu_m, pr[1].memory, pr[0].name))
    what = "room for pods after DaemonSets" if daemonsets else "allocatable"
    return f"the largest type is {pool.name} ({what} {_describe(vec(r))})"


def plan_scale_up(
    pods: Sequence[PodInfo],
    nodes: Sequence[NodeInfo],
    groups: Sequence[NodeGroup],
    catalogue: Catalogue,
    in_flight: Sequence[InFlightRequest],
    *,
    max_nodes_total: int | None = None,
    unavailable_pools: Collection[tuple[str, str]] = (),
    max_price_per_hour_total: float | None = None,
    namespaces: Mapping[str, Mapping[str, str]] | None = None,
    volumes: Volumes | None = None,
    settle_order: Callable[[PodShape], tuple[float | str, ...]] | None = None,
) -> ScaleUpPlan:
    """The plan for these pods and nodes (every pod named): observe_demand, then plan_demand.

    `pods` bound to a node (node_name set) are the running pods the scheduler's filters count
    (spread, pod affinity and anti-affinity); `namespaces` (name -> labels) and `volumes` are
    what namespaceSelector and the volume filters read; `settle_order`: the order pods settle on
    the nodes' room in (observe_demand's; None: largest first)."""
    bound: dict[str, list[PodInfo]] = defaultdict(list)
    for p in pods:
        if p.node_name and p.phase not in TERMINAL_PHASES:
            bound[p.node_name].append(p)
    return plan_demand(
        observe_demand(
            pods,
            nodes,
            cluster=Cluster(nodes=nodes, pods=bound, namespaces=namespaces or {}, volumes=volumes or Volumes()),
            **({"order": settle_order} if settle_order is not None else {}),
        ),
        groups,
        catalogue,
        in_flight,
        max_nodes_total=max_nodes_total,
        unavailable_pools=unavailable_pools,
        max_price_per_hour_total=max_price_per_hour_total,
    )


def plan_demand(
    demand: PendingDemand,
    groups: Sequence[NodeGroup],
    catalogue: Catalogue,
    in_flight: Sequence[InFlightRequest],
    *,
    max_nodes_total: int | None = None,
    unavailable_pools: Collection[tuple[str, str]] = (),
    max_price_per_hour_total: float | None = None,
) -> ScaleUpPlan:
    unavailable = set(unavailable_pools)
    plan = ScaleUpPlan(fits_existing=[p.uid for p in demand.fits_existing_pods], pods_fit_existing=demand.fits_existing)
    planned, blocked, waiting = split_by_topology(demand.shapes, groups, catalogue)
    plan.pods_fit_existing += sum(w.count for w in waiting)
    plan.fits_existing += [p.uid for w in waiting for p in w.pods]
    for shape, msg in blocked:
        plan.problems.extend(_problems(_shapes([shape])[0], "TopologySpread", msg))
    flat = {g.name: flatten_pools(g) for g in groups}
    claims = _claim_nodes(groups, flat, catalogue, demand.daemonsets)

    def domains(d: PodShape, key: str) -> set[str]:
        return {
            claims[g.name][p.name].labels[key]
            for g in groups
            for p in admitting(d, _label_pools(d, g, catalogue, flat), claims[g.name])[0]
            if key in claims[g.name][p.name].labels
        }

    planned, affinity_problems, together = split_by_pod_affinity(planned, domains)
    for shape, reason, msg in affinity_problems:
        plan.problems.extend(_problems(_shapes([shape])[0], reason, msg))
    sizes: dict[str, int] = {}
    for i, d in enumerate(planned):
        if d.key in together:
            k = _together_size(d, groups, catalogue, flat, claims)
            if 0 < k < d.count:
                rest = d.model_copy(update={"count": d.count - k, "pods": d.pods[k:]})
                msg = (
                    f"{AFFINITY}: pods with required affinity to their own group on {LABEL_HOSTNAME} all "
                    f"join the first one's node, and the largest matching type holds {k} of them"
                )
                plan.problems.extend(_problems(_shapes([rest])[0], "NeverSatisfiable", msg))
                planned[i] = d.model_copy(update={"count": k, "pods": d.pods[:k]})
            sizes[d.key] = max(k, 1)
    shapes = _shapes(planned, sizes)
    group_by_name = {g.name: g for g in groups}

    plan.pods_covered, plan.covered_in_flight = _covered_in_flight(
        shapes, in_flight, group_by_name, catalogue, demand.daemonsets, claims
    )
    # Pods of a zone spread's shares that in-flight nodes were made for, per domain: the skew
    # the scheduler sees counts them once those nodes run (follow_scoring).
    in_flight_domains: dict[str, Counter[str]] = defaultdict(Counter)
    for s in shapes:
        if s.taken and s.src is not None and s.src.topology_spreads and s.key != base_key(s.key):
            domain = s.node_selector.get(s.src.topology_spreads[0].key)
            if domain is not None:
                in_flight_domains[base_key(s.key)][domain] += s.taken * s.together

    # c. match shapes to groups: labels and taints pick the group, every other filter the pools
    per_group: dict[str, list[_Shape]] = defaultdict(list)
    for s in shapes:
        if s.left == 0:
            continue
        refused: Counter[str] = Counter()
        for g in groups:
            pools = _label_pools(s.src, g, catalogue, flat) if s.src is not None else []
            if pools and s.src is not None and filtered(s.src):
                pools, why = admitting(s.src, pools, claims[g.name])
                refused.update(why)
            if pools:
                s.eligible[g.name] = pools
        if len(s.eligible) == 1:
            per_group[next(iter(s.eligible))].append(s)
            continue
        if s.eligible:
            reason = "MultipleNodeGroups"
            msg = f"pod matches node groups {', '.join(sorted(s.eligible))}; make their labels or taints disjoint"
        elif refused:
            reason, msg = "NeverSatisfiable", describe_refusals(refused)
        else:
            reason, msg = "NoMatchingNodeGroup", "no node group's labels and taints admit this pod"
        plan.problems.extend(_problems(s, reason, msg))

    # d. pack per group, tier by tier
    per_pool_count, per_group_count = _node_counts(demand.nodes, in_flight)
    total = Budget(None if max_nodes_total is None else max_nodes_total - demand.nodes.total - len(in_flight))
    total_price = cluster_price_budget(max_price_per_hour_total, groups, demand.nodes, in_flight, catalogue)
    price_caps: dict[str, list[PriceBudget]] = {}
    for gname in sorted(per_group):
        group = group_by_name[gname]
        group_budget = Budget(None if group.max_nodes is None else group.max_nodes - per_group_count[gname])
        group_price = group_price_budget(group, demand.nodes, in_flight, catalogue)
        price_caps[gname] = [group_price, total_price]
        bins: dict[str, Bin] = {}
        rooms: dict[str, Resources] = {}  # pool -> room for pods on a new node (after DaemonSets)
        for p in flat[gname]:
            t = _usable_type(p, catalogue)
            if t is None:
                continue
            rooms[p.name] = _pool_room(group, p, t, demand.daemonsets)
            slots = None if p.max_nodes is None else max(p.max_nodes - per_pool_count[(gname, p.name)], 0)
            bins[p.name] = Bin(key=p.name, cap=vec(rooms[p.name]), price=t.price_hourly, slots=slots)
        pool_by_name = {p.name: p for p in flat[gname]}
        gshapes = per_group[gname]

        # e (first half). Never satisfiable: no current type of any admitting pool holds one pod.
        live: list[_Shape] = []
        for s in gshapes:
            holders = [(p, rooms[p.name]) for p in s.eligible[gname] if p.name in rooms]
            if any(fit_count(s.req, list(vec(r))) > 0 for _, r in holders):
                live.append(s)
                continue
            largest = _largest(holders, bool(demand.daemonsets))
            msg = f"pod requests {_describe(s.req)}; no server type of the matching pools can hold it: {largest}"
            plan.problems.extend(_problems(s, "NeverSatisfiable", msg))

        cand_cache: dict[tuple, list[Pool]] = {}
        for tier in priority_tiers(flat[gname]):
            tier_bins = [bins[p.name] for p in tier if p.name in bins and not is_unavailable(p, unavailable)]
            items: list[Item] = []
            owners: list[_Shape] = []
            for s in live:
                if s.left == 0:
                    continue
                names = frozenset(p.name for p in s.eligible[gname])
                if any(
                    b.key in names and (b.slots is None or b.slots > 0) and fit_count(s.req, list(b.cap)) > 0
                    for b in tier_bins
                ):
                    items.append(Item(req=s.req, count=s.left, bins=names, per_node=_per_node(s, names, rooms)))
                    owners.append(s)
            if not items:
                continue
            clashes = _clashes(owners, items, {b.key: rooms[b.key] for b in tier_bins})
            result = pack_apart(items, clashes, tier_bins, [group_budget, total], price_caps[gname])
            full = {(gname, b.key) for b in bins.values() if b.slots is not None and b.slots <= 0}
            for pat in result.patterns:
                chosen = pool_by_name[pat.bin]
                reqs = _requirements(items, owners, pat.counts)
                allowed = frozenset.intersection(*(items[i].bins for i in pat.counts))
                ckey = (chosen.name, reqs, allowed)
                cands = cand_cache.get(ckey)
                if cands is None:
                    cands = fallback_candidates(
                        group, chosen, reqs, catalogue, unavailable | full, allowed=allowed, room=rooms
                    )
                    if not cands or cands[0].name != chosen.name:
                        cands = [chosen, *(c for c in cands if c.name != chosen.name)]
                    cand_cache[ckey] = cands
                for _ in range(pat.repeat):
                    uids = [p.uid for i, n in pat.counts.items() for p in owners[i].take(n)]
                    made_for = {owners[i].key: n * owners[i].together for i, n in pat.counts.items()}
                    plan.new_nodes.append(
                        PlannedNode(
                            group=gname,
                            pool=chosen.name,
                            candidates=cands,
                            requirements=reqs,
                            pod_uids=uids,
                            pods=made_for,
                        )
                    )

        # e (second half). Pods left after every tier: limits or backoff stopped them.
        for s in live:
            if s.left == 0:
                continue
            holders = [p for p in s.eligible[gname] if p.name in bins and fit_count(s.req, list(bins[p.name].cap)) > 0]
            cheapest = min((bins[p.name].price for p in holders if not is_unavailable(p, unavailable)), default=None)
            caps = [] if cheapest is None else blocking_caps([group_price, total_price], cheapest)
            if holders and all(is_unavailable(p, unavailable) for p in holders):
                reason = "NoAvailablePool"
                msg = f"every pool that can hold this pod is backing off: {', '.join(p.name for p in holders)}"
            elif caps:
                reason = PRICE_LIMIT_REACHED
                msg = f"price limits reached (cheapest pool that fits costs {cheapest:g}/h): " + "; ".join(caps)
            else:
                reason = "MaxNodesReached"
                limits = []
                if group_budget.left is not None and group_budget.left <= 0:
                    limits.append(f"node group {gname} maxNodes={group.max_nodes}")
                if total.left is not None and total.left <= 0:
                    limits.append(f"cluster max nodes {max_nodes_total}")
                full_pools = [p.name for p in holders if bins[p.name].slots == 0]
                if full_pools:
                    limits.append(f"pools at maxNodes: {', '.join(full_pools)}")
                msg = "node limits reached: " + ("; ".join(limits) or "no pool may add nodes")
            plan.problems.extend(_problems(s, reason, msg))
    plan.new_nodes = within_price_caps(plan.new_nodes, price_caps, catalogue)
    plan.new_nodes, waiting = follow_scoring(
        plan.new_nodes,
        {s.key: s.src for s in shapes if s.src is not None},
        claims,
        {d.key: d.node_selector for d in demand.shapes},
        frozenset(together),
        in_flight_domains,
    )
    plan.problems.extend(waiting)
    return plan
