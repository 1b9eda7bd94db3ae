"""What several filters read alike: label selectors with matchLabelKeys, node selector terms."""

from __future__ import annotations

from typing import Any

from sim.kube.selectors import Requirement, label_selector_to_requirements

Obj = dict[str, Any]
Selector = list[Requirement] | None  # None selects nothing (a null LabelSelector)


def labels(obj: Obj) -> dict[str, str]:
    return (obj.get("metadata") or {}).get("labels") or {}


def namespace(pod: Obj) -> str:
    return (pod.get("metadata") or {}).get("namespace") or "default"


def selector(
    sel: Obj | None,
    own: dict[str, str],
    match_keys: list[str] = (),
    mismatch_keys: list[str] = (),  # type: ignore[assignment]
) -> Selector:
    """The selector with matchLabelKeys (key in the pod's value) and mismatchLabelKeys (key not
    in it) merged in, for keys the pod carries, as the apiserver and the scheduler merge them; a
    null selector stays null (it selects nothing, whatever keys are added)."""
    reqs = label_selector_to_requirements(sel)
    if reqs is None:
        return None
    reqs += [Requirement(k, "in", (own[k],)) for k in match_keys if k in own]
    reqs += [Requirement(k, "notin", (own[k],)) for k in mismatch_keys if k in own]
    return reqs


def selects(reqs: Selector, target: dict[str, str]) -> bool:
    return reqs is not None and all(r.matches(target) for r in reqs)


def expression_matches(expr: Obj, target: dict[str, str]) -> bool:
    """One NodeSelectorRequirement (In, NotIn, Exists, DoesNotExist, Gt, Lt)."""
    op, key, values = expr.get("operator"), expr.get("key"), expr.get("values") or []
    if op == "In":
        return key in target and target[key] in values
    if op == "NotIn":
        return key not in target or target[key] not in values
    if op == "Exists":
        return key in target
    if op == "DoesNotExist":
        return key not in target
    if op in ("Gt", "Lt") and key in target:
        try:
            have, want = int(target[key]), int(values[0])
        except (ValueError, IndexError):
            return False
        return have > want if op == "Gt" else have < want
    return False


def node_selector_matches(terms: list[Obj], node: Obj) -> bool:
    """A NodeSelector: any term matches (its expressions on the labels and its fields, all of
    them); a term with neither matches nothing."""
    node_labels = labels(node)
    fields = {"metadata.name": (node.get("metadata") or {}).get("name", "")}
    for term in terms:
        exprs = term.get("matchExpressions") or []
        field_exprs = term.get("matchFields") or []
        if not exprs and not field_exprs:
            continue
        if all(expression_matches(e, node_labels) for e in exprs) and all(
            expression_matches(e, fields) for e in field_exprs
        ):
            return True
    return False
