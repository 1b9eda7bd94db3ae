"""Consolidation's figures and the violations it must never commit, counted over time.

The pure parts of `make bench-consolidation` (issue 32, item 5): the prices the final pods are
compared against (the LP lower bound over the pool's types, the Karpenter-like consolidation
baseline of bench/baselines.py) and the violation counts a run is judged by, computed from what
the histories and the API server's Events record:

- budget_violations: each disruption that started while its group already had as many in
  flight as the most restrictive active budget for its reason allowed (budgets.allowed_by_reason
  at the start's time, over the group's size then). The count rises only at a start, so a start
  is where a breach is decided; a window that closes over disruptions already in flight is no
  breach (Karpenter neither stops them).
- pdb_violations: episodes in which an app's available pods were below its PDB's minAvailable
  while a voluntary disruption of one of its nodes was in flight.
- do_not_disrupt_evictions: evictions of a pod annotated karpenter.sh/do-not-disrupt, or from a
  node so annotated.
- pods_lost: replicas asked for and not running at the end.

`simulate_day` runs the day through the planners only (`--planner-only` of
bench/consolidation_stack.py, the real-stack run `make bench-consolidation` makes): deployments of
four workload families scaled up in bursts and back each 5 minutes, a packing scheduler, the
scale-up planner buying and the loop's scale-down removing (Empty, Underused); then
`growth nodes what-if consolidate`'s consolidation_now applied one step at a time until it finds
nothing. The pool is billing-neutral (period 0) so that the final price is consolidation's, not a
paid hour's hold. Without an API server the PDB, do-not-disrupt, budget and replacement counts are
0 by construction there; only pods_lost is measured. The real-stack driver (dev server, simulated
cluster, worker; the histories and the API server's objects over time) counts through the same
functions.

python -m bench.consolidation [--hours 24] [--seed 7]
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from bench.baselines import karpenter
from bench.lp import lp_lower_bound
from scaling.kube.models import PodInfo, Resources
from scaling.nodes.disruption.budgets import UNLIMITED, allowed_by_reason
from scaling.nodes.disruption.models import Disruption, DisruptionReason
from scaling.nodes.models import ServerType
from scaling.nodes.scale_down.checks import need_of

KEYS = (
    "price_per_hour_before",
    "price_per_hour_after",
    "lower_bound_price_per_hour",
    "karpenter_like_price_per_hour",
    "pdb_violations",
    "do_not_disrupt_evictions",
    "budget_violations",
    "pods_lost",
    "replacements_failed",
)
VIOLATIONS = ("pdb_violations", "do_not_disrupt_evictions", "budget_violations", "pods_lost", "replacements_failed")
LOWER_BOUND_FACTOR = 1.10  # the aim: after <= 1.10 x the lower bound


@dataclass(frozen=True)
class InFlight:
    """One voluntary disruption of a node, from its start (cordon, or the replacement's plan)
    to its end (the node deleted, or the disruption given up); end None: still in flight."""

    node: str
    group: str
    reason: DisruptionReason
    start: float
    end: float | None = None

    def covers(self, t: float) -> bool:
        return self.start <= t and (self.end is None or t < self.end)


def budget_violations(
    disruptions: Iterable[InFlight],
    settings: Mapping[str, Disruption],
    group_size: Callable[[str, float], int],
) -> int:
    """Disruptions that started beyond what their group's active budgets allowed then."""
    items = sorted(disruptions, key=lambda d: (d.start, d.node))
    count = 0
    for k, d in enumerate(items):
        disruption = settings.get(d.group)
        if disruption is None:
            continue
        limit = allowed_by_reason(disruption, group_size(d.group, d.start), d.reason, d.start)
        if limit == UNLIMITED:
            continue
        # the ones in flight when this one started, started before it (ties: in start order)
        already = sum(1 for o in items[:k] if o.group == d.group and o.covers(d.start))
        if already >= limit:
            count += 1
    return count


@dataclass(frozen=True)
class Availability:
    """An app's available pods at time ``at`` (sampled from the API server, or a watch event's change)."""

    at: float
    app: str
    available: int


def pdb_violations(
    samples: Iterable[Availability],
    min_available: Mapping[str, int],
    disruptions: Sequence[InFlight],
    nodes_of_app: Callable[[str, float], set[str]],
) -> int:
    """Episodes (consecutive samples of one app) below minAvailable while one of the app's nodes
    was being disrupted; a dip the workload's own scale-in causes is no disruption's."""
    count = 0
    below: dict[str, bool] = {}
    for s in sorted(samples, key=lambda s: (s.app, s.at)):
        need = min_available.get(s.app)
        on = nodes_of_app(s.app, s.at)
        breach = need is not None and s.available < need and any(d.node in on and d.covers(s.at) for d in disruptions)
        if breach and not below.get(s.app, False):
            count += 1
        below[s.app] = breach
    return count


@dataclass(frozen=True)
class Eviction:
    pod: str  # namespace/name
    node: str


def do_not_disrupt_evictions(evictions: Iterable[Eviction], protected_pods: set[str], protected_nodes: set[str]) -> int:
    return sum(1 for e in evictions if e.pod in protected_pods or e.node in protected_nodes)


def pods_lost(desired: Mapping[str, int], running: Mapping[str, int]) -> int:
    return sum(max(want - running.get(app, 0), 0) for app, want in desired.items())


def lower_bound_price(pods: Sequence[PodInfo], types: Sequence[ServerType], rooms: Sequence[Resources] = ()) -> float:
    """The LP relaxation's optimum for the pods' summed requests over ``types`` (exact), the free
    ``rooms`` of nodes kept as they are taken first: whatever packs the pods puts into new nodes at
    least what those rooms cannot hold, in each resource, so the bound stays a lower bound."""
    caps = [
        [Fraction(t.allocatable.cpu_m), Fraction(t.allocatable.memory), Fraction(t.allocatable.pods)] for t in types
    ]
    prices = [Fraction(str(t.price_hourly)) for t in types]
    demand = [
        Fraction(max(sum(p.requests.cpu_m for p in pods) - sum(r.cpu_m for r in rooms), 0)),
        Fraction(max(sum(p.requests.memory for p in pods) - sum(r.memory for r in rooms), 0)),
        Fraction(max(sum(max(p.requests.pods, 1) for p in pods) - sum(r.pods for r in rooms), 0)),
    ]
    return float(lp_lower_bound(caps, prices, demand).cost)


def best_packing_price(
    pods: Sequence[PodInfo], types: Sequence[ServerType], rooms: Sequence[Resources] = (), cap: float | None = None
) -> float | None:
    """The cheapest set of new nodes of ``types`` that, with the free ``rooms`` of nodes kept as they are,
    holds every pod (cpu, memory and pod count, each pod whole on one node): the integral optimum the LP
    bound relaxes, by exhaustive search. For the few pods a night leaves (a dozen); None when no set
    costing at most ``cap`` (default: one node per pod of the cheapest type that holds it) does."""
    need = sorted(pods, key=lambda p: (p.requests.memory, p.requests.cpu_m), reverse=True)
    options = sorted(types, key=lambda t: t.price_hourly)
    if cap is None:
        fits = [min((t.price_hourly for t in options if _packs([p], [t.allocatable])), default=None) for p in need]
        if any(f is None for f in fits):
            return None
        cap = sum(f for f in fits if f is not None)
    best: list[float | None] = [None]

    def buy(i: int, chosen: list[ServerType], spent: float) -> None:
        if best[0] is not None and spent >= best[0] - 1e-12:
            return
        if _packs(need, [*rooms, *(t.allocatable for t in chosen)]):
            best[0] = spent
            return
        for j in range(i, len(options)):  # multisets in order: each type at or after the last one bought
            t = options[j]
            if spent + t.price_hourly <= cap + 1e-12:
                buy(j, [*chosen, t], spent + t.price_hourly)

    buy(0, [], 0.0)
    return None if best[0] is None else round(best[0], 6)


def _packs(pods: Sequence[PodInfo], rooms: Sequence[Resources]) -> bool:
    """Whether the pods (largest first) fit the rooms, each pod whole on one: a depth-first search that
    tries equal rooms once."""
    left = [[r.cpu_m, r.memory, r.pods] for r in rooms]

    def place(k: int) -> bool:
        if k == len(pods):
            return True
        cpu, mem, slots = need_of(pods[k])  # as the scale-down fit reads a pod
        tried: set[tuple[int, int, int]] = set()
        for room in left:
            key = (room[0], room[1], room[2])
            if key in tried or cpu > room[0] or mem > room[1] or slots > room[2]:
                continue
            tried.add(key)
            room[0], room[1], room[2] = room[0] - cpu, room[1] - mem, room[2] - slots
            ok = place(k + 1)
            room[0], room[1], room[2] = room[0] + cpu, room[1] + mem, room[2] + slots
            if ok:
                return True
        return False

    return place(0)


def karpenter_like_price(
    pods: Sequence[PodInfo], types: Sequence[ServerType], rooms: Sequence[Resources] = (), budget: str | None = None
) -> float:
    """What Karpenter would keep for the same pods once its consolidation reached a fixed point, beside
    nodes it may not disrupt whose free ``rooms`` its commands may fill, each command within the
    pool's nodes ``budget`` (None: none)."""
    return karpenter(pods, types, consolidate=True, rooms=rooms, budget=budget, into_room=True)


def karpenter_like_from(
    nodes: Sequence[tuple[Sequence[PodInfo], ServerType]],
    types: Sequence[ServerType],
    rooms: Sequence[Resources] = (),
    budget: str | None = None,
) -> float:
    """What Karpenter's consolidation would keep if it took over ``nodes`` as they are (each one's
    pods and type): the same commands as karpenter_like_price, from that cluster instead of a fresh
    launch. From a consolidator's own end it asks whether any command of Karpenter's is left there."""
    return karpenter([], types, consolidate=True, rooms=rooms, budget=budget, into_room=True, start=nodes)


def report(
    *,
    before: float,
    after: float,
    final_pods: Sequence[PodInfo],
    types: Sequence[ServerType],
    violations: Mapping[str, int],
) -> dict[str, Any]:
    """The bench's last JSON line: KEYS in order, then whether the aims hold."""
    missing = [k for k in VIOLATIONS if k not in violations]
    if missing:
        raise ValueError(f"violations: missing {', '.join(missing)}")
    out: dict[str, Any] = {
        "price_per_hour_before": round(before, 4),
        "price_per_hour_after": round(after, 4),
        "lower_bound_price_per_hour": round(lower_bound_price(final_pods, types), 4) if final_pods else 0.0,
        "karpenter_like_price_per_hour": round(karpenter_like_price(final_pods, types), 4) if final_pods else 0.0,
        **{k: int(violations[k]) for k in VIOLATIONS},
    }
    out["aims_met"] = aims_hold(out)
    return out


def aims_hold(out: Mapping[str, Any]) -> bool:
    """The issue's aims on a line's own keys: after <= 1.10 x the lower bound, never dearer than
    Karpenter-like, every violation 0."""
    after = out["price_per_hour_after"]
    return (
        after <= LOWER_BOUND_FACTOR * out["lower_bound_price_per_hour"] + 1e-9
        and after <= out["karpenter_like_price_per_hour"] + 1e-9
        and all(out[k] == 0 for k in VIOLATIONS)
    )


# --- the day, through the planners (bench/consolidation_stack.py runs it on the real stack) ---

PROVIDER = "hetzner"
TYPES = ("cx22", "cx32", "cx42", "cx52")
STEP_S = 300.0
BOOT_S = 60.0
GI = 1024**3
START = 1_800_000_000.0
# (app, cpu m, memory) of each workload family
FAMILIES = (("web", 250, GI // 2), ("api", 1000, 2 * GI), ("batch", 2000, 4 * GI), ("cache", 500, 3 * GI))


def _group() -> Any:
    from scaling.nodes.nodegroups import parse_node_group

    pool = {"provider": PROVIDER, "serverType": list(TYPES), "priority": 10, "billing": {"period": 0}}
    spec = {
        "pools": [pool],
        "disruption": {
            "consolidationPolicy": "WhenEmptyOrUnderutilized",
            "consolidateAfter": "30s",
            "budgets": [{"nodes": "20%"}],
        },
    }
    return parse_node_group({"metadata": {"name": "day"}, "spec": spec}, {PROVIDER})


def replicas_over_the_day(hours: int, seed: int) -> list[dict[str, int]]:
    """Each step's replicas per family: a base, bursts that scale a family up 3-10x and back."""
    import random

    rng = random.Random(seed)
    base = {app: rng.randint(2, 6) for app, _, _ in FAMILIES}
    steps = int(hours * 3600 / STEP_S)
    out = []
    burst: dict[str, tuple[int, int]] = {}  # app: (until step, replicas)
    for s in range(steps):
        for app, _, _ in FAMILIES:
            if app not in burst and rng.random() < 0.05:
                burst[app] = (s + rng.randint(2, 12), base[app] * rng.randint(3, 10))
            if app in burst and burst[app][0] <= s:
                del burst[app]
        out.append({app: burst.get(app, (0, base[app]))[1] for app, _, _ in FAMILIES})
    return out


def simulate_day(hours: int, seed: int) -> dict[str, Any]:
    """The churn with the scale-up planner and the loop's scale-down, then consolidation_now
    applied until it finds nothing more (each step's successors bought, its node's pods moved)."""
    from datetime import UTC, datetime

    from scaling.kube.models import NodeInfo, Resources
    from scaling.nodes.catalogue import catalogue_index
    from scaling.nodes.contracts import ScaleDownObservation
    from scaling.nodes.disruption.what_if import consolidation_now
    from scaling.nodes.models import LABEL_GROUP, LABEL_POOL
    from scaling.nodes.nodegroups import flatten_pools
    from scaling.nodes.providers.kwok import kwok_catalogue
    from scaling.nodes.scale_down.candidates import plan_scale_down
    from scaling.nodes.scale_down.models import ScaleDownLoopSettings
    from scaling.nodes.scale_up.planning import plan_scale_up

    group = _group()
    catalogue = kwok_catalogue(PROVIDER)
    index = catalogue_index(catalogue)
    pool_of = {p.name: p for p in flatten_pools(group)}
    types = [index[(PROVIDER, t)] for t in TYPES]
    req = {app: Resources(cpu_m=c, memory=m, pods=1) for app, c, m in FAMILIES}
    nodes: dict[str, tuple[str, float]] = {}  # name: (pool, ready at)
    bound: dict[str, str | None] = {}  # pod: node
    serial = [0]

    def pods_now(now: float) -> list[PodInfo]:
        return [
            PodInfo(
                namespace="day",
                name=p,
                uid=p,
                labels={"app": p.split("-")[0]},
                node_name=n if n is not None and nodes[n][1] <= now else None,
                phase="Running" if n is not None else "Pending",
                requests=req[p.split("-")[0]],
                controller_kind="ReplicaSet",
            )
            for p, n in sorted(bound.items())
        ]

    def infos(now: float) -> list[NodeInfo]:
        used: dict[str, list[int]] = {n: [0, 0] for n in nodes}
        for p, n in bound.items():
            if n is not None:
                r = req[p.split("-")[0]]
                used[n][0] += r.cpu_m
                used[n][1] += r.memory
        out = []
        for name, (pool, ready_at) in sorted(nodes.items()):
            t = index[(PROVIDER, pool_of[pool].server_type.lower())]
            out.append(
                NodeInfo(
                    name=name,
                    labels={LABEL_GROUP: group.name, LABEL_POOL: pool},
                    allocatable=t.allocatable,
                    requested=Resources(cpu_m=used[name][0], memory=used[name][1], pods=0),
                    ready=ready_at <= now,
                    created_at=datetime.fromtimestamp(START, UTC),
                )
            )
        return out

    def buy(pool: str, now: float) -> str:
        serial[0] += 1
        name = f"n{serial[0]}"
        nodes[name] = (pool, now + BOOT_S)
        return name

    def schedule(now: float) -> None:
        room = {
            i.name: [i.allocatable.cpu_m - i.requested.cpu_m, i.allocatable.memory - i.requested.memory]
            for i in infos(now)
        }
        for p in sorted(p for p, n in bound.items() if n is None):
            r = req[p.split("-")[0]]
            for n in sorted(room, key=lambda n: (room[n][0], n)):  # tightest first: a packing scheduler
                if room[n][0] >= r.cpu_m and room[n][1] >= r.memory:
                    bound[p] = n
                    room[n][0] -= r.cpu_m
                    room[n][1] -= r.memory
                    break

    def price() -> float:
        return sum(index[(PROVIDER, pool_of[pool].server_type.lower())].price_hourly for pool, _ in nodes.values())

    now = START
    unneeded: dict[str, float] = {}
    for want in replicas_over_the_day(hours, seed):
        for app, n in want.items():
            have = sorted((p for p in bound if p.startswith(app + "-")), key=lambda p: int(p.split("-")[1]))
            for p in have[n:]:
                del bound[p]  # scale-in: the newest go
            top = max((int(p.split("-")[1]) for p in have), default=-1)
            for k in range(max(n - len(have), 0)):
                bound[f"{app}-{top + 1 + k}"] = None
        schedule(now)
        ready = [i for i in infos(now) if i.ready]
        booting_pods = pods_now(now)
        plan = plan_scale_up(
            [p for p in booting_pods if p.node_name is None and bound[p.name] is None], ready, [group], index, []
        )
        for new in plan.new_nodes:
            buy(new.pool, now)
        down = plan_scale_down(
            ready,
            [p for p in booting_pods if p.node_name],
            [],
            [group],
            None,
            now,
            unneeded,
            None,
            set(),
            set(),
            ScaleDownLoopSettings(),
        )
        unneeded = dict(down.unneeded_since)
        for r in down.to_remove:
            if r.kind.value in ("Empty", "Underused"):
                for p, n in bound.items():
                    if n == r.name:
                        bound[p] = None
                del nodes[r.name]
        now += STEP_S
        schedule(now)
    now += 3600
    schedule(now)
    before = price()
    rounds = 0
    while rounds < 20:
        obs = ScaleDownObservation(nodes=infos(now), pods=[p for p in pods_now(now) if p.node_name], groups=[group])
        steps = consolidation_now(obs, catalogue, now).steps
        if not steps:
            break
        rounds += 1
        for s in steps[:1]:  # one at a time, as a budget of 1 would
            for succ in s.successors:
                server_type = succ.split("/")[1]
                buy(next(p for p in pool_of if pool_of[p].server_type == server_type), now - BOOT_S)
            for gone in s.nodes or [s.node]:  # a multi-node consolidation replaces several
                for p, n in bound.items():
                    if n == gone:
                        bound[p] = None
                del nodes[gone]
            schedule(now)
    final = pods_now(now)
    lost = sum(1 for p in final if p.node_name is None)
    return {
        "before": before,
        "after": price(),
        "final_pods": final,
        "types": types,
        "rounds": rounds,
        "nodes_after": len(nodes),
        "pods_lost": lost,
    }


def planner_day(hours: int, seed: int) -> dict[str, Any]:
    """The day through the planners: its JSON line (only pods_lost measured among the violations)."""
    import os
    import time

    t0 = time.monotonic()
    day = simulate_day(hours, seed)
    took = time.monotonic() - t0
    out = report(
        before=day["before"],
        after=day["after"],
        final_pods=day["final_pods"],
        types=day["types"],
        # through the planners only: no API server, so only lost pods can be counted here
        violations={k: 0 for k in VIOLATIONS} | {"pods_lost": day["pods_lost"]},
    )
    return out | {
        "stack": "planners",
        "rounds": day["rounds"],
        "pods": len(day["final_pods"]),
        "seconds": round(took, 1),
        "load1": round(os.getloadavg()[0], 1),
    }


def main() -> None:
    import argparse
    import json

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hours", type=int, default=24)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    print(json.dumps(planner_day(args.hours, args.seed)))


if __name__ == "__main__":
    main()
