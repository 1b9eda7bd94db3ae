"""What blocks evicting a pod or removing a node (Cluster Autoscaler's drain rules).

Pure functions over the shared models plus a small PDB model. Every blocker carries a stable
reason code (the Cluster Autoscaler names where one exists) and a message naming the object.

Rule order per pod, first match wins for the pod:
0. A pod deleted longer ago than its terminationGracePeriodSeconds plus 30 s (Cluster
   Autoscaler's "long terminating" rule) is treated as gone: it neither blocks nor is moved,
   nor counts towards utilization. Its kubelet is probably dead (a NotReady node keeps such
   pods forever); a drain waiting for it would time out.
1. ``safe-to-evict: "false"`` blocks (NotSafeToEvictAnnotation).
2. Unless ``safe-to-evict: "true"``: kube-system pods that are not DaemonSet pods and have no
   PDB (UnmovableKubeSystemPod), pods without a recognised workload controller (NotReplicated),
   pods with local-storage volumes (LocalStorageRequested): hostPath and emptyDir on disk; an
   emptyDir with medium Memory is not local storage, and volumes named in
   ``safe-to-evict-local-volumes: "vol1,vol2"`` do not block.
3. PDBs always apply, even to ``safe-to-evict: "true"`` pods: Longhorn (seed 003) annotates
   its instance-manager pods "true" and relies on their PDBs to hold a node with attached
   volumes or the last healthy replica.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Literal

from pydantic import BaseModel, Field

from scaling.kube.models import NodeInfo, PodInfo
from scaling.kube.pods import follows_node

ANNOTATION_SAFE_TO_EVICT = "cluster-autoscaler.kubernetes.io/safe-to-evict"
ANNOTATION_SAFE_TO_EVICT_LOCAL_VOLUMES = "cluster-autoscaler.kubernetes.io/safe-to-evict-local-volumes"
ANNOTATION_SCALE_DOWN_DISABLED = "cluster-autoscaler.kubernetes.io/scale-down-disabled"
# Cluster Autoscaler's taint on a node it is deleting. growth uses the same key so that
# software that reacts to CA (Longhorn releases its instance-manager PDBs, seed 003) also
# reacts to growth.
TAINT_TO_BE_DELETED = "ToBeDeletedByClusterAutoscaler"
# CA's soft taint (PreferNoSchedule) on a node it found unneeded and may delete when its unneeded
# time is over: the scheduler still binds there when no other node fits, which is what keeps the
# node (cluster-autoscaler utils/taints/taints.go DeletionCandidateTaintKey). growth's loop puts it on
# every unneeded node as CA's does (scaling.nodes.scale_down.soft_taints), and a removal on an empty
# node for its wait, with the ScaleDownAt annotation below; the hard taint only when the wait is over.
TAINT_DELETION_CANDIDATE = "DeletionCandidateOfClusterAutoscaler"
DELETION_TAINT_KEYS = frozenset({TAINT_TO_BE_DELETED, TAINT_DELETION_CANDIDATE})
# When a removal will delete the node (seed 004's ScaleDownAt); set with the removal's mark, soft or hard.
ANNOTATION_SCALE_DOWN_AT = "growth.autoscaling.dev/scale-down-at"
# Karpenter's taint on the candidates of a disruption command, from its decision on (before its
# replacements are launched) until they are deleted or the command rolls back: no new pod lands on
# a node whose pods the command has planned to move (pkg/controllers/disruption/controller.go
# executeCommand, MarkDisrupted). A NoSchedule taint, not a cordon: the node keeps its pods.
TAINT_DISRUPTED = "karpenter.sh/disrupted"
KUBE_SYSTEM = "kube-system"
# Controllers that recreate an evicted pod somewhere else (Deployments act through ReplicaSets).
REPLICATED_KINDS = frozenset({"ReplicaSet", "StatefulSet", "ReplicationController", "Job"})
TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})
# Cluster Autoscaler's PodLongTerminatingExtraThreshold, and the API's default grace period.
LONG_TERMINATING_MARGIN_S = 30.0
DEFAULT_GRACE_PERIOD_S = 30

# Stable reason codes.
NOT_SAFE_TO_EVICT = "NotSafeToEvictAnnotation"
SCALE_DOWN_DISABLED = "ScaleDownDisabledAnnotation"
NOT_ENOUGH_PDB = "NotEnoughPdb"
NOT_REPLICATED = "NotReplicated"
LOCAL_STORAGE = "LocalStorageRequested"
UNMOVABLE_KUBE_SYSTEM = "UnmovableKubeSystemPod"
PROTECTED = "ProtectedByOperator"
NO_PLACE_TO_MOVE = "NoPlaceToMovePods"
MIN_NODES = "MinNodesReached"


class Blocker(BaseModel):
    """One reason a node cannot be removed (or a pod cannot be evicted)."""

    code: str
    message: str
    pod: str | None = None  # "namespace/name"
    volume: str | None = None

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"


class LabelSelectorRequirement(BaseModel):
    key: str
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist"]
    values: list[str] = Field(default_factory=list)


class LabelSelector(BaseModel):
    match_labels: dict[str, str] = Field(default_factory=dict)
    match_expressions: list[LabelSelectorRequirement] = Field(default_factory=list)

    def matches(self, labels: dict[str, str]) -> bool:
        for k, v in self.match_labels.items():
            if labels.get(k) != v:
                return False
        for req in self.match_expressions:
            present = req.key in labels
            if req.operator == "In" and not (present and labels[req.key] in req.values):
                return False
            if req.operator == "NotIn" and present and labels[req.key] in req.values:
                return False
            if req.operator == "Exists" and not present:
                return False
            if req.operator == "DoesNotExist" and present:
                return False
        return True


class PdbInfo(BaseModel):
    """A PodDisruptionBudget as the drain rules need it (policy/v1)."""

    namespace: str
    name: str
    # None = a null selector, which selects no pod; an empty selector selects every pod of
    # the namespace (policy/v1 semantics).
    selector: LabelSelector | None = None
    disruptions_allowed: int = 0

    def selects(self, pod: PodInfo) -> bool:
        return self.selector is not None and pod.namespace == self.namespace and self.selector.matches(pod.labels)


def pdb_from_object(obj: dict) -> PdbInfo:
    """Build a PdbInfo from a policy/v1 PodDisruptionBudget API object (a plain dict)."""
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    sel = spec.get("selector")
    selector = None
    if sel is not None:
        selector = LabelSelector(
            match_labels=sel.get("matchLabels") or {},
            match_expressions=[
                LabelSelectorRequirement(key=e["key"], operator=e["operator"], values=e.get("values") or [])
                for e in sel.get("matchExpressions") or []
            ],
        )
    return PdbInfo(
        namespace=meta.get("namespace", "default"),
        name=meta.get("name", ""),
        selector=selector,
        disruptions_allowed=int(status.get("disruptionsAllowed") or 0),
    )


def pod_key(pod: PodInfo) -> str:
    return f"{pod.namespace}/{pod.name}"


def is_terminal(pod: PodInfo) -> bool:
    return pod.phase in TERMINAL_PHASES


def long_terminating_after(pod: PodInfo) -> float | None:
    """When a deleted pod starts to count as long terminating (epoch seconds); None if not deleted."""
    if pod.deletion_timestamp is None:
        return None
    grace = pod.termination_grace_period_s
    if grace is None:
        grace = DEFAULT_GRACE_PERIOD_S
    return pod.deletion_timestamp.timestamp() + grace + LONG_TERMINATING_MARGIN_S


def is_long_terminating(pod: PodInfo, now: float) -> bool:
    """Deleted more than its grace period plus LONG_TERMINATING_MARGIN_S ago (``now`` in epoch
    seconds): scale-down treats it as gone (rule 0 above)."""
    after = long_terminating_after(pod)
    return after is not None and after < now


def without_long_terminating(pods: list[PodInfo], now: float) -> list[PodInfo]:
    return [p for p in pods if not is_long_terminating(p, now)]


def stays_with_node(pod: PodInfo) -> bool:
    """DaemonSet, mirror and finished pods are not evicted: they go away with the node."""
    return follows_node(pod) or is_terminal(pod)


def pods_on_node(node_name: str, pods: list[PodInfo]) -> list[PodInfo]:
    return [p for p in pods if p.node_name == node_name]


def pods_by_node(pods: list[PodInfo]) -> dict[str, list[PodInfo]]:
    """Bound pods grouped by node, in their original order: index once, then each per-node
    helper (pods_on_node, pods_to_evict, utilization...) reads its node's list, not all pods."""
    out: dict[str, list[PodInfo]] = {}
    for p in pods:
        if p.node_name:
            out.setdefault(p.node_name, []).append(p)
    return out


