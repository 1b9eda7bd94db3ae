"""The scale-down plan's vocabulary: node states, the loop's settings, a node's decision, a removal, and
the plan and its input as values that cross a workflow boundary.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from pydantic import BaseModel, Field

from scaling.kube.drain import REPLICATED_KINDS, Blocker, PdbInfo, pod_key
from scaling.kube.models import NodeInfo, PodInfo, Resources
from scaling.nodes.disruption.refusals import RefusedConsolidation
from scaling.nodes.models import NodeGroup, ScaleDownSettings
from scaling.nodes.scale_down.storage import LonghornState

GROUP_SCALE_DOWN_DISABLED = "ScaleDownDisabledForGroup"
ROOM_TAKEN = "RoomTakenByPodsAboutToLand"  # a fit that fails only for the room waiting pods take


class NodeState(str, Enum):
    NOT_MANAGED = "NotManaged"  # no growth group label: never removed by growth
    REMOVING = "Removing"  # a NodeScaleDown is already running for it
    UTILIZED = "Utilized"  # at or above the utilization threshold
    BLOCKED = "Blocked"  # a candidate that something holds; see reasons
    UNNEEDED_WAITING = "UnneededWaiting"  # removable, waiting for a timer; see reasons
    EMPTY = "Empty"  # removable now
    UNDERUSED = "Underused"  # removable now
    EXPIRED = "Expired"  # to replace now: older than its group's expireAfter
    DRIFTED = "Drifted"  # to replace now: made from an earlier spec of its pool
    CONSOLIDATED = "Consolidated"  # to replace now by a cheaper node: underused, its pods fit nowhere else


class ScaleDownLoopSettings(BaseModel):
    """Loop-wide settings; per-group thresholds and timers come from NodeGroup.scale_down."""

    max_removals_per_loop: int = 10
    # CA's --max-bulk-soft-taint-count: soft taints put on or lifted a loop (scale_down.soft_taints);
    # 0 or less: none put on, those left lifted, as in CA.
    max_bulk_soft_taint_count: int = 10
    # CA's --node-deletion-candidate-ttl: a soft taint younger than this says a node's unneeded timer
    # on the loop's first evaluation (scale_down.soft_taints.timers_from_soft_taints); 0: off, as in CA.
    deletion_candidate_ttl_s: float = 0.0
    unready_time_s: float = 1200.0  # how long a NotReady node must be unneeded (CA: 20 min)
    default: ScaleDownSettings = Field(default_factory=ScaleDownSettings)  # unknown groups
    replicated_kinds: list[str] = Field(default_factory=lambda: sorted(REPLICATED_KINDS))


class NodeDecision(BaseModel):
    name: str
    state: NodeState
    group: str | None = None
    pool: str | None = None
    utilization: float = 0.0
    reasons: list[Blocker] = Field(default_factory=list)
    unneeded_since: float | None = None
    removable_at: float | None = None  # UNNEEDED_WAITING: when its timer runs out
    selected: bool = False

    @property
    def reason(self) -> str | None:
        return self.reasons[0].code if self.reasons else None


class NodeRemoval(BaseModel):
    """A node to start removing now (a NodeScaleDown child workflow)."""

    name: str
    group: str
    pool: str | None = None
    kind: NodeState  # a planned method's kind (EMPTY, UNDERUSED, EXPIRED, DRIFTED)
    scale_down_at: float  # when to delete it (seed 004's ScaleDownAt)
    pods_to_evict: list[str] = Field(default_factory=list)  # "namespace/name"
    destinations: dict[str, str] = Field(default_factory=dict)  # pod -> node it should fit on

    @classmethod
    def of(
        cls, dec: NodeDecision, at: float, evict: list[PodInfo], destinations: dict[str, str] | None = None
    ) -> NodeRemoval:
        """The removal of a selected node (its decision's state is the kind)."""
        return cls(
            name=dec.name,
            group=dec.group or "",
            pool=dec.pool,
            kind=dec.state,
            scale_down_at=at,
            pods_to_evict=sorted(pod_key(p) for p in evict),
            destinations=destinations or {},
        )


class ScaleDownPlan(BaseModel):
    decisions: dict[str, NodeDecision] = Field(default_factory=dict)
    to_remove: list[NodeRemoval] = Field(default_factory=list)
    unneeded_since: dict[str, float] = Field(default_factory=dict)
    # One multi-node consolidation's candidates, in disruption-cost order (scale_down.consolidation):
    # one NodeReplacement plans which of them go together.
    consolidation: list[NodeRemoval] = Field(default_factory=list)
    consolidation_allowed: int = 0  # how many of them may go together (the group's budget)
    refusals_ended: list[str] = Field(default_factory=list)  # nodes whose NotWorthIt no longer holds


class ScaleDownInput(BaseModel):
    """Everything plan_scale_down needs, as one value that can cross a workflow boundary."""

    nodes: list[NodeInfo]
    pods: list[PodInfo]
    pdbs: list[PdbInfo] = Field(default_factory=list)
    groups: list[NodeGroup] = Field(default_factory=list)
    storage: LonghornState | None = None
    now: float
    unneeded_since: dict[str, float] = Field(default_factory=dict)
    last_scale_up_at: float | None = None
    protected: list[str] = Field(default_factory=list)
    in_progress: list[str] = Field(default_factory=list)
    settings: ScaleDownLoopSettings = Field(default_factory=ScaleDownLoopSettings)
    refused: list[RefusedConsolidation] = Field(default_factory=list)
    # The catalogue's hourly prices (scaling.nodes.catalogue.hourly_prices): consolidation's order.
    prices: dict[str, float] = Field(default_factory=dict)
    replacing: list[str] = Field(default_factory=list)  # ScaleDownEvaluationInput.replacing


class FitResult(BaseModel):
    ok: bool
    blocker: Blocker | None = None
    placements: dict[str, str] = Field(default_factory=dict)  # pod -> target node


@dataclass
class Landing:
    """Where the pods waiting for the scheduler are about to land (scale_down.landing.land): the room
    they take before a removal's fit is worked out."""

    used: dict[str, Resources]  # what each node holds once they landed: the fits' room
    before: dict[str, Resources]  # what each node held before they landed (as about_to_land reads it)
    arriving: dict[str, list[PodInfo]] = field(default_factory=dict)  # node -> waiting pods placed on it
    tried: int = 0  # waiting pods tried, in their order (at most LANDING_MAX)
    # The most free cpu, memory and pod slots a target has once they landed, each on its own (None:
    # none landed): a pod about to land on a candidate that needs more fits nowhere else, found
    # without a scan of every target (a burst that fills the nodes makes most fits fail).
    ceiling: tuple[int, int, int] | None = None
    # Keys of the pods in ``arriving`` that are still on nodes being removed (landing.land_removals_first).
    removals: set[str] = field(default_factory=set)

    @property
    def placed(self) -> int:
        return sum(len(ps) for ps in self.arriving.values())

    def from_removals(self, node: str) -> list[PodInfo]:
        """The pods of removals in progress placed on ``node``."""
        return [p for p in self.arriving.get(node, []) if pod_key(p) in self.removals] if self.removals else []

    def room_taken(self, blocker: Blocker) -> Blocker:
        """A fit's NoPlaceToMovePods, when the fit succeeds but for the room these pods take."""
        whose = (
            "pods not yet scheduled and of pods on nodes being removed" if self.removals else "pods not yet scheduled"
        )
        return Blocker(
            code=ROOM_TAKEN,
            message=f"{blocker.message} once the room of {whose} is taken ({self.placed} placed)",
            pod=blocker.pod,
        )


class RemovalCheck(BaseModel):
    ok: bool
    blockers: list[Blocker] = Field(default_factory=list)


class ScaleDownReuse(BaseModel):
    """What the loop keeps of its last scale-down evaluation to tell whether the next would say the
    same: the worker's token of the cache it read, the input's reuse_key, and until when."""

    view: str
    key: str
    until: float
