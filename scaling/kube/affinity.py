"""Required node affinity, as the scheduler's NodeAffinity filter reads it.

`requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms` are ORed; the expressions of
one term are ANDed; an empty term matches nothing. Operators: In, NotIn, Exists, DoesNotExist,
Gt, Lt (integers). `matchFields` can only name `metadata.name`, which a node not yet created
does not have: such a term never matches a future node.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from scaling.kube.models import NodeSelectorRequirement, NodeSelectorTerm


def required_node_affinity(spec: Mapping[str, Any]) -> list[NodeSelectorTerm]:
    """The pod spec's required node affinity terms ([] when it has none)."""
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    return [
        NodeSelectorTerm(
            match_expressions=tuple(_requirement(e) for e in term.get("matchExpressions") or []),
            match_fields=tuple(_requirement(e) for e in term.get("matchFields") or []),
        )
        for term in required.get("nodeSelectorTerms") or []
    ]


def _requirement(e: Mapping[str, Any]) -> NodeSelectorRequirement:
    return NodeSelectorRequirement(
        key=e.get("key") or "", operator=e.get("operator") or "In", values=tuple(e.get("values") or ())
    )


def requirement_matches(req: NodeSelectorRequirement, labels: Mapping[str, str]) -> bool:
    present = req.key in labels
    if req.operator == "In":
        return present and labels[req.key] in req.values
    if req.operator == "NotIn":
        return not present or labels[req.key] not in req.values
    if req.operator == "Exists":
        return present
    if req.operator == "DoesNotExist":
        return not present
    if present and len(req.values) == 1:  # Gt / Lt: one integer value
        try:
            have, want = int(labels[req.key]), int(req.values[0])
        except ValueError:
            return False
        return have > want if req.operator == "Gt" else have < want
    return False


def node_affinity_matches(terms: Sequence[NodeSelectorTerm], labels: Mapping[str, str], node_name: str = "") -> bool:
    """True when the pod has no required node affinity or one of its terms admits the node.

    `node_name` empty means a node that does not exist yet (the planner's future node)."""
    if not terms:
        return True
    fields = {"metadata.name": node_name} if node_name else {}
    for term in terms:
        if not term.match_expressions and not term.match_fields:
            continue  # an empty term matches nothing
        if all(requirement_matches(r, labels) for r in term.match_expressions) and all(
            requirement_matches(r, fields) for r in term.match_fields
        ):
            return True
    return False
