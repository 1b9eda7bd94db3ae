"""VolumeBinding and VolumeZone: a pod's PersistentVolumeClaims and the nodes they allow.

As volumebinding/ and volumezone/ read them:
- PreFilter refuses the pod on every node when a claim is missing ('persistentvolumeclaim "x"
  not found'), being deleted, bound to a PV that does not exist, or unbound with a
  StorageClass that binds Immediately (no PV controller binds it here: it stays unbound);
- a claim bound to a PV: the node must match the PV's required nodeAffinity ("node(s) had
  volume node affinity conflict"), and, when the node carries any zone or region label, the
  PV's zone and region labels (values joined by "__") must hold the node's ("node(s) had no
  available volume zone");
- an unbound claim of a WaitForFirstConsumer class: a node is fine when an Available PV of that
  class, big enough, with the claim's access modes, allows the node, or when the class can
  provision there (a provisioner other than kubernetes.io/no-provisioner and, if the class has
  allowedTopologies, a term the node's labels satisfy); otherwise "node(s) didn't find
  available persistent volumes to bind". CSIStorageCapacity is not modelled.
Generic ephemeral volumes are not read.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sim.kube import quantity
from sim.kube.filters.terms import labels, namespace, node_selector_matches

Obj = dict[str, Any]
NODE_CONFLICT = "node(s) had volume node affinity conflict"
BIND_CONFLICT = "node(s) didn't find available persistent volumes to bind"
ZONE_CONFLICT = "node(s) had no available volume zone"
NO_PROVISIONER = "kubernetes.io/no-provisioner"
ZONE_LABELS = (
    "topology.kubernetes.io/zone",
    "topology.kubernetes.io/region",
    "failure-domain.beta.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/region",
)
SELECTED_NODE = "volume.kubernetes.io/selected-node"


@dataclass
class Volumes:
    """The cluster's volume objects: PVs and StorageClasses by name, claims by (ns, name)."""

    pvs: dict[str, Obj] = field(default_factory=dict)
    claims: dict[tuple[str, str], Obj] = field(default_factory=dict)
    classes: dict[str, Obj] = field(default_factory=dict)


@dataclass
class State:
    bound: list[Obj]  # the PVs of the bound claims
    unbound: list[tuple[Obj, Obj]]  # (claim, its WaitForFirstConsumer class)


def claim_names(pod: Obj) -> list[str]:
    return [
        v["persistentVolumeClaim"]["claimName"]
        for v in (pod.get("spec") or {}).get("volumes") or []
        if (v.get("persistentVolumeClaim") or {}).get("claimName")
    ]


def prefilter(pod: Obj, volumes: Volumes) -> State | str:
    """The pod's volume state, or the reason it fits no node."""
    state = State([], [])
    for name in claim_names(pod):
        claim = volumes.claims.get((namespace(pod), name))
        if claim is None:
            return f'persistentvolumeclaim "{name}" not found'
        if claim["metadata"].get("deletionTimestamp"):
            return f'persistentvolumeclaim "{name}" is being deleted'
        pv_name = (claim.get("spec") or {}).get("volumeName")
        if pv_name:
            pv = volumes.pvs.get(pv_name)
            if pv is None:
                return "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"
            state.bound.append(pv)
            continue
        class_name = (claim.get("spec") or {}).get("storageClassName") or ""
        sc = volumes.classes.get(class_name)
        if sc is None:
            return f'storageclass.storage.k8s.io "{class_name}" not found'
        if sc.get("volumeBindingMode") != "WaitForFirstConsumer":
            return "pod has unbound immediate PersistentVolumeClaims"
        state.unbound.append((claim, sc))
    return state


def pv_allows(pv: Obj, node: Obj) -> bool:
    required = (((pv.get("spec") or {}).get("nodeAffinity") or {}).get("required") or {}).get("nodeSelectorTerms")
    return required is None or node_selector_matches(required, node)