def pods_to_evict(node_name: str, pods: list[PodInfo]) -> list[PodInfo]:
    return [p for p in pods_on_node(node_name, pods) if not stays_with_node(p)]


def safe_to_evict(pod: PodInfo) -> bool | None:
    """The pod's safe-to-evict annotation: True, False or None when absent/other."""
    value = pod.annotations.get(ANNOTATION_SAFE_TO_EVICT)
    if value == "true":
        return True
    if value == "false":
        return False
    return None


def safe_local_volumes(pod: PodInfo) -> set[str]:
    """Volume names the pod's safe-to-evict-local-volumes annotation lists."""
    value = pod.annotations.get(ANNOTATION_SAFE_TO_EVICT_LOCAL_VOLUMES, "")
    return {v.strip() for v in value.split(",") if v.strip()}


def blocking_local_volumes(pod: PodInfo) -> list[str]:
    """The pod's local-storage volumes its annotation does not list as safe to lose."""
    safe = safe_local_volumes(pod)
    return [v for v in pod.local_volumes if v not in safe]


def has_blocking_local_storage(pod: PodInfo) -> bool:
    if pod.local_volumes:
        return bool(blocking_local_volumes(pod))
    return pod.has_local_storage  # built without volume names: every local volume blocks


def marked_for_deletion(node: NodeInfo) -> bool:
    return deletion_marked({t.key for t in node.taints}, node.annotations)


