"""Benchmark of the scale-up planner: time and cost against the LP lower bound, and on
several workload families against what Cluster Autoscaler (price and least-waste expanders)
and Karpenter (at launch, and after consolidation) would buy (bench/baselines.py).

python -m bench.plan_scale_up   (last line is JSON: the 30,000-pod run, with the families)

Plan times are wall and CPU seconds of this process, with the load average beside them: on a
shared machine the wall time says more about the neighbours than about the planner.
"""

from __future__ import annotations

import json
import time
from fractions import Fraction

from bench.baselines import cluster_autoscaler, karpenter
from bench.lp import lp_lower_bound
from bench.machine import load_average
from bench.workload import (
    FAMILIES,
    POOL_TYPES,
    PROVIDER,
    ZONE_SPREAD_FAMILIES,
    ZONES,
    Workload,
    affinity_workload,
    workload,
)
from scaling.nodes.models import ScaleUpPlan
from scaling.nodes.nodegroups import flatten_pools
from scaling.nodes.scale_up.planning import plan_scale_up

SIZES = (1_000, 10_000, 30_000)
# Pods per family run: a few hundred (where one node's choice shows) and 2,000. The baselines
# are pod-by-pod simulations: slower than the planner.
FAMILY_PODS = (300, 2_000)
BASELINES = ("ca_price", "ca_least_waste", "karpenter", "karpenter_consolidated")


def plan_cost(w: Workload, plan: ScaleUpPlan) -> float:
    price = {(p.name): w.catalogue[(p.provider, p.server_type.lower())].price_hourly for p in flatten_pools(w.group)}
    return sum(price[n.pool] for n in plan.new_nodes)


def cost_lower_bound(w: Workload) -> float:
    """Exact optimum of the LP relaxation over the 20 pool types, in Fractions."""
    types = [w.catalogue[(PROVIDER, t)] for t in POOL_TYPES]
    caps = [
        [Fraction(t.allocatable.cpu_m), Fraction(t.allocatable.memory), Fraction(t.allocatable.pods)] for t in types
    ]
    prices = [Fraction(str(t.price_hourly)) for t in types]
    demand = [
        Fraction(sum(p.requests.cpu_m for p in w.pods)),
        Fraction(sum(p.requests.memory for p in w.pods)),
        Fraction(sum(p.requests.pods for p in w.pods)),
    ]
    return float(lp_lower_bound(caps, prices, demand).cost)


# The affinity-heavy family (bench.workload.affinity_workload): its time aim is 2 CPU-seconds.
AFFINITY_PODS = 10_000


def affinity_run(pods: int | None = None) -> dict[str, float | int]:
    """Plan time and cost of 10,000 pods over 50 workloads with pod affinity and anti-affinity
    on the zone and the hostname. The baselines do not model pod affinity, so no cost beside
    them; every pod must be planned (the terms all admit some zone)."""
    pods = pods or AFFINITY_PODS
    w = affinity_workload(pods)
    plan, seconds, cpu = timed_plan(w)
    planned = sum(sum(n.pods.values()) for n in plan.new_nodes)
    if planned != pods or plan.problems:
        raise SystemExit(f"affinity plan incomplete: {planned}/{pods} planned, {len(plan.problems)} problems")
    return {
        "pods": pods,
        "plan_seconds": round(seconds, 4),
        "plan_cpu_seconds": round(cpu, 4),
        "load_average": load_average(),
        "nodes": len(plan.new_nodes),
        "cost": round(plan_cost(w, plan), 4),
    }


def timed_plan(w: Workload) -> tuple[ScaleUpPlan, float, float]:
    """The plan, with its wall and CPU seconds."""
    t0, c0 = time.perf_counter(), time.process_time()
    plan = plan_scale_up(w.pods, w.nodes, [w.group], w.catalogue, [])
    return plan, time.perf_counter() - t0, time.process_time() - c0


def run(size: int) -> dict[str, float | int]:
    w = workload(size)
    plan, seconds, cpu = timed_plan(w)
    planned = sum(sum(n.pods.values()) for n in plan.new_nodes)
    if planned != size or plan.problems or plan.fits_existing:
        raise SystemExit(f"plan incomplete: {planned}/{size} planned, {len(plan.problems)} problems")
    cost = plan_cost(w, plan)
    lb = cost_lower_bound(w)
    return {
        "pods": size,
        "plan_seconds": round(seconds, 4),
        "plan_cpu_seconds": round(cpu, 4),
        "load_average": load_average(),
        "nodes": len(plan.new_nodes),
        "cost": round(cost, 4),
        "cost_lower_bound": round(lb, 4),
        "cost_ratio": round(cost / lb, 4),
    }