def zone_allows(pv: Obj, node: Obj) -> bool:
    node_labels = labels(node)
    if not any(k in node_labels for k in ZONE_LABELS):
        return True
    for key in ZONE_LABELS:
        if key not in labels(pv):
            continue
        # A PV's beta label is matched with the node's GA label when the node has no beta one.
        value = node_labels.get(key, node_labels.get(key.replace("failure-domain.beta", "topology")))
        if value not in labels(pv)[key].split("__"):
            return False
    return True


def topology_allows(sc: Obj, node: Obj) -> bool:
    terms = sc.get("allowedTopologies") or []
    node_labels = labels(node)
    return not terms or any(
        all(node_labels.get(e["key"]) in (e.get("values") or []) for e in t.get("matchLabelExpressions") or [])
        for t in terms
    )


def static_match(claim: Obj, sc: Obj, volumes: Volumes, node: Obj, taken: set[str] = frozenset()) -> Obj | None:  # type: ignore[assignment]
    """The smallest Available PV of the claim's class that fits it and allows the node."""
    spec = claim.get("spec") or {}
    want = quantity.units(((spec.get("resources") or {}).get("requests") or {}).get("storage") or 0)
    modes = set(spec.get("accessModes") or [])
    best: tuple[int, str, Obj] | None = None
    for name, pv in volumes.pvs.items():
        pv_spec = pv.get("spec") or {}
        if (
            name in taken
            or pv_spec.get("claimRef")
            or (pv_spec.get("storageClassName") or "") != sc["metadata"]["name"]
            or not modes <= set(pv_spec.get("accessModes") or [])
            or not pv_allows(pv, node)
        ):
            continue
        size = quantity.units((pv_spec.get("capacity") or {}).get("storage") or 0)
        if size >= want and (best is None or (size, name) < best[:2]):
            best = (size, name, pv)
    return None if best is None else best[2]


def refusal(state: State, volumes: Volumes, node: Obj) -> str | None:
    if not all(pv_allows(pv, node) for pv in state.bound):
        return NODE_CONFLICT
    taken: set[str] = set()
    for claim, sc in state.unbound:
        pv = static_match(claim, sc, volumes, node, taken)
        if pv is not None:
            taken.add(pv["metadata"]["name"])
        elif sc.get("provisioner") == NO_PROVISIONER or not topology_allows(sc, node):
            return BIND_CONFLICT
    if not all(zone_allows(pv, node) for pv in state.bound):
        return ZONE_CONFLICT
    return None


def provisioned(claim: Obj, sc: Obj, node: Obj) -> Obj:
    """The PV a provisioner makes for the claim on the node: the claim's size and modes, pinned
    to the node's values of the class's allowedTopologies keys (its zone when the class names
    none and the node has one)."""
    spec = claim.get("spec") or {}
    node_labels = labels(node)
    keys = sorted({e["key"] for t in sc.get("allowedTopologies") or [] for e in t.get("matchLabelExpressions") or []})
    if not keys and "topology.kubernetes.io/zone" in node_labels:
        keys = ["topology.kubernetes.io/zone"]
    pv_spec: Obj = {
        "capacity": {"storage": ((spec.get("resources") or {}).get("requests") or {}).get("storage") or "1Gi"},
        "accessModes": spec.get("accessModes") or ["ReadWriteOnce"],
        "storageClassName": sc["metadata"]["name"],
        "persistentVolumeReclaimPolicy": sc.get("reclaimPolicy") or "Delete",
        "csi": {"driver": sc.get("provisioner") or "", "volumeHandle": f"pvc-{claim['metadata']['uid']}"},
    }
    pinned = [{"key": k, "operator": "In", "values": [node_labels[k]]} for k in keys if k in node_labels]
    if pinned:
        pv_spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": [{"matchExpressions": pinned}]}}
    return {"metadata": {"name": f"pvc-{claim['metadata']['uid']}"}, "spec": pv_spec}
