"""Money limits: a node group's `spec.limits.pricePerHour` and the loop's
`max_price_per_hour_total`, priced from the server-type catalogue.

A cap is spent by the group's (or every growth group's) nodes and in-flight requests at their
type's hourly list price; the planner opens a new node only while its price fits what is left
(`PriceBudget`), and a NodeRequest's fallback pools may cost more than its first choice only by
what the caps leave over per planned node (`within_price_caps`), so no fallback can push the
spend past a cap. Nodes whose type the catalogue does not price count 0: growth cannot know
their price, and refusing every plan for them would be worse. Like Cluster Autoscaler's
`--max-nodes-total`, a cap bounds what the planner adds, never removes nodes. A pool's
minNodes is a floor the caps do not lower (scaling.nodes.scale_up.min_size does not read them): the
catalogue is only fetched when pods are pending, so a cap could not be priced there reliably.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from scaling.nodes.models import InFlightRequest, NodeGroup, PlannedNode, Pool, ServerType
from scaling.nodes.nodegroups import flatten_pools
from scaling.nodes.scale_up.demand import NodeTally

Catalogue = Mapping[tuple[str, str], ServerType]
PRICE_LIMIT_REACHED = "PriceLimitReached"
# Prices are sums of floats: a node that fits a cap exactly must not miss it by a rounding error.
_EPSILON = 1e-9


@dataclass
class PriceBudget:
    """What is left of one money cap (EUR/hour); `what` names the cap for problem messages."""

    left: float | None
    what: str = ""
    shared: bool = False  # the cluster's cap: every group's planned nodes spend it

    def affords(self, price: float) -> bool:
        return self.left is None or price <= self.left + _EPSILON

    def nodes_affordable(self, price: float) -> int | None:
        """How many nodes of `price` still fit (None: no cap, or a free type)."""
        if self.left is None or price <= 0:
            return None
        return max(int((self.left + _EPSILON) // price), 0)

    def take(self, n: int, price: float) -> None:
        if self.left is not None:
            self.left -= n * price


def _price(catalogue: Catalogue, provider: str, server_type: str) -> float:
    t = catalogue.get((provider, server_type.lower()))
    return t.price_hourly if t is not None else 0.0


def pool_price(pool: Pool, catalogue: Catalogue) -> float:
    return _price(catalogue, pool.provider, pool.server_type)


def group_spend(
    group: NodeGroup, tally: NodeTally, in_flight: Sequence[InFlightRequest], catalogue: Catalogue
) -> float:
    """EUR/hour of the group's nodes (by pool label, else instance type) and in-flight requests."""
    pools = flatten_pools(group)
    by_name = {p.name: p for p in pools}
    total = 0.0
    for c in tally.groups:
        if c.group != group.name:
            continue
        pool = by_name.get(c.pool) if c.pool else None
        if pool is None and c.instance_type:
            pool = next((p for p in pools if p.server_type.lower() == c.instance_type.lower()), None)
        if pool is not None:
            total += c.count * pool_price(pool, catalogue)
    for r in in_flight:
        if r.group == group.name:
            total += _price(catalogue, r.provider, r.server_type)
    return total


def group_price_budget(
    group: NodeGroup, tally: NodeTally, in_flight: Sequence[InFlightRequest], catalogue: Catalogue
) -> PriceBudget:
    cap = group.limits.price_per_hour if group.limits is not None else None
    if cap is None:
        return PriceBudget(None)
    spent = group_spend(group, tally, in_flight, catalogue)
    return PriceBudget(cap - spent, f"node group {group.name} pricePerHour={cap:g} (spending {spent:.4f}/h)")


def cluster_price_budget(
    cap: float | None,
    groups: Sequence[NodeGroup],
    tally: NodeTally,
    in_flight: Sequence[InFlightRequest],
    catalogue: Catalogue,
) -> PriceBudget:
    """The loop's total cap over growth's nodes; nodes of groups no longer defined count by
    their in-flight requests only (their pools, and so their prices, are unknown)."""
    if cap is None:
        return PriceBudget(None)
    spent = sum(group_spend(g, tally, in_flight, catalogue) for g in groups)
    known = {g.name for g in groups}
    spent += sum(_price(catalogue, r.provider, r.server_type) for r in in_flight if r.group not in known)
    return PriceBudget(cap - spent, f"cluster max_price_per_hour_total={cap:g} (spending {spent:.4f}/h)", shared=True)


def blocking_caps(budgets: Sequence[PriceBudget], cheapest: float) -> list[str]:
    """The caps that leave no room for one more node of the cheapest type that could help."""
    return [b.what for b in budgets if not b.affords(cheapest)]


def within_price_caps(
    planned: Sequence[PlannedNode],
    budgets: Mapping[str, Sequence[PriceBudget]],
    catalogue: Catalogue,
) -> list[PlannedNode]:
    """Drop fallback pools that could push a cap over: each planned node may fall back to a
    pool costing more than its first choice only by an even share of what its caps leave
    after the plan. `budgets` maps a group to its caps (already charged for the plan)."""
    count: dict[str, int] = {}
    for n in planned:
        count[n.group] = count.get(n.group, 0) + 1
    out: list[PlannedNode] = []
    for n in planned:
        caps = [b for b in budgets.get(n.group, ()) if b.left is not None]
        if not caps or not n.candidates:
            out.append(n)
            continue
        shares = [max(b.left or 0.0, 0.0) / (len(planned) if b.shared else count[n.group]) for b in caps]
        chosen = pool_price(n.candidates[0], catalogue)
        extra = min(shares)
        kept = [
            n.candidates[0],
            *(c for c in n.candidates[1:] if pool_price(c, catalogue) <= chosen + extra + _EPSILON),
        ]
        out.append(n if len(kept) == len(n.candidates) else n.model_copy(update={"candidates": kept}))
    return out
