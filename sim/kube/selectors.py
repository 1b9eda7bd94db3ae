"""Label and field selectors as the apiserver parses them from query strings."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

Obj = dict[str, Any]


class SelectorError(ValueError):
    """A malformed selector or an unsupported field label: the apiserver answers 400."""


@dataclass(frozen=True)
class Requirement:
    key: str
    op: str  # "=", "!=", "in", "notin", "exists", "!"
    values: tuple[str, ...] = ()

    def matches(self, labels: dict[str, str]) -> bool:
        present = self.key in labels
        value = labels.get(self.key)
        if self.op == "=":
            return present and value == self.values[0]
        if self.op == "!=":
            return not present or value != self.values[0]
        if self.op == "in":
            return present and value in self.values
        if self.op == "notin":
            return not present or value not in self.values
        if self.op == "exists":
            return present
        return not present  # "!"


_KEY = r"[A-Za-z0-9]([-A-Za-z0-9_./]*[A-Za-z0-9])?"
_SET_RE = re.compile(rf"^\s*(!?)\s*({_KEY})\s*(?:(in|notin)\s*\(([^)]*)\))?\s*$")
_EQ_RE = re.compile(rf"^\s*({_KEY})\s*(==|=|!=)\s*([-A-Za-z0-9_.]*)\s*$")


def _split_top_level(text: str) -> list[str]:
    """Split on commas that are not inside "in (a,b)" parentheses."""
    parts: list[str] = []
    depth = 0
    current: list[str] = []
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    parts.append("".join(current))
    return [p for p in parts if p.strip()]


def parse_label_selector(text: str | None) -> list[Requirement]:
    if not text:
        return []
    requirements: list[Requirement] = []
    for part in _split_top_level(text):
        eq = _EQ_RE.match(part)
        if eq:
            op = "!=" if eq.group(3) == "!=" else "="
            requirements.append(Requirement(eq.group(1), op, (eq.group(4),)))
            continue
        st = _SET_RE.match(part)
        if not st:
            raise SelectorError(f"unable to parse requirement: {part!r}")
        negated, key, set_op, values = st.group(1), st.group(2), st.group(4), st.group(5)
        if set_op:
            if negated:
                raise SelectorError(f"unable to parse requirement: {part!r}")
            vals = tuple(v.strip() for v in values.split(",") if v.strip())
            requirements.append(Requirement(key, set_op, vals))
        else:
            requirements.append(Requirement(key, "!" if negated else "exists"))
    return requirements


def labels_match(requirements: list[Requirement], obj: Obj) -> bool:
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return all(r.matches(labels) for r in requirements)


def label_selector_to_requirements(selector: Obj | None) -> list[Requirement] | None:
    """A metav1.LabelSelector object as requirements; None means "matches nothing"."""
    if selector is None:
        return None
    reqs = [Requirement(k, "=", (str(v),)) for k, v in (selector.get("matchLabels") or {}).items()]
    ops = {"In": "in", "NotIn": "notin", "Exists": "exists", "DoesNotExist": "!"}
    for expr in selector.get("matchExpressions") or []:
        reqs.append(Requirement(expr["key"], ops[expr["operator"]], tuple(expr.get("values") or ())))
    return reqs


def _path(*keys: str) -> Callable[[Obj], str]:
    def get(obj: Obj) -> str:
        value: Any = obj
        for key in keys:
            value = value.get(key) if isinstance(value, dict) else None
        if value is None:
            return ""
        if isinstance(value, bool):
            return "true" if value else "false"
        return str(value)

    return get


_COMMON_FIELDS = {"metadata.name": _path("metadata", "name"), "metadata.namespace": _path("metadata", "namespace")}

# Field labels each resource supports, as the apiserver's field label conversion funcs do.
FIELD_LABELS: dict[str, dict[str, Callable[[Obj], str]]] = {
    "pods": {
        "spec.nodeName": _path("spec", "nodeName"),
        "spec.restartPolicy": _path("spec", "restartPolicy"),
        "spec.schedulerName": _path("spec", "schedulerName"),
        "spec.serviceAccountName": _path("spec", "serviceAccountName"),
        "spec.hostNetwork": _path("spec", "hostNetwork"),
        "status.phase": _path("status", "phase"),
        "status.podIP": _path("status", "podIP"),
        "status.nominatedNodeName": _path("status", "nominatedNodeName"),
    },
    "events": {
        "involvedObject.kind": _path("involvedObject", "kind"),
        "involvedObject.namespace": _path("involvedObject", "namespace"),
        "involvedObject.name": _path("involvedObject", "name"),
        "involvedObject.uid": _path("involvedObject", "uid"),
        "involvedObject.apiVersion": _path("involvedObject", "apiVersion"),
        "involvedObject.resourceVersion": _path("involvedObject", "resourceVersion"),
        "involvedObject.fieldPath": _path("involvedObject", "fieldPath"),
        "reason": _path("reason"),
        "reportingComponent": _path("reportingComponent"),
        "source": _path("source", "component"),
        "type": _path("type"),
    },
    "nodes": {"spec.unschedulable": _path("spec", "unschedulable")},
    "namespaces": {"status.phase": _path("status", "phase")},
    "secrets": {"type": _path("type")},
    "replicasets": {"status.replicas": _path("status", "replicas")},
}


@dataclass(frozen=True)
class FieldRequirement:
    getter: Callable[[Obj], str]
    negate: bool
    value: str

    def matches(self, obj: Obj) -> bool:
        return (self.getter(obj) == self.value) != self.negate


def parse_field_selector(text: str | None, plural: str) -> list[FieldRequirement]:
    if not text:
        return []
    known = {**_COMMON_FIELDS, **FIELD_LABELS.get(plural, {})}
    out: list[FieldRequirement] = []
    for part in text.split(","):
        if not part.strip():
            continue
        m = re.match(r"^\s*([^=!\s]+)\s*(==|=|!=)\s*(.*?)\s*$", part)
        if not m:
            raise SelectorError(f"invalid selector: {part!r}; can't understand {part!r}")
        field, op, value = m.groups()
        if field not in known:
            raise SelectorError(f"field label not supported: {field}")
        out.append(FieldRequirement(known[field], op == "!=", value))
    return out


def fields_match(requirements: list[FieldRequirement], obj: Obj) -> bool:
    return all(r.matches(obj) for r in requirements)
