"""Longhorn-aware scale-down rules (seed 003: Longhorn's state keeps a node until its volumes are
detached and another schedulable node holds their replicas).

A node holding Longhorn state is kept while any of these is true:
- a volume is attached to it (or an engine of a volume still runs there);
- it holds the only healthy replica of a volume: no other schedulable node has one;
- it runs a backing-image-manager or share-manager pod (Longhorn never marks those
  safe to evict, and losing them loses data or service).
It may go once its volumes are detached and each replica on it has a healthy peer on another
schedulable node. Replica rebuilding may cost time, but no data is lost.

Objects are longhorn.io/v1beta2 custom resources as plain dicts; only the fields the rules
need are read.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from scaling.kube.drain import Blocker
from scaling.kube.models import PodInfo

LONGHORN_NAMESPACE = "longhorn-system"
LABEL_COMPONENT = "longhorn.io/component"
COMPONENT_BACKING_IMAGE_MANAGER = "backing-image-manager"
COMPONENT_SHARE_MANAGER = "share-manager"

VOLUME_ATTACHED = "LonghornVolumeAttached"
LAST_HEALTHY_REPLICA = "LonghornLastHealthyReplica"
BACKING_IMAGE_MANAGER = "LonghornBackingImageManager"
SHARE_MANAGER = "LonghornShareManager"

# A volume in any of these states holds its node (attaching/detaching still run an engine).
_HELD_STATES = frozenset({"attached", "attaching", "detaching"})


class LonghornVolume(BaseModel):
    name: str
    state: str = "detached"  # status.state: creating, attached, attaching, detaching, detached
    node: str | None = None  # status.currentNodeID (spec.nodeID while attaching)
    replicas_wanted: int = 3

    @property
    def attached(self) -> bool:
        return self.state in _HELD_STATES and bool(self.node)


class LonghornReplica(BaseModel):
    name: str
    volume: str
    node: str
    healthy: bool  # has been rebuilt (healthyAt set) and has not failed since (failedAt empty)


class LonghornEngine(BaseModel):
    name: str
    volume: str
    node: str
    running: bool


class LonghornInstanceManager(BaseModel):
    name: str
    node: str
    type: str = "aio"  # engine, replica or aio (one manager for both, Longhorn >= 1.5)
    instances: int = 0  # processes it runs (status.instance*)


class LonghornState(BaseModel):
    """What growth knows of Longhorn in a cluster; ``present`` is False without its CRDs."""

    present: bool = True
    volumes: list[LonghornVolume] = Field(default_factory=list)
    replicas: list[LonghornReplica] = Field(default_factory=list)
    engines: list[LonghornEngine] = Field(default_factory=list)
    instance_managers: list[LonghornInstanceManager] = Field(default_factory=list)
    backing_image_manager_pods: dict[str, list[str]] = Field(default_factory=dict)  # node -> pods
    share_manager_pods: dict[str, list[str]] = Field(default_factory=dict)  # node -> pods


def _replica_healthy(obj: dict) -> bool:
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    if spec.get("failedAt") or status.get("currentState") == "error":
        return False
    return bool(spec.get("healthyAt"))


def _component(pod: PodInfo) -> str | None:
    comp = pod.labels.get(LABEL_COMPONENT)
    if comp:
        return comp
    # Older charts lack the label; the pod names are stable prefixes.
    for prefix in (COMPONENT_BACKING_IMAGE_MANAGER, COMPONENT_SHARE_MANAGER):
        if pod.name.startswith(prefix + "-"):
            return prefix
    return None


def longhorn_state_from_objects(
    volumes: list[dict],
    replicas: list[dict],
    engines: list[dict],
    instance_managers: list[dict],
    pods: list[PodInfo],
) -> LonghornState:
    vols: list[LonghornVolume] = []
    for obj in volumes:
        spec = obj.get("spec") or {}
        status = obj.get("status") or {}
        state = status.get("state") or "detached"
        node = status.get("currentNodeID") or (spec.get("nodeID") if state == "attaching" else None)
        vols.append(
            LonghornVolume(
                name=obj["metadata"]["name"],
                state=state,
                node=node or None,
                replicas_wanted=int(spec.get("numberOfReplicas") or 3),
            )
        )
    reps = [
        LonghornReplica(
            name=o["metadata"]["name"],
            volume=(o.get("spec") or {}).get("volumeName", ""),
            node=(o.get("spec") or {}).get("nodeID", ""),
            healthy=_replica_healthy(o),
        )
        for o in replicas
    ]
    engs = [
        LonghornEngine(
            name=o["metadata"]["name"],
            volume=(o.get("spec") or {}).get("volumeName", ""),
            node=(o.get("spec") or {}).get("nodeID", ""),
            running=(o.get("status") or {}).get("currentState") == "running",
        )
        for o in engines
    ]
    ims: list[LonghornInstanceManager] = []
    for o in instance_managers:
        status = o.get("status") or {}
        count = sum(len(status.get(k) or {}) for k in ("instances", "instanceEngines", "instanceReplicas"))
        ims.append(
            LonghornInstanceManager(
                name=o["metadata"]["name"],
                node=(o.get("spec") or {}).get("nodeID", ""),
                type=(o.get("spec") or {}).get("type", "aio"),
                instances=count,
            )
        )
    bim: dict[str, list[str]] = {}
    shm: dict[str, list[str]] = {}
    for pod in pods:
        if pod.namespace != LONGHORN_NAMESPACE or not pod.node_name:
            continue
        if pod.phase in ("Succeeded", "Failed"):
            continue
        comp = _component(pod)
        if comp == COMPONENT_BACKING_IMAGE_MANAGER:
            bim.setdefault(pod.node_name, []).append(pod.name)
        elif comp == COMPONENT_SHARE_MANAGER:
            shm.setdefault(pod.node_name, []).append(pod.name)
    return LonghornState(
        volumes=vols,
        replicas=reps,
        engines=engs,
        instance_managers=ims,
        backing_image_manager_pods=bim,
        share_manager_pods=shm,
    )


def storage_blockers(
    node_name: str,
    state: LonghornState | None,
    schedulable_nodes: set[str] | frozenset[str],
) -> list[Blocker]:
    """Why Longhorn needs ``node_name`` kept. ``schedulable_nodes`` are the nodes that stay:
    ready, not cordoned, not tainted for deletion and not being removed in this plan."""
    if state is None or not state.present:
        return []
    out: list[Blocker] = []
    attached = sorted(v.name for v in state.volumes if v.attached and v.node == node_name)
    for vol in attached:
        out.append(
            Blocker(
                code=VOLUME_ATTACHED,
                message=f"volume {vol} attached to node {node_name}",
                volume=vol,
            )
        )
    # An engine still running here (e.g. mid-detach, volume status lagging) holds the node too.
    engine_vols = sorted({e.volume for e in state.engines if e.node == node_name and e.running} - set(attached))
    for vol in engine_vols:
        out.append(
            Blocker(
                code=VOLUME_ATTACHED,
                message=f"volume {vol} has a running engine on node {node_name}",
                volume=vol,
            )
        )
    here = sorted({r.volume for r in state.replicas if r.node == node_name and r.healthy})
    for vol in here:
        peers = [
            r
            for r in state.replicas
            if r.volume == vol and r.healthy and r.node != node_name and r.node in schedulable_nodes
        ]
        if not peers:
            out.append(
                Blocker(
                    code=LAST_HEALTHY_REPLICA,
                    message=f"node {node_name} holds the only healthy replica of volume {vol}",
                    volume=vol,
                )
            )
    for pod in sorted(state.backing_image_manager_pods.get(node_name, [])):
        out.append(
            Blocker(
                code=BACKING_IMAGE_MANAGER,
                message=f"node {node_name} runs backing-image-manager pod {LONGHORN_NAMESPACE}/{pod}",
                pod=f"{LONGHORN_NAMESPACE}/{pod}",
            )
        )
    for pod in sorted(state.share_manager_pods.get(node_name, [])):
        out.append(
            Blocker(
                code=SHARE_MANAGER,
                message=f"node {node_name} runs share-manager pod {LONGHORN_NAMESPACE}/{pod}",
                pod=f"{LONGHORN_NAMESPACE}/{pod}",
            )
        )
    return out