def baseline_costs(w: Workload, zones: int = 1) -> dict[str, float]:
    """Each baseline's cost; with zones, each shape's pods are dealt out over the zones in turn
    (what a maxSkew of 1 allows) and each zone is bought for on its own."""
    types = [w.catalogue[(PROVIDER, t)] for t in POOL_TYPES]
    seen: dict[str, int] = {}
    shares: list[list] = [[] for _ in range(zones)]
    for p in w.pods:
        k = seen[p.labels["app"]] = seen.get(p.labels["app"], -1) + 1
        shares[k % zones].append(p)
    out = {k: 0.0 for k in BASELINES}
    for pods in shares:
        out["ca_price"] += cluster_autoscaler(pods, types, "price")
        out["ca_least_waste"] += cluster_autoscaler(pods, types, "least-waste")
        out["karpenter"] += karpenter(pods, types)
        out["karpenter_consolidated"] += karpenter(pods, types, consolidate=True)
    return out


def family(name: str, pods: int) -> dict[str, float | int | str]:
    """Each plan's cost over the LP bound; `dearer` names the baselines growth costs more than."""
    w = workload(pods, family=name)
    plan = plan_scale_up(w.pods, w.nodes, [w.group], w.catalogue, [])
    if plan.problems or sum(sum(n.pods.values()) for n in plan.new_nodes) != pods:
        raise SystemExit(f"{name}: plan incomplete")
    growth, lb = plan_cost(w, plan), cost_lower_bound(w)
    base = baseline_costs(w, len(ZONES) if name in ZONE_SPREAD_FAMILIES else 1)
    dearer = [k for k, v in base.items() if growth > v * (1 + 1e-9)]
    return {
        "family": name,
        "pods": pods,
        "growth": round(growth / lb, 4),
        **{k: round(v / lb, 4) for k, v in base.items()},
        "dearer_than": ",".join(dearer),
    }


def main() -> None:
    fams = [family(name, n) for n in FAMILY_PODS for name in FAMILIES]
    print("cost / LP lower bound per workload family (ca: Cluster Autoscaler expanders; kp: Karpenter):")
    for f in fams:
        worst = f"  <- dearer than {f['dearer_than']}" if f["dearer_than"] else ""
        print(
            f"  {f['family']:<20} pods={f['pods']:>5}  growth={f['growth']:.4f}  ca_price={f['ca_price']:.4f}"
            f"  ca_least_waste={f['ca_least_waste']:.4f}  kp={f['karpenter']:.4f}"
            f"  kp_consolidated={f['karpenter_consolidated']:.4f}{worst}"
        )
    results = [run(n) for n in SIZES]
    for r in results:
        print(
            f"pods={r['pods']:>6}  plan={r['plan_seconds']:.3f}s (cpu {r['plan_cpu_seconds']:.3f}s, "
            f"load {r['load_average']:.1f})  nodes={r['nodes']:>5}  "
            f"cost={r['cost']:.4f}/h  lp_bound={r['cost_lower_bound']:.4f}/h  ratio={r['cost_ratio']:.4f}"
        )
    # Each family's plan at the largest size: the time aim holds for every one, not only mixed.
    most = max(SIZES)
    cpu: dict[str, float] = {}
    for name in FAMILIES:
        _, wall, cpu[name] = timed_plan(workload(most, family=name))
        print(f"  {name:<20} pods={most:>6}  plan={wall:.3f}s (cpu {cpu[name]:.3f}s)")
    family_cpu = {k: round(v, 4) for k, v in cpu.items()}
    aff = affinity_run()
    print(
        f"  affinity-heavy       pods={aff['pods']:>6}  plan={aff['plan_seconds']:.3f}s "
        f"(cpu {aff['plan_cpu_seconds']:.3f}s, load {aff['load_average']:.1f})  nodes={aff['nodes']}  cost={aff['cost']:.4f}/h"
    )
    print(json.dumps({**results[-1], "families": fams, "family_plan_cpu_seconds": family_cpu, "affinity": aff}))


if __name__ == "__main__":
    main()
