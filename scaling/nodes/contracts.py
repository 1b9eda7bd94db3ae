"""The node loop's contract between workflows and activities: activity names and the models
they take and return. Workflows import this module, never activity implementations; the
worker registers an implementation under each name, and test stubs register under the same."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

from scaling.kube.drain import Blocker, PdbInfo
from scaling.kube.models import (
    NodeInfo,
    PodInfo,
    Taint,
)
from scaling.nodes.disruption.refusals import RefusedConsolidation
from scaling.nodes.models import (
    NodeGroup,
    PlannedNode,
    PodProblem,
    Pool,
    SpecProblem,
)
from scaling.nodes.scale_down.models import NodeState, ScaleDownLoopSettings
from scaling.nodes.scale_down.removals import CandidateState
from scaling.nodes.scale_down.storage import LonghornState
from scaling.nodes.scale_up.approvals import ApprovalGate
from scaling.nodes.scale_up.demand import PendingDemand
from scaling.nodes.scale_up.requests import NodeRequestStatus

# Activity names (registered by activities/nodes, called by workflows/nodes). Every input that
# touches a cluster names it (`cluster`): one worker serves many clusters and resolves each
# cluster's client from its settings.
OBSERVE_CLUSTER = "observe_cluster"
# The NodeAutoscaler's signal: pods became unschedulable after its last observation.
PODS_PENDING = "pods_pending"
# The NodeAutoscaler's signal: one of its NodeRequests changed (NodeRequestStatus, without pods).
REQUEST_CHANGED = "request_changed"
# The NodeAutoscaler's signal: members of one NodeRequestBatch changed (list[NodeRequestStatus]).
REQUESTS_CHANGED = "requests_changed"
WAIT_NODE_READY = "wait_node_ready"
WAIT_NODES_READY = "wait_nodes_ready"  # a NodeRequestBatch's members' readiness, in one activity
# A node's readiness wait: a NodeRequest's own, or a NodeRequestBatch's round over its members.
READINESS = (WAIT_NODE_READY, WAIT_NODES_READY)
EMIT_POD_EVENTS = "emit_pod_events"
REPORT_NODE_GROUP_STATUS = "report_node_group_status"
CREATE_NODE = "create_node"
DELETE_NODE = "delete_node"
GET_CATALOGUE = "get_catalogue"
EVALUATE_SCALE_DOWN = "evaluate_scale_down"
CHECK_NODE_REMOVAL = "check_node_removal"
MARK_NODE_FOR_SCALE_DOWN = "mark_node_for_scale_down"
UNMARK_NODE = "unmark_node"
# A NodeReplacement's nodes tainted karpenter.sh/disrupted:NoSchedule before its successors are made,
# the taint lifted again from those it does not remove.
TAINT_DISRUPTED = "taint_disrupted"
# The loop's soft taint on unneeded nodes, lifted from nodes needed again (Cluster Autoscaler's).
UPDATE_SOFT_TAINTS = "update_soft_deletion_taints"
CORDON_NODE = "cordon_node"
EVICT_POD = "evict_pod"
# A NodeReplacement's moved pods evicted one at a time, each once the one before is bound again
# (ReplacementPlan.drain_order).
EVICT_IN_ORDER = "evict_in_order"
WAIT_PODS_GONE = "wait_pods_gone"
DELETE_NODE_OBJECT = "delete_node_object"
EMIT_NODE_EVENTS = "emit_node_events"
PLAN_REPLACEMENT = "plan_replacement"
FIND_ORPHANS = "find_orphans"
# The removals (NodeScaleDown, NodeReplacement workflow ids) the loop holds nodes for whose workflow
# closed without a final word to it (terminated from outside, or failed): their nodes are let go.
REMOVALS_ENDED = "removals_ended"
LIST_PROVIDER_MACHINES = "list_provider_machines"
LIST_NODE_PROVIDER_IDS = "list_node_provider_ids"
LIVE_NODE_REQUEST_IDS = "live_node_request_ids"
REPORT_COLLECTED_MACHINE = "report_collected_machine"
REPORT_UNUSABLE_POOLS = "report_unusable_pools"
START_NODE_REQUESTS = "start_node_requests"
# The loop's scale-up decision (scaling/nodes/scale_up/decision.py), a local activity: its result,
# input included, is what the loop's history records of the decision.
PLAN_SCALE_UP = "plan_scale_up"
# Decisions run as local activities: their options are the workflow's, not NODE_ACTIVITIES'.
DECISION_NAMES = frozenset({PLAN_SCALE_UP})

ACTIVITY_NAMES = frozenset(
    {
        OBSERVE_CLUSTER,
        WAIT_NODE_READY,
        WAIT_NODES_READY,
        EMIT_POD_EVENTS,
        REPORT_NODE_GROUP_STATUS,
        START_NODE_REQUESTS,
        PLAN_SCALE_UP,
        CREATE_NODE,
        DELETE_NODE,
        GET_CATALOGUE,
        EVALUATE_SCALE_DOWN,
        CHECK_NODE_REMOVAL,
        MARK_NODE_FOR_SCALE_DOWN,
        UNMARK_NODE,
        TAINT_DISRUPTED,
        UPDATE_SOFT_TAINTS,
        CORDON_NODE,
        EVICT_POD,
        EVICT_IN_ORDER,
        WAIT_PODS_GONE,
        DELETE_NODE_OBJECT,
        EMIT_NODE_EVENTS,
        PLAN_REPLACEMENT,
        FIND_ORPHANS,
        REMOVALS_ENDED,
        LIST_PROVIDER_MACHINES,
        LIST_NODE_PROVIDER_IDS,
        LIVE_NODE_REQUEST_IDS,
        REPORT_COLLECTED_MACHINE,
        REPORT_UNUSABLE_POOLS,
    }
)


class ObserveInput(BaseModel):
    cluster: str
    # In-flight NodeRequest id -> its node's name ("" until the request reported it): the
    # observation says which of them already have a Ready node (bounded by the in-flight cap).
    requests: dict[str, str] = Field(default_factory=dict)
    # Kind -> resourceVersion the loop's last observation saw: the worker's cache must be at
    # least that new (it waits for its watch, or lists), so a loop never sees time go back.
    fresh: dict[str, str] = Field(default_factory=dict)


class ClusterObservation(BaseModel):
    demand: PendingDemand = Field(default_factory=PendingDemand)  # pods and nodes, aggregated
    # Per pod and per node: what observers sent before demand was aggregated (replays read it).
    unschedulable: list[PodInfo] = Field(default_factory=list)
    nodes: list[NodeInfo] = Field(default_factory=list)
    groups: list[NodeGroup] = Field(default_factory=list)
    invalid_groups: list[SpecProblem] = Field(default_factory=list)
    pods_total: int = 0
    pods_running: int = 0
    requests_with_ready_node: list[str] = Field(default_factory=list)  # of ObserveInput.requests
    resource_versions: dict[str, str] = Field(default_factory=dict)  # kind -> what was seen
    scale_down_view: str = ""  # the token of what a scale-down evaluation reads, as ScaleDownEvaluation.view


class NodeRef(BaseModel):
    """One Node of one cluster (cordon_node, delete_node_object)."""

    cluster: str
    node: str


class PodEvent(BaseModel):
    """A Kubernetes Event on a pod, like Cluster Autoscaler's TriggeredScaleUp / NotTriggerScaleUp."""

    namespace: str
    pod_name: str
    pod_uid: str
    reason: str
    message: str
    type: str = "Normal"


