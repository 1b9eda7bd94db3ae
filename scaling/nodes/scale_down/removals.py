"""NodeScaleDown: its input, its status record and phases (what crosses the autoscaler/child boundary)."""

from __future__ import annotations

from enum import Enum

from pydantic import BaseModel, Field

from scaling.nodes.models import InFlightRequest
from scaling.nodes.scale_down.models import ScaleDownLoopSettings

NODE_GONE = "NodeGone"  # a removal whose node left the cluster before it acted


class ScaleDownPhase(str, Enum):
    MARKED = "Marked"  # tainted + ScaleDownAt annotation, waiting on the timer
    CHECKING = "Checking"
    DRAINING = "Draining"
    DELETING = "Deleting"
    REMOVED = "Removed"
    CANCELLED = "Cancelled"  # pods landed, operator protected it, or the re-check found a blocker
    FAILED = "Failed"  # drain refused past the bounded retry time: node kept and untainted


FINAL_SCALE_DOWN_PHASES = frozenset({ScaleDownPhase.REMOVED, ScaleDownPhase.CANCELLED, ScaleDownPhase.FAILED})


class CandidateState(BaseModel):
    """One managed node as the last scale-down evaluation saw it (the status query lists these)."""

    node: str
    state: str  # scaling.scale_down.NodeState value
    reason: str | None = None
    message: str = ""
    group: str | None = None
    pool: str | None = None
    utilization: float = 0.0
    unneeded_since: float | None = None
    removable_at: float | None = None  # UnneededWaiting: when the timer holding it runs out


class NodeScaleDownInput(BaseModel):
    cluster: str
    node: str
    group: str = ""
    pool: str | None = None
    provider: str = "kwok"
    provider_id: str = ""
    kind: str = "Empty"  # NodeState EMPTY / UNDERUSED, or "Manual" (operator's remove-now)
    scale_down_at: float  # epoch seconds: seed 004's ScaleDownAt, after which the node is removed
    parent_workflow_id: str | None = None
    use_search_attributes: bool = False
    pdb_retry_s: float = 120.0
    eviction_retry_s: float = 2.0
    drain_timeout_s: float = 300.0
    protected: list[str] = Field(default_factory=list)
    settings: ScaleDownLoopSettings = Field(default_factory=ScaleDownLoopSettings)
    # A multi-node command's NodeReplacement (its workflow id): once cordoned, the node tells it and
    # evicts nothing until it answers that every node of the command is cordoned (None: drain at once).
    drain_gate: str | None = None
    # That command's key (orchestration.command_id), reported: the loop holds the command's successor
    # from scale-down while any node of it is in flight (its labelled node may be gone first).
    command: str | None = None
    # The command's other nodes, drained with this one: the re-check counts them as leaving and places
    # their pods first, so the command is checked as a whole (Karpenter validates a command so).
    moving_with: list[str] = Field(default_factory=list)


class ScaleDownStatus(BaseModel):
    node: str
    workflow_id: str = ""
    kind: str = "Empty"
    phase: ScaleDownPhase = ScaleDownPhase.MARKED
    scale_down_at: float = 0.0
    reason: str | None = None  # a blocker code when cancelled/failed
    message: str = ""
    evicted: list[str] = Field(default_factory=list)
    evictions_refused: int = 0
    provider_delete_failures: int = 0
    last_error: str = ""
    # A NotWorthIt consolidation's: the digest of what its plan read (scaling.nodes.disruption.refusals);
    # the loop keeps the node out of consolidation while the cluster shows the same.
    cluster_digest: str = ""
    command: str | None = None  # NodeScaleDownInput.command
    # A NodeReplacement's successors while they are made (none once Ready or given up): the loop's
    # planner counts their spare room for pending pods (InFlightRequest.successor). A few per command.
    successors: list[InFlightRequest] = Field(default_factory=list)
    successors_until: float = 0.0  # epoch s: counted no longer (orchestration.successors_lent_until)
    # The reporting run (the first 8 characters of its run id; "" in reports from before it): a later
    # run's report in the same words is news to the loop, the same signal delivered twice is not.
    run: str = ""

    @property
    def final(self) -> bool:
        return self.phase in FINAL_SCALE_DOWN_PHASES
