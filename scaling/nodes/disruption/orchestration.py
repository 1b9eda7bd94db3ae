"""NodeReplacement's input and the pure pieces of its orchestration (Karpenter's
pkg/controllers/disruption/orchestration/queue.go: launch the replacements, wait until they are
initialized, then taint and drain the candidate; roll back when a replacement fails)."""

from __future__ import annotations

from collections.abc import Collection

from pydantic import BaseModel, Field

from scaling.kube.drain import TAINT_DISRUPTED, marked_for_deletion
from scaling.kube.labels import label_value
from scaling.kube.models import NodeInfo
from scaling.nodes.contracts import ReplacementPlan
from scaling.nodes.disruption.drift import LABEL_REPLACEMENT, LABEL_REPLACES
from scaling.nodes.scale_down.checks import is_managed
from scaling.nodes.scale_down.removals import NodeScaleDownInput
from scaling.nodes.scale_up.requests import NodeRequestInput

REPLACEMENT_FAILED = "ReplacementFailed"
REPLACEMENT_UNPLANNED = "ReplacementUnschedulable"
ALREADY_REMOVING = "AlreadyBeingRemoved"
# The signal a multi-node command's NodeScaleDown sends its NodeReplacement (the node's name) once
# it cordoned the node; it evicts nothing until the replacement signals it back to drain.
NODE_CORDONED = "node_cordoned"


# At most this many nodes' leftover taints are named per evaluation (bounded in the loop's history).
UNTRACKED_DISRUPTED_MAX = 20


def untracked_disrupted(nodes: list[NodeInfo], in_progress: Collection[str]) -> list[str]:
    """growth's nodes carrying karpenter.sh/disrupted or a deletion mark (ToBeDeletedByClusterAutoscaler,
    or a removal's DeletionCandidateOfClusterAutoscaler with its ScaleDownAt) that no removal of the
    loop holds. A command's taint or a removal's mark outlives it only when its run was ended from
    outside (terminated, reset); a Cluster Autoscaler stopped for growth leaves its hard mark on a
    node it was deleting, and lifts such marks when it starts again (core/static_autoscaler.go
    cleanUpIfRequired). Karpenter lifts its taint from every node no command in its queue holds
    before it disrupts again (pkg/controllers/disruption/controller.go Reconcile); the loop lifts
    both. The soft taint alone (CA's, or the loop's own on an unneeded node) is kept or lifted by
    scaling.nodes.scale_down.soft_taints, as CA's loop does."""
    held = set(in_progress)
    return sorted(
        n.name
        for n in nodes
        if n.name not in held
        and is_managed(n)
        and (marked_for_deletion(n) or any(t.key == TAINT_DISRUPTED for t in n.taints))
    )[:UNTRACKED_DISRUPTED_MAX]


def replacement_id(cluster: str, node: str) -> str:
    return f"nodes/{cluster}/replace/{node}"


def is_replacement_id(workflow_id: str) -> bool:
    return workflow_id.startswith("nodes/") and "/replace/" in workflow_id


def command_id(workflow_id: str, first_run_id: str) -> str:
    """One command's key. Its workflow id names its first node only, and a later command on the same
    node (this one kept it serving) runs under that id again: keyed by the id alone, it would find
    this one's successors at the provider as its own, take them as Ready and, on a cancel, delete
    them under the pods they took over."""
    return f"{workflow_id}@{first_run_id[:8]}"


def successor_id(command: str, index: int) -> str:
    """A successor's request id (``command``: command_id), the create's idempotency key at the
    provider: a worker killed mid-create finds the machine it made, never buys a second one."""
    return f"{command}/node-{index}"


class NodeReplacementInput(BaseModel):
    """One replacement: ``removal`` is the NodeScaleDown that drains and deletes the node once its
    successors are Ready (its parent_workflow_id is the loop, which follows it as any removal)."""

    removal: NodeScaleDownInput
    readiness_timeout_s: float = 300.0
    readiness_poll_s: float = 2.0
    max_attempts: int = 5
    use_search_attributes: bool = False
    leaving: list[str] = Field(default_factory=list)  # other nodes the loop is removing
    # Multi-node consolidation (scaling.nodes.disruption.multi_node): the command's other candidates, in
    # disruption-cost order, and how many of ``removal`` and these may go together (the group's
    # budget; the loop holds that many for the command while it plans). Empty: one node replaced.
    others: list[NodeScaleDownInput] = Field(default_factory=list)
    allowed: int = 1


# What one successor's create may take beside its readiness wait (the provider's retries), for
# successors_lent_until's bound.
SUCCESSOR_CREATE_S = 120.0


def successors_lent_until(inp: NodeReplacementInput, successors: int, now: float) -> float:
    """Until when (epoch s) the loop counts the spare room of the ``successors`` a command is making
    (ScaleDownStatus.successors): the longest its machines, made one after another, take to be Ready.
    A run ended from outside (terminated) or failed says nothing more to the loop; past this, its
    successors hold no pending pod from a node of its own."""
    return now + successors * inp.max_attempts * (inp.readiness_timeout_s + SUCCESSOR_CREATE_S)


def command_nodes(inp: NodeReplacementInput) -> list[str]:
    """The nodes the loop holds for the command while it plans: ``removal`` and the first others."""
    return [inp.removal.node, *(o.node for o in inp.others[: max(inp.allowed - 1, 0)])]


def removal_of(inp: NodeReplacementInput, node: str) -> NodeScaleDownInput:
    return next((r for r in (inp.removal, *inp.others) if r.node == node), inp.removal)


def successor_inputs(
    inp: NodeReplacementInput, command: str, plan: ReplacementPlan, replaces: str | None = None
) -> list[NodeRequestInput]:
    """The requests for the planned successors, made from the group's spec now, each labelled with the
    node it replaces (``replaces``: the last of a multi-node command, so the successor is held from
    scale-down until that node is gone: runs that drain in turn drain it last, the others drain every
    node together) and gated as the plan says (spec.approval, as a scale-up of as many nodes is)."""
    gates = plan.gates or [None] * len(plan.new_nodes)
    return [
        NodeRequestInput(
            id=successor_id(command, i),
            cluster=inp.removal.cluster,
            group=p.group,
            group_labels=plan.group_labels,
            group_taints=plan.group_taints,
            requirements=p.requirements,
            pod_uids=p.pod_uids,
            pods=p.pods,
            candidates=p.candidates,
            readiness_timeout_s=inp.readiness_timeout_s,
            readiness_poll_s=inp.readiness_poll_s,
            max_attempts=inp.max_attempts,
            approval=gate,
            extra_labels={
                LABEL_REPLACES: label_value(replaces or inp.removal.node),
                LABEL_REPLACEMENT: label_value(command),
            },
        )
        for i, (p, gate) in enumerate(zip(plan.new_nodes, gates, strict=True))
    ]