class PodEventsInput(BaseModel):
    cluster: str
    events: list[PodEvent]


class GroupStatusInput(BaseModel):
    """The invalid node groups of one cluster, written on their status (valid ones are cleared)."""

    cluster: str
    problems: list[SpecProblem] = Field(default_factory=list)


class WaitReadyInput(BaseModel):
    cluster: str
    node_name: str
    timeout_s: float
    poll_s: float = 2.0
    # Set on the node once it is Ready, before the wait returns (one activity and one workflow
    # task fewer per request than a label activity after it; a kubelet-registered Hetzner node
    # has none of growth's labels until then).
    labels: dict[str, str] = {}
    # The request's Provisioning status, signalled to its loop (by workflow id) as the wait
    # begins, in every attempt: a signal from the request's own workflow cost it a workflow task
    # for the delivery. The loop folds a repeated report as the same one.
    report_to: str = ""
    report: NodeRequestStatus | None = None


class NodeWait(BaseModel):
    """One node a NodeRequestBatch member waits for."""

    node_name: str
    labels: dict[str, str] = Field(default_factory=dict)  # set once it is Ready, as WaitReadyInput's
    # Epoch seconds (workflow time when the wait began, plus the readiness timeout): absolute, so
    # a retried round on another worker keeps each node's readiness timeout.
    deadline: float


