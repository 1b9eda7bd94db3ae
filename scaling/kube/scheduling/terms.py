"""The parts of a pod spec the scheduler's filters read beyond resources, parsed once per pod:
label selectors, required pod (anti-)affinity terms, topology spread constraints, host ports.

Frozen models: pods of one template share them, and a shape carries them across history.
matchLabelKeys and mismatchLabelKeys are folded into the selector with the pod's own values
(`key In (value)`, `key NotIn (value)`), as the API server does when it admits the pod.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from scaling.kube.memo import ReprMemo


class SelectorRequirement(BaseModel):
    """One matchExpressions entry of a label selector."""

    model_config = ConfigDict(frozen=True)

    key: str
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist"] = "In"
    values: tuple[str, ...] = ()


class LabelSelector(BaseModel):
    """A metav1.LabelSelector; an empty one selects everything (a null one is None: nothing)."""

    model_config = ConfigDict(frozen=True)

    match_labels: tuple[tuple[str, str], ...] = ()
    match_expressions: tuple[SelectorRequirement, ...] = ()  # In, NotIn, Exists, DoesNotExist

    def matches(self, labels: Mapping[str, str]) -> bool:
        for k, v in self.match_labels:
            if labels.get(k) != v:
                return False
        for r in self.match_expressions:
            present = r.key in labels
            if r.operator == "In":
                ok = present and labels[r.key] in r.values
            elif r.operator == "NotIn":
                ok = not present or labels[r.key] not in r.values
            elif r.operator == "Exists":
                ok = present
            else:
                ok = not present
            if not ok:
                return False
        return True


class PodAffinityTerm(BaseModel):
    """One required pod (anti-)affinity term. `namespaces` is what the term names, or the pod's
    own namespace when it names none and has no namespaceSelector; the namespaceSelector, when
    set, adds every namespace whose labels it selects (an empty one: every namespace)."""

    model_config = ConfigDict(frozen=True)

    topology_key: str
    selector: LabelSelector | None = None  # None selects no pod
    namespaces: tuple[str, ...] = ()
    namespace_selector: LabelSelector | None = None

    def selects(self, namespace: str, labels: Mapping[str, str], ns_labels: Mapping[str, Mapping[str, str]]) -> bool:
        """A pod in `namespace` with `labels` matches the term (`ns_labels`: namespace -> labels)."""
        if self.selector is None:
            return False
        if namespace not in self.namespaces and (
            self.namespace_selector is None or not self.namespace_selector.matches(ns_labels.get(namespace, {}))
        ):
            return False
        return self.selector.matches(labels)


class SpreadConstraint(BaseModel):
    """One topologySpreadConstraint (matchLabelKeys folded into the selector)."""

    model_config = ConfigDict(frozen=True)

    topology_key: str
    max_skew: int = 1
    when_unsatisfiable: Literal["DoNotSchedule", "ScheduleAnyway"] = "DoNotSchedule"
    selector: LabelSelector | None = None  # None selects no pod
    min_domains: int | None = None
    node_affinity_policy: Literal["Honor", "Ignore"] = "Honor"  # the API's defaults
    node_taints_policy: Literal["Honor", "Ignore"] = "Ignore"


class HostPort(BaseModel):
    """A container port bound on the node: (hostIP, protocol, hostPort); "" reads as 0.0.0.0."""

    model_config = ConfigDict(frozen=True)

    port: int
    protocol: str = "TCP"
    ip: str = "0.0.0.0"


def _requirement(e: Mapping[str, Any]) -> SelectorRequirement:
    return SelectorRequirement(
        key=e.get("key") or "", operator=e.get("operator") or "In", values=tuple(e.get("values") or ())
    )


def label_selector(
    raw: Mapping[str, Any] | None,
    labels: Mapping[str, str] = {},
    match_keys: Any = (),
    mismatch_keys: Any = (),
) -> LabelSelector | None:
    """The selector, with match/mismatchLabelKeys folded in from the pod's `labels`."""
    if raw is None:
        return None
    exprs = [_requirement(e) for e in raw.get("matchExpressions") or []]
    for key in match_keys or ():
        if key in labels:
            exprs.append(SelectorRequirement(key=key, operator="In", values=(labels[key],)))
    for key in mismatch_keys or ():
        if key in labels:
            exprs.append(SelectorRequirement(key=key, operator="NotIn", values=(labels[key],)))
    return LabelSelector(
        match_labels=tuple(sorted((raw.get("matchLabels") or {}).items())), match_expressions=tuple(exprs)
    )


def _terms(raw: list[Mapping[str, Any]], namespace: str, labels: Mapping[str, str]) -> tuple[PodAffinityTerm, ...]:
    out = []
    for t in raw:
        ns_sel = t.get("namespaceSelector")
        names = tuple(sorted(set(t.get("namespaces") or ())))
        if not names and ns_sel is None:
            names = (namespace,)
        out.append(
            PodAffinityTerm(
                topology_key=t.get("topologyKey") or "",
                selector=label_selector(
                    t.get("labelSelector"), labels, t.get("matchLabelKeys"), t.get("mismatchLabelKeys")
                ),
                namespaces=names,
                namespace_selector=None if ns_sel is None else label_selector(ns_sel),
            )
        )
    return tuple(out)


_TERMS: ReprMemo[tuple[PodAffinityTerm, ...]] = ReprMemo(1024)
_SPREADS: ReprMemo[tuple[SpreadConstraint, ...]] = ReprMemo(1024)


def pod_affinity_terms(
    spec: Mapping[str, Any], namespace: str, labels: Mapping[str, str], kind: str
) -> tuple[PodAffinityTerm, ...]:
    """Required terms of `kind` ("podAffinity" or "podAntiAffinity")."""
    raw = ((spec.get("affinity") or {}).get(kind) or {}).get("requiredDuringSchedulingIgnoredDuringExecution") or []
    if not raw:
        return ()
    return _TERMS.get((raw, namespace, labels), lambda: _terms(raw, namespace, labels))


def spread_constraints(spec: Mapping[str, Any], labels: Mapping[str, str]) -> tuple[SpreadConstraint, ...]:
    raw = spec.get("topologySpreadConstraints") or []
    if not raw:
        return ()

    def build() -> tuple[SpreadConstraint, ...]:
        return tuple(
            SpreadConstraint(
                topology_key=c.get("topologyKey") or "",
                max_skew=max(int(c.get("maxSkew") or 1), 1),
                when_unsatisfiable=c.get("whenUnsatisfiable") or "DoNotSchedule",
                selector=label_selector(c.get("labelSelector"), labels, c.get("matchLabelKeys")),
                min_domains=c.get("minDomains"),
                node_affinity_policy=c.get("nodeAffinityPolicy") or "Honor",
                node_taints_policy=c.get("nodeTaintsPolicy") or "Ignore",
            )
            for c in raw
        )

    return _SPREADS.get((raw, labels), build)


def host_ports(spec: Mapping[str, Any]) -> tuple[HostPort, ...]:
    """Ports the app containers bind on the node (hostPort > 0), as the NodePorts filter reads them."""
    out = []
    for c in spec.get("containers") or []:
        for p in c.get("ports") or []:
            if int(p.get("hostPort") or 0) > 0:
                out.append(
                    HostPort(
                        port=int(p["hostPort"]), protocol=p.get("protocol") or "TCP", ip=p.get("hostIP") or "0.0.0.0"
                    )
                )
    return tuple(out)
