"""Request batches: a loop's planned nodes grouped so that identical ones share one workflow.

A NodeRequest per node made a 30,000-pod burst ~970 workflows whose first tasks waited 18-20 s
(p99) at the server. Cluster Autoscaler raises a node group by N in one call and Karpenter
launches a provisioning round's NodeClaims together; growth starts one NodeRequestBatch per run
of identical planned nodes: same group, same candidate pools in the same order, same approval
gate. Each member still has its own requirements and pods, and its own create key.

Bounded by BATCH_MAX. A member costs ~0.25 KB of the batch's input (12 KB for 50, burst of
tests/scaling/nodes/test_payloads.py) and up to ~4 KB of its status at the worst (five failed
attempts, each with a 500-character provider message): the status is the batch's result and its
largest report to the loop, 210 KB for 50 members at that worst, under the 256 KB aim for
anything in history; a typical member's is ~0.7 KB. 50 also keeps a batch's first workflow task
to 50 create commands. At 30,000 pods ~970 nodes of a few kinds make ~20 workflows, not 970.
"""

from __future__ import annotations

from collections.abc import Sequence

from scaling.nodes.models import PlannedNode
from scaling.nodes.scale_up.approvals import ApprovalGate

BATCH_MAX = 50


def batch_indexes(
    planned: Sequence[PlannedNode], gates: Sequence[ApprovalGate | None], size: int = BATCH_MAX
) -> list[list[int]]:
    """The planned nodes' positions, grouped into batches of identical requests (at most `size`
    each). Batches come in the order of their first node, members in plan order, so a replay
    groups the same way."""
    if len(planned) != len(gates):
        raise ValueError(f"gates: {len(gates)} for {len(planned)} planned nodes")
    if size < 1:
        raise ValueError(f"size: must be at least 1, got {size}")
    batches: list[list[int]] = []
    open_batch: list[int] = []  # per open batch: its index in `batches` (few kinds per plan)
    for i, (node, gate) in enumerate(zip(planned, gates, strict=True)):
        home = next(
            (b for b in open_batch if _same_request(planned[batches[b][0]], gates[batches[b][0]], node, gate)), None
        )
        if home is None:
            home = len(batches)
            batches.append([])
            open_batch.append(home)
        batches[home].append(i)
        if len(batches[home]) >= size:
            open_batch.remove(home)  # full: the next node of its kind opens another
    return batches


def _same_request(a: PlannedNode, gate_a: ApprovalGate | None, b: PlannedNode, gate_b: ApprovalGate | None) -> bool:
    return a.group == b.group and a.candidates == b.candidates and gate_a == gate_b


def start_chunks(member_counts: Sequence[int], limit: int) -> list[list[int]]:
    """Batches (by position) grouped for the loop's start activities: each takes batches up to
    `limit` members in all (a batch larger than that goes alone), in order."""
    chunks: list[list[int]] = []
    total = 0
    for i, n in enumerate(member_counts):
        if not chunks or total + n > limit:
            chunks.append([])
            total = 0
        chunks[-1].append(i)
        total += n
    return chunks
