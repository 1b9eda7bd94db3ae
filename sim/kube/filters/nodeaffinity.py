"""NodeName and NodeAffinity (nodeSelector and required node affinity)."""

from __future__ import annotations

from typing import Any

from sim.kube.filters.terms import labels, node_selector_matches

Obj = dict[str, Any]
NODE_NAME = "node(s) didn't match the requested node name"
NODE_AFFINITY = "node(s) didn't match Pod's node affinity/selector"


def name_matches(pod: Obj, node: Obj) -> bool:
    wanted = (pod.get("spec") or {}).get("nodeName")
    return not wanted or wanted == node["metadata"]["name"]


def affinity_matches(pod: Obj, node: Obj) -> bool:
    node_labels = labels(node)
    spec = pod.get("spec") or {}
    for key, value in (spec.get("nodeSelector") or {}).items():
        if node_labels.get(key) != value:
            return False
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    )
    if not required:
        return True
    return node_selector_matches(required.get("nodeSelectorTerms") or [], node)