def deletion_marked(taint_keys: Collection[str], annotations: Mapping[str, str]) -> bool:
    """On its way out: the hard mark, or a removal's soft one (its ScaleDownAt beside it). The soft
    taint alone is Cluster Autoscaler's hint on an unneeded node: the node still serves and may still
    take pods, so the planners count its room and may remove it."""
    return TAINT_TO_BE_DELETED in taint_keys or (
        TAINT_DELETION_CANDIDATE in taint_keys and ANNOTATION_SCALE_DOWN_AT in annotations
    )


def node_blockers(node: NodeInfo, protected: set[str] | frozenset[str] = frozenset()) -> list[Blocker]:
    """Blockers that come from the node itself, not from its pods."""
    out: list[Blocker] = []
    if node.name in protected:
        out.append(Blocker(code=PROTECTED, message=f"node {node.name} is protected by an operator"))
    if node.annotations.get(ANNOTATION_SCALE_DOWN_DISABLED) == "true":
        out.append(
            Blocker(
                code=SCALE_DOWN_DISABLED,
                message=f"node {node.name} has annotation {ANNOTATION_SCALE_DOWN_DISABLED}=true",
            )
        )
    return out


def pod_blocker(
    pod: PodInfo,
    pdbs: list[PdbInfo],
    replicated_kinds: frozenset[str] = REPLICATED_KINDS,
) -> Blocker | None:
    """Why this one pod may not be evicted, ignoring PDB budgets (see PdbBudget for those)."""
    key = pod_key(pod)
    ste = safe_to_evict(pod)
    if ste is False:
        return Blocker(
            code=NOT_SAFE_TO_EVICT,
            message=f"pod {key} has annotation {ANNOTATION_SAFE_TO_EVICT}=false",
            pod=key,
        )
    if ste is True:
        return None
    if pod.namespace == KUBE_SYSTEM and not pod.is_daemonset:
        if not any(pdb.selects(pod) for pdb in pdbs):
            return Blocker(
                code=UNMOVABLE_KUBE_SYSTEM,
                message=f"pod {key} is a kube-system pod without a PodDisruptionBudget",
                pod=key,
            )
    if pod.controller_kind is None:
        return Blocker(code=NOT_REPLICATED, message=f"pod {key} has no controller", pod=key)
    if pod.controller_kind not in replicated_kinds:
        return Blocker(
            code=NOT_REPLICATED,
            message=f"pod {key} is owned by {pod.controller_kind}, not a workload controller",
            pod=key,
        )
    if has_blocking_local_storage(pod):
        names = blocking_local_volumes(pod)
        what = f"volume {', '.join(names)}" if names else "emptyDir or hostPath"
        return Blocker(
            code=LOCAL_STORAGE,
            message=(
                f"pod {key} uses local storage ({what}); list the volumes that may be lost in "
                f"annotation {ANNOTATION_SAFE_TO_EVICT_LOCAL_VOLUMES}"
            ),
            pod=key,
            volume=names[0] if names else None,
        )
    return None