class WaitNodesReadyInput(BaseModel):
    """One round of a batch's readiness waits: it ends as soon as some node is Ready (and
    labelled) or past its deadline, or after `round_s` with nothing to say, and the batch starts
    the next round with the nodes still waiting (and those created meanwhile)."""

    cluster: str
    nodes: list[NodeWait]
    poll_s: float = 2.0
    round_s: float = 10.0


class CreateNodeInput(BaseModel):
    cluster: str
    request_id: str  # the NodeRequest workflow id: the idempotency key at the provider
    attempt: int  # attempt number within the request; with request_id names the machine
    pool: Pool
    labels: dict[str, str] = Field(default_factory=dict)  # group labels + growth's own labels
    taints: list[Taint] = Field(default_factory=list)


class CreateNodeResult(BaseModel):
    outcome: Literal["created", "no_capacity", "quota_exceeded"]
    node_name: str = ""
    provider_id: str = ""
    message: str = ""


class DeleteNodeInput(BaseModel):
    cluster: str
    provider: str
    node_name: str
    provider_id: str = ""


class ProviderMachine(BaseModel):
    """A machine the provider holds for this cluster (for leak detection / orphan reports)."""

    provider: str
    provider_id: str
    name: str
    labels: dict[str, str] = Field(default_factory=dict)
    created_at: float | None = None


class ScaleDownObservation(BaseModel):
    """The ScaleDownInput fields that come from the cluster, as evaluate_scale_down and
    check_node_removal read them beside it. It holds every node and pod, so it grows with the
    cluster: it never crosses history (they return only their verdict)."""

    nodes: list[NodeInfo] = Field(default_factory=list)
    pods: list[PodInfo] = Field(default_factory=list)
    pdbs: list[PdbInfo] = Field(default_factory=list)
    groups: list[NodeGroup] = Field(default_factory=list)
    storage: LonghornState | None = None


class ScaleDownEvaluationInput(BaseModel):
    """evaluate_scale_down's input: the NodeAutoscaler's scale-down state, never the cluster's
    objects (the activity lists those itself, for ``cluster``). The ScaleDownInput fields
    that the workflow owns, plus the removals whose emptiness it must watch."""

    cluster: str
    now: float  # workflow time: the timers are the workflow's
    unneeded_since: dict[str, float] = Field(default_factory=dict)
    last_scale_up_at: float | None = None
    protected: list[str] = Field(default_factory=list)
    in_progress: list[str] = Field(default_factory=list)  # nodes with a NodeScaleDown running
    # Nodes marked EMPTY and still waiting on their timer: seed 004 cancels them when pods land.
    watch_empty: list[str] = Field(default_factory=list)
    settings: ScaleDownLoopSettings = Field(default_factory=ScaleDownLoopSettings)
    fresh: dict[str, str] = Field(default_factory=dict)  # as ObserveInput.fresh
    # The digest of the candidates the workflow holds: the same ones are not sent again.
    candidates_digest: str = ""
    # Consolidations found not worth it: their nodes stay out of consolidation while nothing changed.
    refused: list[RefusedConsolidation] = Field(default_factory=list)
    # The multi-node commands with a node in flight (ScaleDownStatus.command): their successors are held.
    replacing: list[str] = Field(default_factory=list)
    # The loop's first evaluation: a soft taint's time may start a timer (settings.deletion_candidate_ttl_s).
    first_evaluation: bool = False


