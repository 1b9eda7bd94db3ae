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

The real-stack driver (the day of churn on the dev server, the simulated cluster and the worker)
is not here yet: these functions are what it reports through.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from bench.baselines import karpenter
from bench.lp import lp_lower_bound
from scaling.kube.models import PodInfo
from scaling.nodes.disruption.budgets import UNLIMITED, allowed_by_reason
from scaling.nodes.disruption.models import Disruption, DisruptionReason
from scaling.nodes.models import ServerType

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
    """An app's available pods at time ``at`` (sampled from the API server)."""

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


def lower_bound_price(pods: Sequence[PodInfo], types: Sequence[ServerType]) -> float:
    """The LP relaxation's optimum for the pods' summed requests over ``types`` (exact)."""
    caps = [
        [Fraction(t.allocatable.cpu_m), Fraction(t.allocatable.memory), Fraction(t.allocatable.pods)] for t in types
    ]
    prices = [Fraction(str(t.price_hourly)) for t in types]
    demand = [
        Fraction(sum(p.requests.cpu_m for p in pods)),
        Fraction(sum(p.requests.memory for p in pods)),
        Fraction(sum(max(p.requests.pods, 1) for p in pods)),
    ]
    return float(lp_lower_bound(caps, prices, demand).cost)


def karpenter_like_price(pods: Sequence[PodInfo], types: Sequence[ServerType]) -> float:
    """What Karpenter would keep for the same pods once its consolidation reached a fixed point."""
    return karpenter(pods, types, consolidate=True)


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
    out["aims_met"] = (
        after <= LOWER_BOUND_FACTOR * out["lower_bound_price_per_hour"] + 1e-9
        and after <= out["karpenter_like_price_per_hour"] + 1e-9
        and all(out[k] == 0 for k in VIOLATIONS)
    )
    return out
