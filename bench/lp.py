"""Exact LP lower bound for a plan's cost: the cheapest fractional mix of server types whose
summed allocatable covers the demand in cpu, memory and pods at once.

The LP has 3 constraints, so its dual (max demand.y s.t. cap_t.y <= price_t, y >= 0) has 3
variables and its optimum sits at a vertex where 3 of the dual's constraints are tight.
Enumerating those triples solves it exactly with Fractions (and fast enough with floats):
C(23, 3) = 1,771 candidate vertices for 20 types. No solver needed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from itertools import combinations
from typing import Generic, TypeVar

Num = TypeVar("Num", float, Fraction)


@dataclass(frozen=True)
class LPSolution(Generic[Num]):
    cost: Num  # optimum of the relaxation: no integral plan can be cheaper
    duals: tuple[Num, Num, Num]  # price per unit of cpu, memory, pods at the optimum


def _det3(m: Sequence[Sequence[Num]]) -> Num:
    return (
        m[0][0] * (m[1][1] * m[2][2] - m[1][2] * m[2][1])
        - m[0][1] * (m[1][0] * m[2][2] - m[1][2] * m[2][0])
        + m[0][2] * (m[1][0] * m[2][1] - m[1][1] * m[2][0])
    )


def dual_vertices(caps: Sequence[Sequence[Num]], prices: Sequence[Num], eps: float = 0.0) -> list[tuple[Num, ...]]:
    """Vertices of {y >= 0 : caps[t] . y <= prices[t] for all t} (3 resources).

    Each vertex makes 3 of the 3 + len(caps) constraints tight; with positive capacities the
    region is bounded, so the LP optimum for any demand is attained at one of these. They depend
    on the catalogue only, and a bench prices many demands against one: enumerated once per
    catalogue (exact Fractions made it most of `make bench`'s CPU).
    """
    return list(_vertices(tuple(tuple(c) for c in caps), tuple(prices), eps))


@lru_cache(maxsize=16)
def _vertices(caps: tuple[tuple[Num, ...], ...], prices: tuple[Num, ...], eps: float) -> tuple[tuple[Num, ...], ...]:
    zero = prices[0] * 0 if prices else 0
    one = zero + 1
    rows: list[tuple[tuple[Num, ...], Num]] = [
        ((one, zero, zero), zero),
        ((zero, one, zero), zero),
        ((zero, zero, one), zero),
    ]  # y_r = 0 written as an equality row
    rows += [(tuple(c), p) for c, p in zip(caps, prices)]
    out: list[tuple[Num, ...]] = []
    seen: set[tuple] = set()
    for a, b, c in combinations(range(len(rows)), 3):
        m = (rows[a][0], rows[b][0], rows[c][0])
        det = _det3(m)
        if det == 0 or (eps and abs(det) <= eps):
            continue
        rhs = (rows[a][1], rows[b][1], rows[c][1])
        y = []
        for col in range(3):
            mc = [list(r) for r in m]
            for i in range(3):
                mc[i][col] = rhs[i]
            y.append(_det3(mc) / det)
        if any(v < -eps for v in y):
            continue
        # exact (eps 0): no tolerance term, which would turn a Fraction price into a float that can
        # round below it and refuse a vertex whose constraint is exactly tight
        if any(
            sum(ci * yi for ci, yi in zip(cap, y)) > (p + eps * (1 + abs(p)) if eps else p)
            for cap, p in zip(caps, prices)
        ):
            continue
        y = [v if v > 0 else zero for v in y]
        key = tuple(round(float(v), 12) for v in y)
        if key not in seen:
            seen.add(key)
            out.append(tuple(y))
    return tuple(out)


def lp_lower_bound(caps: Sequence[Sequence[Num]], prices: Sequence[Num], demand: Sequence[Num]) -> LPSolution:
    """min sum(price x) s.t. sum(cap x) >= demand, x >= 0, solved through its dual (exact for Fractions)."""
    if not caps:
        raise ValueError("no server types to cover the demand")
    exact = isinstance(prices[0], Fraction)
    verts = dual_vertices(caps, prices, eps=0.0 if exact else 1e-12)
    best = max(verts, key=lambda y: sum(d * v for d, v in zip(demand, y)))
    return LPSolution(cost=sum(d * v for d, v in zip(demand, best)), duals=tuple(best))  # type: ignore[arg-type]