class RemovalTarget(BaseModel):
    """A node the plan selected, with only what starting its NodeScaleDown reads."""

    name: str
    group: str
    pool: str | None = None
    kind: NodeState  # EMPTY or UNDERUSED
    scale_down_at: float
    provider_id: str = ""


class ScaleDownEvaluation(BaseModel):
    """evaluate_scale_down's result, bounded whatever the cluster's size: the plan's removals
    (at most max_removals_per_loop), the changes to the unneeded timers (not the timers again:
    the workflow sent them), and growth-managed nodes' states for the status query, capped
    (see scaling.nodes.scale_down.evaluation)."""

    to_remove: list[RemovalTarget] = Field(default_factory=list)
    # One multi-node consolidation's candidates (at most scaling.nodes.disruption.multi_node.MAX_CANDIDATES),
    # in disruption-cost order, and how many of them the group's budget lets go together: one
    # NodeReplacement plans which go (empty in every evaluation recorded before multi-node).
    consolidate: list[RemovalTarget] = Field(default_factory=list)
    consolidate_allowed: int = 0
    # The plan's unneeded_since is the input's, less unneeded_ended, plus unneeded_started at `now`.
    unneeded_started: list[str] = Field(default_factory=list)
    unneeded_ended: list[str] = Field(default_factory=list)
    # Timers started before `now`, at the time a soft taint says (first_evaluation only; at most one per node).
    unneeded_adopted: dict[str, float] = Field(default_factory=dict)
    # Managed nodes only, most telling first (removing, removable, waiting, blocked, utilized),
    # at most MAX_CANDIDATES of them and CANDIDATES_MAX_BYTES of JSON, messages shortened.
    candidates: list[CandidateState] = Field(default_factory=list)
    candidates_by_state: dict[str, int] = Field(default_factory=dict)  # every managed node counted
    # True: the candidates are those of the input's candidates_digest, and left out (an idle
    # loop of 300 nodes wrote ~95 KB of the same candidates into the history every loop).
    candidates_unchanged: bool = False
    candidates_digest: str = ""
    not_empty: list[str] = Field(default_factory=list)  # of watch_empty: nodes that now run pods
    gone: list[str] = Field(default_factory=list)  # of watch_empty: nodes no longer in the cluster
    # growth's nodes tainted karpenter.sh/disrupted or marked for deletion that no removal of the loop
    # holds (at most UNTRACKED_DISRUPTED_MAX): the loop lifts the taints and the mark
    # (scaling.nodes.disruption.orchestration.untracked_disrupted).
    disrupted_untracked: list[str] = Field(default_factory=list)
    refusals_ended: list[str] = Field(default_factory=list)  # of refused: the nodes whose refusal no longer holds
    # Cluster Autoscaler's soft taint (scaling.nodes.scale_down.soft_taints): the unneeded nodes to put
    # it on and the nodes needed again to lift it from, at most max_bulk_soft_taint_count together
    # (none in evaluations recorded before: those loops replay without the call).
    soft_taint: list[str] = Field(default_factory=list)
    soft_untaint: list[str] = Field(default_factory=list)
    nodes: int = 0  # what was evaluated, for the record
    pods: int = 0
    # Until when (epoch seconds) the same cluster and input give this evaluation again; None: it
    # may differ at once (see scaling.nodes.scale_down.evaluation.stable_until).
    stable_until: float | None = None
    # The worker's token for the cache contents it evaluated (activities.kube.cache.view): a loop
    # whose observation shows the same token has nothing new to evaluate.
    view: str = ""


