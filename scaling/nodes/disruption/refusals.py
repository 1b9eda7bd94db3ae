"""Consolidations found not worth it, remembered until the cluster changes.

A NodeReplacement whose plan saves too little (or whose multi-node command finds nothing worth doing)
ends NotWorthIt and buys nothing. Asked again with the same nodes, pods and prices it would answer the
same, so the loop remembers the refusal per node with a digest of what the plan read (``cluster_digest``)
and holds those nodes out of consolidation while the digest is unchanged (``standing_refusals``), as
Karpenter skips consolidation while its cluster state is the one it last found nothing in
(kubernetes-sigs/karpenter pkg/controllers/state/cluster.go ConsolidationState, MarkUnconsolidated on
node and pod changes). The digest also covers the catalogue's prices of every group's server types
(``prices_digest``, after a colon), which the evaluation reads from the providers: a price change asks
again; an evaluation (or a plan) missing a price (a provider that could not answer in time) compares
the cluster alone.
Like Karpenter, which forgets its state after five minutes for what it cannot watch (an instance
type's availability), a refusal is forgotten after REFUSAL_KEPT_S whatever the digest says. Only
consolidation is held: an Empty, Drifted or Expired node goes as before.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping

from pydantic import BaseModel

from scaling.kube.drain import Blocker, is_terminal
from scaling.kube.models import NodeInfo, PodInfo
from scaling.nodes.catalogue import price_key
from scaling.nodes.models import NodeGroup
from scaling.nodes.nodegroups import flatten_pools
from scaling.text import when

NOT_WORTH_IT = "ConsolidationNotWorthIt"  # a NodeReplacement's reason when it buys nothing
REFUSAL_KEPT_S = 300.0  # Karpenter's consolidation state goes stale after five minutes
REFUSALS_KEPT = 100  # the loop's memory of them, most recent last: bounded whatever the cluster's size


class RefusedConsolidation(BaseModel):
    node: str
    digest: str  # refusal_digest of what the refusing plan read ("": a re-check's, held for its time)
    at: float  # when it was refused (workflow time, epoch seconds)
    message: str = ""  # the refusal's why, for explain


def cluster_digest(nodes: list[NodeInfo], pods: list[PodInfo]) -> str:
    """What a consolidation plan depends on in the cluster, as 24 hex digits: each node's name, labels,
    taints, readiness, cordon and allocatable, and each pod's placement and requests (a pod's status
    churn, a heartbeat, changes nothing a plan reads and leaves it alone)."""
    h = hashlib.sha256()
    for n in sorted(nodes, key=lambda n: n.name):
        taints = sorted((t.key, t.value or "", t.effect) for t in n.taints)
        labels = sorted(n.labels.items())
        h.update(f"N{n.name}|{labels}|{taints}|{n.ready}|{n.unschedulable}|{n.allocatable!r}\n".encode())
    for p in sorted(pods, key=lambda p: p.uid):
        gone = p.deletion_timestamp is not None or is_terminal(p)
        h.update(f"P{p.uid}|{p.node_name or ''}|{p.requests!r}|{gone}\n".encode())
    return h.hexdigest()[:24]


def prices_digest(groups: list[NodeGroup], prices: Mapping[str, float]) -> str | None:
    """The hourly prices of every group's server types, as 12 hex digits; None when one is not priced (a
    provider that did not answer in time: the refusal then compares the cluster alone, never a digest
    that differs only because a price is missing, which would ask again every loop)."""
    keys = sorted({price_key(p.provider, p.server_type) for g in groups for p in flatten_pools(g)})
    if any(k not in prices for k in keys):
        return None
    return hashlib.sha256(repr([(k, prices[k]) for k in keys]).encode()).hexdigest()[:12]


def refusal_digest(cluster: str, prices: str) -> str:
    """What a refusal is remembered with: the cluster's digest, then the prices' after a colon."""
    return f"{cluster}:{prices}"


def standing_refusals(
    refused: list[RefusedConsolidation], digest: str, now: float, nodes: set[str], prices: str | None = None
) -> tuple[dict[str, RefusedConsolidation], list[str]]:
    """The refusals that still hold (same cluster digest, and same prices when the evaluation has them;
    younger than REFUSAL_KEPT_S; node still there), by node, and the nodes of those that no longer do
    (the loop forgets them)."""
    standing: dict[str, RefusedConsolidation] = {}
    ended: list[str] = []
    for r in refused:
        cluster, _, priced = r.digest.partition(":")
        # No digest: a re-check that cancelled what the plan chose, held for its time whatever changed.
        same = not r.digest or (cluster == digest and (prices is None or not priced or priced == prices))
        if same and now - r.at < REFUSAL_KEPT_S and r.node in nodes:
            standing[r.node] = r
        else:
            ended.append(r.node)
    return standing, sorted(set(ended) - set(standing))


def expiry(r: RefusedConsolidation) -> float:
    """When the refusal is forgotten whatever the cluster shows (a time the plan may change at)."""
    return r.at + REFUSAL_KEPT_S


def refusal_blocker(r: RefusedConsolidation) -> Blocker:
    return Blocker(
        code=NOT_WORTH_IT,
        message=f"consolidation of node {r.node} not worth it at {when(r.at)} and nothing changed since"
        + (f" ({r.message})" if r.message else ""),
    )


def remember(
    refused: list[RefusedConsolidation], new: RefusedConsolidation, keep: int = REFUSALS_KEPT
) -> list[RefusedConsolidation]:
    """``refused`` with ``new`` in place of any earlier refusal of its node, the most recent ``keep``."""
    out = [r for r in refused if r.node != new.node] + [new]
    return out[-keep:]


def forget(refused: list[RefusedConsolidation], nodes: list[str]) -> list[RefusedConsolidation]:
    gone = set(nodes)
    return [r for r in refused if r.node not in gone]
