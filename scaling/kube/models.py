"""Kubernetes facts every loop reads: resources, taints, tolerations, pods and nodes.

Resources are integers in base units (millicores, bytes, pod slots) so arithmetic is exact
and pydantic round-trips them through Temporal's JSON without loss.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from scaling.kube.scheduling.terms import HostPort, PodAffinityTerm, SpreadConstraint

LABEL_INSTANCE_TYPE = "node.kubernetes.io/instance-type"


LABEL_ARCH = "kubernetes.io/arch"


LABEL_HOSTNAME = "kubernetes.io/hostname"


LABEL_OS = "kubernetes.io/os"


LABEL_REGION = "topology.kubernetes.io/region"


LABEL_ZONE = "topology.kubernetes.io/zone"
# Every node growth creates runs Linux (the kubelet sets this label; planned nodes carry it too).
NODE_OS = "linux"


class Resources(BaseModel):
    """What a pod requests or a node offers. `extended`: every resource beyond cpu, memory and
    pod slots (ephemeral-storage, hugepages-2Mi, nvidia.com/gpu, example.com/foo ...) as sorted
    (name, amount) pairs, empty for most pods; a node without a resource offers 0 of it."""

    model_config = ConfigDict(frozen=True)

    cpu_m: int = 0
    memory: int = 0
    pods: int = 0
    extended: tuple[tuple[str, int], ...] = ()

    def __add__(self, other: Resources) -> Resources:
        return Resources(
            cpu_m=self.cpu_m + other.cpu_m,
            memory=self.memory + other.memory,
            pods=self.pods + other.pods,
            extended=_merge(self.extended, other.extended, 1),
        )

    def __sub__(self, other: Resources) -> Resources:
        return Resources(
            cpu_m=self.cpu_m - other.cpu_m,
            memory=self.memory - other.memory,
            pods=self.pods - other.pods,
            extended=_merge(self.extended, other.extended, -1),
        )

    def amount(self, name: str) -> int:
        return dict(self.extended).get(name, 0)

    @property
    def size(self) -> float:
        """One number to order pods largest first by: cores plus memory in 4 GiB units (the scale-up
        planner's first-fit order, which consolidation's plans and order searches follow)."""
        return self.cpu_m / 1000 + self.memory / 2**32

    def fits_in(self, other: Resources) -> bool:
        if self.extended:
            have = dict(other.extended)
            if any(q > have.get(k, 0) for k, q in self.extended):
                return False
        return self.cpu_m <= other.cpu_m and self.memory <= other.memory and self.pods <= other.pods

    @staticmethod
    def total(items: Iterable[Resources]) -> Resources:
        """The sum as one model: adding models one by one builds one per pod, and a scale-down
        evaluation of 10,000 pods spent most of its time doing that."""
        cpu_m = memory = pods = 0
        extended: dict[str, int] = {}
        for r in items:
            cpu_m, memory, pods = cpu_m + r.cpu_m, memory + r.memory, pods + r.pods
            for k, q in r.extended:
                extended[k] = extended.get(k, 0) + q
        return Resources(cpu_m=cpu_m, memory=memory, pods=pods, extended=tuple(sorted(extended.items())))


def _merge(a: tuple[tuple[str, int], ...], b: tuple[tuple[str, int], ...], sign: int) -> tuple[tuple[str, int], ...]:
    if not b:
        return a
    out = dict(a)
    for k, q in b:
        out[k] = out.get(k, 0) + sign * q
    return tuple(sorted(out.items()))


# Resources as a plain tuple (cpu millicores, memory bytes, pod slots): the scale-up planner
# and its packer count pods into room with these.
Vec = tuple[int, int, int]


def vec(r: Resources) -> Vec:
    return (r.cpu_m, r.memory, r.pods)


def fit_count(req: Sequence[int], room: Sequence[int]) -> int:
    """How many pods of `req` fit in `room`, over the dimensions `req` needs. Room short of one
    of them (negative: a node its DaemonSets overfill) holds none: 0, never a negative count that
    a caller would take from what is left. A `req` of all zeros counts 0 too."""
    if len(req) == 3 and len(room) == 3:  # the planner's vectors: unrolled, it counts a lot
        q0, q1, q2 = req
        c0, c1, c2 = room
        big = 1 << 62
        n3 = min(c0 // q0 if q0 > 0 else big, c1 // q1 if q1 > 0 else big, c2 // q2 if q2 > 0 else big)
        return 0 if n3 == big or n3 < 0 else n3
    n = None
    for q, c in zip(req, room):
        if q > 0:
            n = c // q if n is None else min(n, c // q)
    return max(n or 0, 0)


class Taint(BaseModel):
    model_config = ConfigDict(frozen=True)

    key: str
    value: str = ""
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] = "NoSchedule"


class Toleration(BaseModel):
    model_config = ConfigDict(frozen=True)

    key: str = ""
    operator: Literal["Equal", "Exists"] = "Equal"
    value: str = ""
    effect: str = ""  # empty matches every effect


class NodeSelectorRequirement(BaseModel):
    model_config = ConfigDict(frozen=True)

    key: str
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"] = "In"
    values: tuple[str, ...] = ()


class NodeSelectorTerm(BaseModel):
    """One term of required node affinity: its expressions ANDed (terms are ORed)."""

    model_config = ConfigDict(frozen=True)

    match_expressions: tuple[NodeSelectorRequirement, ...] = ()
    match_fields: tuple[NodeSelectorRequirement, ...] = ()


class PodSpread(BaseModel):
    """A per-node limit on pods matching a selector, from required pod anti-affinity or a
    DoNotSchedule topology spread constraint, both with topologyKey kubernetes.io/hostname
    (scaling.kube.affinity.pod_spreads builds it).

    The pod fits a node where fewer than `limit` pods matching the selector (in `namespaces`;
    empty = every namespace) run. `counts_self`: the pod matches its own selector, so each one
    placed counts too, and a new node takes at most `limit` of them."""

    model_config = ConfigDict(frozen=True)

    match_labels: tuple[tuple[str, str], ...] = ()
    match_expressions: tuple[NodeSelectorRequirement, ...] = ()  # In, NotIn, Exists, DoesNotExist
    namespaces: tuple[str, ...] = ()
    limit: int = 1
    counts_self: bool = True


class TopologySpread(BaseModel):
    """A DoNotSchedule topology spread constraint over domains wider than a node (zone, region):
    pods matching the selector may differ by at most `max_skew` between the domains (values of
    `key`) of the nodes the pod may use (scaling.kube.affinity.topology_spreads builds it)."""

    model_config = ConfigDict(frozen=True)

    key: str
    match_labels: tuple[tuple[str, str], ...] = ()
    match_expressions: tuple[NodeSelectorRequirement, ...] = ()
    namespaces: tuple[str, ...] = ()
    max_skew: int = 1
    counts_self: bool = True
    # While fewer domains than this exist, the global minimum counts as 0 (None: not set).
    min_domains: int | None = None


class PodInfo(BaseModel):
    """What growth needs to know about one pod (built from the API object by scaling.kube.pods)."""

    namespace: str
    name: str
    uid: str
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)
    node_selector: dict[str, str] = Field(default_factory=dict)
    tolerations: list[Toleration] = Field(default_factory=list)
    node_affinity: list[NodeSelectorTerm] = Field(default_factory=list)  # required terms, ORed
    spreads: list[PodSpread] = Field(default_factory=list)  # per-node limits (hostname anti-affinity, spread)
    topology_spreads: list[TopologySpread] = Field(default_factory=list)  # zone/region spread
    requests: Resources = Resources(pods=1)
    # cpu, memory as the scheduler's resource scores read them: real, then non-zero (a container
    # without a request counting 100m / 200 MiB); scaling.kube.pods.score_requests. None: not
    # read from a pod spec (implied_score_requests stands in).
    score_requests: tuple[int, int, int, int] | None = None
    node_name: str | None = None
    phase: str = "Pending"
    controller_kind: str | None = None  # kind of the ownerReference with controller=true
    is_daemonset: bool = False
    is_mirror: bool = False
    unschedulable: bool = False
    unschedulable_since: datetime | None = None
    has_local_storage: bool = False  # emptyDir (not medium Memory) or hostPath volumes
    local_volumes: list[str] = Field(default_factory=list)  # their names
    pvc_names: list[str] = Field(default_factory=list)
    deletion_timestamp: datetime | None = None  # set once the pod is being deleted
    termination_grace_period_s: int | None = None  # spec.terminationGracePeriodSeconds (None: 30)
    # What the scheduler's NodePorts, InterPodAffinity and PodTopologySpread filters read
    # (scaling.kube.scheduling): app containers' host ports, required pod (anti-)affinity terms,
    # every topology spread constraint.
    host_ports: list[HostPort] = Field(default_factory=list)
    pod_affinity: list[PodAffinityTerm] = Field(default_factory=list)
    pod_anti_affinity: list[PodAffinityTerm] = Field(default_factory=list)
    spread_constraints: list[SpreadConstraint] = Field(default_factory=list)
    # A digest of the spec those three came from (with the namespace and the labels that
    # matchLabelKeys read): what a shape key takes of them, without dumping them per pod.
    terms_key: str = ""
    # Filter plugins whose input the pod has but growth does not model (DynamicResources for
    # spec.resourceClaims): the planner reports such a pod and buys nothing for it.
    unmodelled: list[str] = Field(default_factory=list)
    # spec.schedulerName when it is not the kube-scheduler's ("default-scheduler"): growth models
    # that scheduler only, so such a pod is never counted as about to land on a node.
    scheduler_name: str | None = None


class NodeInfo(BaseModel):
    name: str
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)
    taints: list[Taint] = Field(default_factory=list)
    allocatable: Resources = Resources()
    requested: Resources = Resources()  # sum of requests of non-terminal pods bound here
    ready: bool = False
    unschedulable: bool = False  # cordoned (spec.unschedulable)
    provider_id: str = ""
    created_at: datetime | None = None
    host_ports: list[HostPort] = Field(default_factory=list)  # bound by the pods running here
