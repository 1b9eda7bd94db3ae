"""Request batches: which planned nodes share a NodeRequestBatch, and the ids of its members."""

from datetime import UTC, datetime

import pytest

from scaling.kube.models import Resources
from scaling.nodes.models import Attempt, AttemptResult, PlannedNode, Pool
from scaling.nodes.scale_up.approvals import ApprovalGate
from scaling.nodes.scale_up.batches import BATCH_MAX, batch_indexes, start_chunks
from scaling.nodes.scale_up.requests import (
    BatchMember,
    NodeRequestBatchInput,
    NodeRequestStatus,
    member_id,
    queue_report,
    split_request_id,
)


def pool(name: str, group: str = "g", priority: int = 50) -> Pool:
    return Pool(group=group, name=name, provider="kwok", server_type=name.split("-", 1)[1], priority=priority)


def node(group: str = "g", pools: tuple[str, ...] = ("kwok-cx22", "kwok-cx32"), cpu_m: int = 1000) -> PlannedNode:
    candidates = [pool(p, group) for p in pools]
    return PlannedNode(
        group=group,
        pool=candidates[0].name,
        candidates=candidates,
        requirements=Resources(cpu_m=cpu_m, memory=1 << 30, pods=1),
        pod_uids=[f"uid-{cpu_m}"],
    )


def test_identical_nodes_share_a_batch_whatever_their_pods() -> None:
    planned = [node(cpu_m=1000), node(cpu_m=1500), node(cpu_m=200)]
    assert batch_indexes(planned, [None] * 3) == [[0, 1, 2]]


def test_group_candidates_and_their_order_and_the_gate_split_batches() -> None:
    gate = ApprovalGate(nodes="12 nodes for group g in one loop (approval above 10)")
    planned = [
        node(),  # 0
        node(group="h"),  # 1: another group
        node(pools=("kwok-cx32", "kwok-cx22")),  # 2: the same pools in another order
        node(pools=("kwok-cx22",)),  # 3: fewer pools
        node(),  # 4: as 0, but gated
        node(),  # 5: as 0
    ]
    gates = [None, None, None, None, gate, None]
    assert batch_indexes(planned, gates) == [[0, 5], [1], [2], [3], [4]]


def test_a_batch_holds_at_most_its_size_and_order_is_kept() -> None:
    planned = [node(), node(group="h"), node(), node(), node(group="h"), node()]
    assert batch_indexes(planned, [None] * 6, size=2) == [[0, 2], [1, 4], [3, 5]]
    many = [node() for _ in range(2 * BATCH_MAX + 1)]
    sizes = [len(b) for b in batch_indexes(many, [None] * len(many))]
    assert sizes == [BATCH_MAX, BATCH_MAX, 1]


def test_bad_arguments_are_refused_naming_them() -> None:
    with pytest.raises(ValueError, match="gates"):
        batch_indexes([node()], [])
    with pytest.raises(ValueError, match="size"):
        batch_indexes([node()], [None], size=0)


def test_start_chunks_fill_each_start_up_to_the_limit() -> None:
    assert start_chunks([50, 50, 50, 3], 100) == [[0, 1], [2, 3]]
    assert start_chunks([120, 1], 100) == [[0], [1]]  # a batch larger than the limit goes alone
    assert start_chunks([], 100) == []


def test_member_ids_split_back() -> None:
    batch = "nodes/c/request/000123-ab12"
    assert member_id(batch, 7) == f"{batch}#7"
    assert split_request_id(member_id(batch, 7)) == (batch, 7)
    assert split_request_id(batch) == (batch, None)  # a batch id, or a NodeRequest's
    assert split_request_id("a#b") == ("a#b", None)


def test_a_member_is_a_node_request_of_its_own() -> None:
    planned = node()
    batch = NodeRequestBatchInput(
        id="nodes/c/request/000001-abcd",
        cluster="c",
        group="g",
        group_labels={"team": "a"},
        candidates=planned.candidates,
        replan_when_unavailable=True,
        members=[
            BatchMember(requirements=Resources(cpu_m=1000), pod_uids=["a"], pods={"s1": 1}),
            BatchMember(requirements=Resources(cpu_m=2000), pod_uids=["b"], pods={"s2": 2}),
        ],
    )
    second = batch.member_input(1)
    assert second.id == "nodes/c/request/000001-abcd#1"
    assert second.requirements.cpu_m == 2000 and second.pod_uids == ["b"] and second.pods == {"s2": 2}
    assert second.candidates == planned.candidates and second.group_labels == {"team": "a"}
    assert second.replan_when_unavailable and second.cluster == "c"


def test_queued_reports_collapse_only_where_no_attempt_is_lost() -> None:
    at = datetime(2026, 11, 26, tzinfo=UTC)

    def report(member: int, *results: AttemptResult) -> NodeRequestStatus:
        attempts = [Attempt(pool=f"kwok-cx{i + 2}2", result=r, timestamp=at) for i, r in enumerate(results)]
        return NodeRequestStatus(id=member_id("b", member), group="g", attempts=attempts)

    outbox: list[NodeRequestStatus] = []
    queue_report(outbox, report(0, AttemptResult.PROVISIONING))
    queue_report(outbox, report(1, AttemptResult.PROVISIONING))
    queue_report(outbox, report(0, AttemptResult.READY))  # the same attempt, further on: replaced
    assert [(r.id, r.attempts[-1].result) for r in outbox] == [
        ("b#0", AttemptResult.READY),
        ("b#1", AttemptResult.PROVISIONING),
    ]
    queue_report(outbox, report(1, AttemptResult.QUOTA_EXCEEDED))  # replaces its Provisioning
    queue_report(outbox, report(1, AttemptResult.QUOTA_EXCEEDED, AttemptResult.PENDING))  # a new attempt
    assert [(r.id, [a.result for a in r.attempts]) for r in outbox] == [
        ("b#0", [AttemptResult.READY]),
        ("b#1", [AttemptResult.QUOTA_EXCEEDED]),  # kept: the loop backs the pool off for it
        ("b#1", [AttemptResult.QUOTA_EXCEEDED, AttemptResult.PENDING]),
    ]
