"""Drift and expiry: whether a node still matches the spec of the pool it was made from, and whether
it has outlived its group's expireAfter.

A node records the hash of what made it (LABEL_POOL_HASH, set at create, as Karpenter's NodeClaims
carry karpenter.sh/nodepool-hash): the pool's provider, server type and config (image, location,
cloud-init...) and the group's labels and taints, which is everything a node is made from. Budgets,
limits, priorities and scale-down settings are not in it: changing them drifts no node (Karpenter's
hash ignores its disruption block too). A node without the label (made before it existed) is never
Drifted; one whose pool is no longer in its group's spec is.
"""

from __future__ import annotations

import hashlib
import json

from scaling.kube.models import NodeInfo, Taint
from scaling.nodes.models import LABEL_GROUP, NodeGroup, Pool
from scaling.nodes.scale_down.checks import pool_for

LABEL_POOL_HASH = "growth.autoscaling.dev/pool-hash"
# The node a replacement is made for: while that node is being replaced, the new one is held from
# scale-down (it is empty until the old node's pods arrive).
LABEL_REPLACES = "growth.autoscaling.dev/replaces"
# The command that made it (orchestration.command_id): a multi-node command's nodes drain together,
# and the node LABEL_REPLACES names may be gone while the others still drain; the successor is held
# while any node of its command is.
LABEL_REPLACEMENT = "growth.autoscaling.dev/replacement"


def pool_hash(labels: dict[str, str], taints: list[Taint], pool: Pool) -> str:
    body = {
        "labels": dict(sorted(labels.items())),
        "taints": sorted((t.key, t.value, t.effect) for t in taints),
        "provider": pool.provider,
        "serverType": pool.server_type.lower(),
        "config": pool.config,
    }
    return hashlib.sha256(json.dumps(body, sort_keys=True, default=str).encode()).hexdigest()[:16]


def drift_message(node: NodeInfo, group: NodeGroup | None) -> str | None:
    """Why ``node`` no longer matches its group's spec; None when it does (or cannot tell)."""
    recorded = node.labels.get(LABEL_POOL_HASH)
    if group is None or not recorded:
        return None
    pool = pool_for(node, [group])
    if pool is None:
        return f"node {node.name}'s pool is no longer in group {group.name}'s spec"
    if pool_hash(group.registered_labels, group.registered_taints, pool) != recorded:
        return f"node {node.name} was made from an earlier spec of pool {pool.name} (group {group.name})"
    return None


def expiry_message(node: NodeInfo, group: NodeGroup | None, now: float) -> str | None:
    """Why ``node`` has expired (its group's expireAfter passed since it was created); None if not."""
    after = group.disruption.expire_after_s if group is not None else None
    if after is None or node.created_at is None:
        return None
    age = now - node.created_at.timestamp()
    if age < after:
        return None
    return f"node {node.name} is {age / 3600:.1f}h old: group {node.labels.get(LABEL_GROUP)} expires nodes after {after / 3600:g}h"