class NodeRemovalCheckInput(BaseModel):
    """check_node_removal's input: one node to re-check right before it is drained (the
    NodeScaleDown timer fired) or removed by an operator (remove_node), beside the cluster.
    Nodes tainted for deletion count as leaving without being named here."""

    cluster: str
    node: str
    now: float  # workflow time: pods deleted long before it are treated as gone
    in_progress: list[str] = Field(default_factory=list)  # other nodes being removed
    protected: list[str] = Field(default_factory=list)
    require_empty: bool = False  # seed 004's empty-node path: any pod to evict blocks it
    settings: ScaleDownLoopSettings = Field(default_factory=ScaleDownLoopSettings)
    # The worker's watch-fed cache answers (an operator's remove_node, checked again before the
    # drain); False reads the API server itself: the re-check right before a machine goes.
    from_cache: bool = False
    moving_with: list[str] = Field(default_factory=list)  # NodeScaleDownInput.moving_with


class NodeRemovalCheck(BaseModel):
    """check_node_removal's result: about the one node, bounded by the pods it runs."""

    found: bool
    managed: bool = False  # carries growth's group label
    group: str | None = None
    pool: str | None = None
    provider_id: str = ""
    blockers: list[Blocker] = Field(default_factory=list)  # scaling.nodes.scale_down.recheck.still_removable's
    pods_to_evict: list[str] = Field(default_factory=list)  # "namespace/name", long-terminating ones left out


class MarkNodeInput(BaseModel):
    cluster: str
    node: str
    scale_down_at: str  # RFC3339
    # Unneeded, waiting for scale_down_at: the soft taint (DeletionCandidate, PreferNoSchedule), as
    # Cluster Autoscaler marks unneeded nodes. False: the hard one (ToBeDeleted, NoSchedule).
    candidate: bool = False


class UnmarkNodeInput(BaseModel):
    cluster: str
    node: str
    uncordon: bool = False


class DisruptedTaintInput(BaseModel):
    """``nodes`` tainted karpenter.sh/disrupted:NoSchedule (``present``), or that taint lifted."""

    cluster: str
    nodes: list[str]
    present: bool
    # With present False: the deletion marks lifted too (the taints of DELETION_TAINT_KEYS and the
    # ScaleDownAt annotation): the loop's cleanup of nodes no removal holds.
    marks: bool = False


class SoftTaintInput(BaseModel):
    """Cluster Autoscaler's soft taint put on ``taint`` and lifted from ``untaint`` (ScaleDownEvaluation's)."""

    cluster: str
    taint: list[str] = Field(default_factory=list)
    untaint: list[str] = Field(default_factory=list)
    time_budget_s: float = 3.0  # CA's --max-bulk-soft-taint-time: calls stop once it has passed


class EvictPodInput(BaseModel):
    cluster: str
    namespace: str
    name: str
    # The node the pod is drained from: a pod of that name elsewhere is another (a StatefulSet's new
    # pod, after evict_in_order evicted the first) and is "gone" to this drain. None: any node.
    node: str | None = None


class EvictResult(BaseModel):
    outcome: str  # "evicted" | "refused" (429, a PDB) | "gone"
    message: str = ""


class EvictInOrderInput(BaseModel):
    """evict_in_order's input: pods ("namespace/name") to evict in this order, each after the pod
    before it is bound again (its controller's new pod on a node), or after ``bound_timeout_s``."""

    cluster: str
    pods: list[str]
    nodes: list[str]  # the command's cordoned nodes: a pod found on none of them is left alone
    bound_timeout_s: float = 30.0
    # A controller that makes no new pod in this long is not replacing the evicted one (scaled in).
    created_timeout_s: float = 5.0
    poll_s: float = 0.2
    # An eviction a PDB refuses is asked again every refused_poll_s for this long before the pod is
    # left to its node's drain: skipped at once, the next pod went before it.
    refused_retry_s: float = 30.0
    refused_poll_s: float = 1.0


