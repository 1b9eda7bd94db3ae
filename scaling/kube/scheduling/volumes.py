"""PersistentVolumeClaims, PersistentVolumes and StorageClasses as VolumeBinding and
VolumeZone read them, parsed from the API's JSON, and one pod's volume topology resolved
from them (what a node must offer for the pod's claims)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from scaling.kube.affinity import required_node_affinity_terms
from scaling.kube.models import LABEL_REGION, LABEL_ZONE, NodeSelectorRequirement, NodeSelectorTerm

# The zone and region labels VolumeZone compares (beta names read as the GA ones).
BETA_ZONE = "failure-domain.beta.kubernetes.io/zone"
BETA_REGION = "failure-domain.beta.kubernetes.io/region"
TOPOLOGY_LABELS = (LABEL_ZONE, LABEL_REGION, BETA_ZONE, BETA_REGION)
GA = {BETA_ZONE: LABEL_ZONE, BETA_REGION: LABEL_REGION}


class Claim(BaseModel):
    namespace: str
    name: str
    volume_name: str = ""  # spec.volumeName: bound (or pre-bound) to this PV
    storage_class: str = ""


class Volume(BaseModel):
    name: str
    labels: dict[str, str] = Field(default_factory=dict)
    node_affinity: list[NodeSelectorTerm] = Field(default_factory=list)  # required terms, ORed


class StorageClass(BaseModel):
    name: str
    wait_for_first_consumer: bool = False
    allowed_topologies: list[NodeSelectorTerm] = Field(default_factory=list)  # ORed; empty: anywhere


class Volumes(BaseModel):
    claims: dict[str, Claim] = Field(default_factory=dict)  # "<namespace>/<name>"
    volumes: dict[str, Volume] = Field(default_factory=dict)
    classes: dict[str, StorageClass] = Field(default_factory=dict)


def parse_claim(obj: Mapping[str, Any]) -> Claim:
    meta, spec = obj.get("metadata") or {}, obj.get("spec") or {}
    return Claim(
        namespace=meta.get("namespace") or "default",
        name=meta.get("name") or "",
        volume_name=spec.get("volumeName") or "",
        storage_class=spec.get("storageClassName") or "",
    )


def parse_volume(obj: Mapping[str, Any]) -> Volume:
    meta, spec = obj.get("metadata") or {}, obj.get("spec") or {}
    return Volume(
        name=meta.get("name") or "",
        labels=dict(meta.get("labels") or {}),
        node_affinity=required_node_affinity_terms((spec.get("nodeAffinity") or {}).get("required") or {}),
    )


def parse_class(obj: Mapping[str, Any]) -> StorageClass:
    terms = [
        NodeSelectorTerm(
            match_expressions=tuple(
                NodeSelectorRequirement(key=e.get("key") or "", operator="In", values=tuple(e.get("values") or ()))
                for e in t.get("matchLabelExpressions") or []
            )
        )
        for t in obj.get("allowedTopologies") or []
    ]
    return StorageClass(
        name=(obj.get("metadata") or {}).get("name") or "",
        wait_for_first_consumer=obj.get("volumeBindingMode") == "WaitForFirstConsumer",
        allowed_topologies=terms,
    )


def volumes_from(claims: Sequence[Mapping], pvs: Sequence[Mapping], classes: Sequence[Mapping]) -> Volumes:
    out = Volumes()
    for c in map(parse_claim, claims):
        out.claims[f"{c.namespace}/{c.name}"] = c
    for v in map(parse_volume, pvs):
        out.volumes[v.name] = v
    for s in map(parse_class, classes):
        out.classes[s.name] = s
    return out


class VolumeTopology(BaseModel):
    """What one pod's claims ask of a node. `zones`: VolumeZone's (label, allowed values) from
    bound PVs' labels; `node_affinity`: each bound PV's required terms (ORed within one PV,
    every PV must hold); `provisioning`: each unbound WaitForFirstConsumer claim's class
    allowedTopologies (likewise); `problem`: why no node can take the pod (a missing claim, an
    unbound Immediate claim, a bound PV that does not exist)."""

    model_config = ConfigDict(frozen=True)

    zones: tuple[tuple[str, tuple[str, ...]], ...] = ()
    node_affinity: tuple[tuple[NodeSelectorTerm, ...], ...] = ()
    provisioning: tuple[tuple[NodeSelectorTerm, ...], ...] = ()
    problem: str = ""

    def __bool__(self) -> bool:
        return bool(self.zones or self.node_affinity or self.provisioning or self.problem)


def volume_topology(namespace: str, claim_names: Sequence[str], vols: Volumes) -> VolumeTopology:
    zones: list[tuple[str, tuple[str, ...]]] = []
    affinity: list[tuple[NodeSelectorTerm, ...]] = []
    provisioning: list[tuple[NodeSelectorTerm, ...]] = []
    for name in claim_names:
        claim = vols.claims.get(f"{namespace}/{name}")
        if claim is None:
            return VolumeTopology(problem=f'persistentvolumeclaim "{name}" not found')
        if claim.volume_name:
            pv = vols.volumes.get(claim.volume_name)
            if pv is None:
                return VolumeTopology(
                    problem="node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"
                )
            for key in TOPOLOGY_LABELS:
                if key in pv.labels:
                    # A PV may name several zones, joined by "__" (the volume helpers' convention).
                    zones.append((key, tuple(sorted(pv.labels[key].split("__")))))
            if pv.node_affinity:
                affinity.append(tuple(pv.node_affinity))
            continue
        sc = vols.classes.get(claim.storage_class)
        if sc is None or not sc.wait_for_first_consumer:
            return VolumeTopology(problem="pod has unbound immediate PersistentVolumeClaims")
        if sc.allowed_topologies:
            provisioning.append(tuple(sc.allowed_topologies))
    return VolumeTopology(
        zones=tuple(sorted(set(zones))), node_affinity=tuple(affinity), provisioning=tuple(provisioning)
    )