class PdbBudget:
    """Disruptions still allowed per PDB while a loop plans several evictions.

    Budgets are shared: two nodes removed in one loop draw from the same PDB (as Cluster
    Autoscaler's remaining-PDB tracker does).
    """

    def __init__(self, pdbs: list[PdbInfo]) -> None:
        self.pdbs = list(pdbs)
        self.remaining = {(p.namespace, p.name): p.disruptions_allowed for p in pdbs}

    def check(self, pods: list[PodInfo], one_at_a_time: bool = False) -> Blocker | None:
        """The first PDB that evicting all ``pods`` would violate, or None. ``one_at_a_time``: each PDB
        need only allow one disruption now, the drain evicting the rest as it lets them (Karpenter's
        rule, kubernetes-sigs/karpenter pkg/utils/pdb/pdb.go CanEvictPods; Cluster Autoscaler's
        wants them all at once)."""
        need: dict[tuple[str, str], list[PodInfo]] = {}
        for pod in pods:
            for pdb in self.pdbs:
                if pdb.selects(pod):
                    need.setdefault((pdb.namespace, pdb.name), []).append(pod)
        for (ns, name), selected in sorted(need.items()):
            left = self.remaining[(ns, name)]
            if (1 if one_at_a_time else len(selected)) > left:
                names = ", ".join(pod_key(p) for p in selected)
                return Blocker(
                    code=NOT_ENOUGH_PDB,
                    message=(
                        f"evicting pod {names} would violate PodDisruptionBudget {ns}/{name} "
                        f"({left} disruptions allowed, {len(selected)} needed)"
                    ),
                    pod=pod_key(selected[0]),
                )
        return None

    def consume(self, pods: list[PodInfo]) -> None:
        for pod in pods:
            for pdb in self.pdbs:
                if pdb.selects(pod):
                    self.remaining[(pdb.namespace, pdb.name)] -= 1


def drain_blockers(
    node_name: str,
    pods: list[PodInfo],
    pdbs: list[PdbInfo],
    budget: PdbBudget | None = None,
    replicated_kinds: frozenset[str] = REPLICATED_KINDS,
    one_at_a_time: bool = False,
) -> list[Blocker]:
    """Everything that blocks draining ``node_name`` (one blocker per pod, then PDBs; see
    PdbBudget.check for ``one_at_a_time``)."""
    evict = pods_to_evict(node_name, pods)
    out = [b for p in evict if (b := pod_blocker(p, pdbs, replicated_kinds)) is not None]
    pdb_block = (budget or PdbBudget(pdbs)).check(evict, one_at_a_time)
    if pdb_block is not None:
        out.append(pdb_block)
    return out