class OrderedEviction(BaseModel):
    """One pod of evict_in_order: "evicted", "gone" (or elsewhere: left alone), or "refused" (a PDB:
    the node's drain retries it); ``at``: when (epoch seconds)."""

    pod: str
    outcome: str
    at: float


class WaitPodsGoneInput(BaseModel):
    cluster: str
    node: str
    pods: list[str]  # "namespace/name"
    timeout_s: float = 300.0
    poll_s: float = 0.5


class NodeEvent(BaseModel):
    """A Kubernetes Event on a Node: ScaleDown / ScaleDownFailed / ScaleDownBlocked."""

    node: str
    reason: str
    message: str
    type: str = "Normal"


class NodeEventsInput(BaseModel):
    cluster: str
    events: list[NodeEvent]


class ReplacementPlanInput(BaseModel):
    """plan_replacement's input: the node a NodeReplacement replaces, beside the cluster."""

    cluster: str
    node: str
    now: float  # workflow time
    leaving: list[str] = Field(default_factory=list)  # other nodes being removed or replaced
    # Multi-node consolidation: the other candidates, in the evaluation's order (disruption cost);
    # the plan chooses which of ``node`` and these go together (scaling.nodes.disruption.multi_node).
    others: list[str] = Field(default_factory=list)
    allowed: int = 1  # how many of node and others may go together (the group's budget)


class ReplacementPlan(BaseModel):
    """plan_replacement's result (scaling.nodes.disruption.replacement): the nodes to make Ready before
    the node is drained, bounded by what that one node's pods need."""

    found: bool = True
    # The nodes the successors replace when more than one (multi-node consolidation), drained in this
    # order; empty: the NodeReplacement's own node alone (every plan recorded before multi-node).
    nodes: list[str] = Field(default_factory=list)
    group: str = ""
    group_labels: dict[str, str] = Field(default_factory=dict)  # what the successors are made from
    group_taints: list[Taint] = Field(default_factory=list)
    new_nodes: list[PlannedNode] = Field(default_factory=list)
    gates: list[ApprovalGate | None] = Field(default_factory=list)  # one per new node (spec.approval)
    pods_fit_existing: int = 0
    problems: list[PodProblem] = Field(default_factory=list)  # a few: no replacement when any
    # Catalogue prices per hour: the node's server type (None: unknown) and its successors' first choices.
    price_before: float | None = None
    price_after: float = 0.0
    refused: str = ""  # a multi-node consolidation that found nothing worth doing: why (nothing is bought)
    # Why the scheduler may strand a moved pod, some arrival order taking the room planned for it
    # (scaling.nodes.disruption.arrival_orders): a single-node consolidation is then not made.
    stranding: str = ""
    # The moved pods' keys ("namespace/name") in the one order the scheduler places them all in, when
    # another order strands one: the NodeReplacement evicts in it, each pod once the one before is
    # bound again. Empty: any order does (the drain evicts them together, every plan before it).
    drain_order: list[str] = Field(default_factory=list)
    cluster_digest: str = ""  # what it read (scaling.nodes.disruption.refusals.cluster_digest)


class OrphanObservation(BaseModel):
    """Every growth-managed node and every machine, as find_orphans reads them in the worker."""

    nodes: dict[str, str] = Field(default_factory=dict)  # growth-managed node -> providerID
    machines: list[dict[str, str]] = Field(default_factory=list)  # provider, provider_id, name
    checked: list[str] = Field(default_factory=list)  # providers that could list machines


class CollectedMachine(BaseModel):
    """One leaked machine the collector deleted: what it was and why it was judged leaked."""

    cluster: str
    provider: str
    provider_id: str
    name: str
    group: str = ""
    request: str = ""
    age_s: float = 0.0
    deleted_at: datetime | None = None
    reason: str = ""


class UnusablePool(BaseModel):
    group: str
    pool: str
    provider: str
    server_type: str
    reason: str
