"""Benchmark of the scale-up planner: time and cost against the LP lower bound, and on
several workload families against what Cluster Autoscaler's price expander and Karpenter
would buy (bench/baselines.py).

python -m bench.plan_scale_up   (last line is JSON: the 30,000-pod run, with the families)
"""

from __future__ import annotations

import json
import time
from fractions import Fraction

from bench.baselines import cluster_autoscaler_price, karpenter
from bench.lp import lp_lower_bound
from bench.workload import FAMILIES, POOL_TYPES, PROVIDER, Workload, workload
from scaling.nodes.models import ScaleUpPlan
from scaling.nodes.nodegroups import flatten_pools
from scaling.nodes.planning import plan_scale_up

SIZES = (1_000, 10_000, 30_000)
FAMILY_PODS = 2_000  # the baselines are simple first-fit simulations: slower than the planner


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


def run(size: int) -> dict[str, float | int]:
    w = workload(size)
    t0 = time.perf_counter()
    plan = plan_scale_up(w.pods, w.nodes, [w.group], w.catalogue, [])
    seconds = time.perf_counter() - t0
    planned = sum(sum(n.pods.values()) for n in plan.new_nodes)
    if planned != size or plan.problems or plan.fits_existing:
        raise SystemExit(f"plan incomplete: {planned}/{size} planned, {len(plan.problems)} problems")
    cost = plan_cost(w, plan)
    lb = cost_lower_bound(w)
    return {
        "pods": size,
        "plan_seconds": round(seconds, 4),
        "nodes": len(plan.new_nodes),
        "cost": round(cost, 4),
        "cost_lower_bound": round(lb, 4),
        "cost_ratio": round(cost / lb, 4),
    }


def family(name: str) -> dict[str, float | int | str]:
    w = workload(FAMILY_PODS, family=name)
    plan = plan_scale_up(w.pods, w.nodes, [w.group], w.catalogue, [])
    if plan.problems or sum(sum(n.pods.values()) for n in plan.new_nodes) != FAMILY_PODS:
        raise SystemExit(f"{name}: plan incomplete")
    types = [w.catalogue[(PROVIDER, t)] for t in POOL_TYPES]
    growth, lb = plan_cost(w, plan), cost_lower_bound(w)
    ca, kp = cluster_autoscaler_price(w.pods, types), karpenter(w.pods, types)
    return {
        "family": name,
        "growth": round(growth / lb, 4),
        "cluster_autoscaler": round(ca / lb, 4),
        "karpenter": round(kp / lb, 4),
    }


def main() -> None:
    fams = [family(name) for name in FAMILIES]
    print(f"cost / LP lower bound, {FAMILY_PODS} pods per family:")
    for f in fams:
        worst = "" if f["growth"] <= min(f["cluster_autoscaler"], f["karpenter"]) else "  <- dearer than a baseline"
        print(
            f"  {f['family']:<14} growth={f['growth']:.4f}  cluster-autoscaler(price)={f['cluster_autoscaler']:.4f}"
            f"  karpenter={f['karpenter']:.4f}{worst}"
        )
    results = [run(n) for n in SIZES]
    for r in results:
        print(
            f"pods={r['pods']:>6}  plan={r['plan_seconds']:.3f}s  nodes={r['nodes']:>5}  "
            f"cost={r['cost']:.4f}/h  lp_bound={r['cost_lower_bound']:.4f}/h  ratio={r['cost_ratio']:.4f}"
        )
    print(json.dumps({**results[-1], "families": fams}))


if __name__ == "__main__":
    main()
