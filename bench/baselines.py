"""What Cluster Autoscaler and Karpenter would buy for the same pending pods, simplified to
their documented choice rules, so the planner's cost can be compared with theirs.

- Cluster Autoscaler, price expander: each scale-up round estimates, for every node group
  (here: every pool type), how many nodes the pods it can help need (first-fit decreasing,
  like its binpacking estimator) and picks the option with the lowest price per unit of pod
  requests it places; rounds repeat until every pod is placed.
- Karpenter: pods largest first go onto the first open node claim that one of its remaining
  instance types can still hold, else open a claim with every type; at launch each claim
  takes the cheapest type that holds what it got.
"""

from __future__ import annotations

from collections.abc import Sequence

from scaling.kube.models import PodInfo
from scaling.nodes.models import ServerType

Vec = tuple[int, int, int]


def _vec(p: PodInfo) -> Vec:
    return (p.requests.cpu_m, p.requests.memory, max(p.requests.pods, 1))


def _cap(t: ServerType) -> Vec:
    return (t.allocatable.cpu_m, t.allocatable.memory, t.allocatable.pods)


def _fits(used: Vec, req: Vec, cap: Vec) -> bool:
    return all(u + r <= c for u, r, c in zip(used, req, cap))


def _weight(req: Vec, cap: Vec) -> float:
    return req[0] / cap[0] + req[1] / cap[1]


def _ffd_nodes(reqs: Sequence[Vec], cap: Vec) -> int:
    """First-fit decreasing: how many nodes of `cap` hold `reqs` (CA's estimator, simplified)."""
    nodes: list[list[int]] = []
    for r in sorted(reqs, key=lambda r: -_weight(r, cap)):
        for n in nodes:
            if _fits(n, r, cap):  # type: ignore[arg-type]
                for d in range(3):
                    n[d] += r[d]
                break
        else:
            nodes.append(list(r))
    return len(nodes)


def cluster_autoscaler_price(pods: Sequence[PodInfo], types: Sequence[ServerType]) -> float:
    reqs = [_vec(p) for p in pods]
    largest = max(types, key=lambda t: _cap(t)[0] + _cap(t)[1] / 2**20)
    norm = _cap(largest)
    cost = 0.0
    while reqs:
        best: tuple[float, float, list[int]] | None = None
        for t in types:
            cap = _cap(t)
            helped = [i for i, r in enumerate(reqs) if _fits((0, 0, 0), r, cap)]
            if not helped:
                continue
            n = _ffd_nodes([reqs[i] for i in helped], cap)
            price = n * t.price_hourly
            value = sum(_weight(reqs[i], norm) for i in helped)
            score = price / value
            if best is None or score < best[0]:
                best = (score, price, helped)
        if best is None:
            raise ValueError("a pod fits no type")
        cost += best[1]
        keep = set(best[2])
        reqs = [r for i, r in enumerate(reqs) if i not in keep]
    return cost


def karpenter(pods: Sequence[PodInfo], types: Sequence[ServerType]) -> float:
    caps = [(_cap(t), t.price_hourly) for t in types]
    big = max(c[0][0] for c in caps), max(c[0][1] for c in caps)
    claims: list[tuple[list[int], list[int]]] = []  # (used, indices of types still holding it)
    for r in sorted((_vec(p) for p in pods), key=lambda r: -(r[0] / big[0] + r[1] / big[1])):
        for used, options in claims:
            still = [i for i in options if _fits(used, r, caps[i][0])]  # type: ignore[arg-type]
            if still:
                for d in range(3):
                    used[d] += r[d]
                options[:] = still
                break
        else:
            options = [i for i, (cap, _) in enumerate(caps) if _fits((0, 0, 0), r, cap)]
            claims.append((list(r), options))
    return sum(min(caps[i][1] for i in options) for _, options in claims)
