"""Approval gates on scale-up (NodeGroupWithPriority `spec.approval`): which NodeRequests wait for
an operator, and what a decision or a timeout does. Pure: the loop passes its plan and prices.

Two rules, checked when the loop plans (the request carries the outcome):
- nodes: a loop whose plan adds more than `nodesAbove` nodes to a group gates every NodeRequest
  of that group from that loop (one plan is approved or denied request by request, but all of it
  waits). A node count per request would never trigger: a NodeRequest is always one node.
- price: a candidate pool whose server type costs more than `pricePerHourAbove` per hour is
  tried only once approved; a price the catalogue does not know gates too (never cheaper by
  accident). A request whose first pool is cheap waits only if it falls back to a dear one.

A request waits in phase AwaitingApproval, with its pods held (the planner counts it in flight),
until `approve`/`deny` or until `timeout` applies `default`. A denial ends it Unmet with an
attempt result Denied on that pool; the loop then skips the (group, pool) for a backoff as after
a quota failure (scaling.nodes.loop.apply_attempt_backoff), so the pods are planned again onto
other pools, and onto this one only after the backoff, asking again.
"""

from __future__ import annotations

from collections import Counter

from pydantic import BaseModel, Field

from scaling.approvals import Default
from scaling.nodes.models import ApprovalPolicy, NodeGroup, PlannedNode, ServerType

DEFAULT_TIMEOUT_S = ApprovalPolicy.model_fields["timeout_s"].default


class ApprovalGate(BaseModel):
    """What one NodeRequest must have approved, carried in its input."""

    nodes: str = ""  # why the whole request waits ("" when the nodes rule does not apply)
    pools: dict[str, str] = Field(default_factory=dict)  # pool name -> why trying it waits
    timeout_s: float = DEFAULT_TIMEOUT_S
    default: Default = "deny"


def approval_gates(
    planned: list[PlannedNode], groups: dict[str, NodeGroup], catalogue: dict[tuple[str, str], ServerType]
) -> list[ApprovalGate | None]:
    """One entry per planned node: its gate, or None when nothing in it needs approval."""
    per_group = Counter(p.group for p in planned)
    out: list[ApprovalGate | None] = []
    for node in planned:
        group = groups.get(node.group)
        policy = group.approval if group is not None else None
        if policy is None:
            out.append(None)
            continue
        nodes = ""
        count = per_group[node.group]
        if policy.nodes_above is not None and count > policy.nodes_above:
            nodes = f"{count} nodes for group {node.group} in one loop (approval above {policy.nodes_above})"
        pools: dict[str, str] = {}
        if policy.price_per_hour_above is not None:
            for pool in node.candidates:
                reason = _price_reason(pool.provider, pool.server_type, policy.price_per_hour_above, catalogue)
                if reason:
                    pools[pool.name] = reason
        if nodes or pools:
            out.append(ApprovalGate(nodes=nodes, pools=pools, timeout_s=policy.timeout_s, default=policy.default))
        else:
            out.append(None)
    return out


def _price_reason(provider: str, server_type: str, above: float, catalogue: dict[tuple[str, str], ServerType]) -> str:
    known = catalogue.get((provider, server_type.lower()))
    if known is None:
        return f"price of {provider} {server_type} unknown (approval above {above:g}/h)"
    if known.price_hourly > above:
        return f"{provider} {server_type} costs {known.price_hourly:g}/h (approval above {above:g}/h)"
    return ""


def waits_for(gate: ApprovalGate | None, pool: str, approved: bool) -> str:
    """Why trying `pool` must wait for approval now ("" to go ahead). One approval covers the
    whole request, every pool it may still fall back to."""
    if gate is None or approved:
        return ""
    return gate.nodes or gate.pools.get(pool, "")


def scale_up_event(request_id: str, planned: PlannedNode, approval: ApprovalGate | None) -> tuple[str, str]:
    """The Event on a pod a new request is for: TriggeredScaleUp, or, when the request waits for
    approval before its first pool, ScaleUpAwaitingApproval with how to decide."""
    where = f"group {planned.group}, pool {planned.pool}, request {request_id}"
    why = waits_for(approval, planned.candidates[0].name if planned.candidates else "", approved=False)
    if why:
        return "ScaleUpAwaitingApproval", f"scale-up awaits approval: {where}: {why}; growth nodes approve|deny ID"
    return "TriggeredScaleUp", f"pod triggered scale-up: {where}"
