"""The Web UI's text for the nodes loop: one list line per start, details that follow the phase."""

from __future__ import annotations

from datetime import UTC, datetime

from scaling.approvals import ApprovalState
from scaling.kube.models import Resources
from scaling.nodes.models import Pool, RequestPhase
from scaling.nodes.scale_down.removals import NodeScaleDownInput, ScaleDownPhase, ScaleDownStatus
from scaling.nodes.scale_up.requests import (
    BatchMember,
    NodeRequestBatchInput,
    NodeRequestBatchStatus,
    NodeRequestInput,
    NodeRequestStatus,
    least_advanced,
)
from scaling.nodes.settings import AutoscalerSettings
from scaling.nodes.state import NodeAutoscalerState
from scaling.nodes.summaries import (
    autoscaler_details,
    autoscaler_summary,
    batch_details,
    batch_static_details,
    batch_summary,
    request_details,
    request_summary,
    scale_down_details,
    scale_down_summary,
)

POOL = Pool(group="web", name="kwok-cx32", provider="kwok", server_type="cx32", priority=10)


def request(**kw: object) -> NodeRequestInput:
    fields = {"id": "nodes/c/request/000001-ab", "cluster": "c", "group": "web", "requirements": Resources()}
    return NodeRequestInput(**{**fields, "candidates": [POOL], "pods": {"k1": 4, "k2": 3}, **kw})


def test_request_summary_names_type_pods_group_and_pool() -> None:
    assert request_summary(request()) == "NodeRequest cx32 for 7 pods of web, pool kwok-cx32"
    assert request_summary(request(pods={}, pod_uids=["u"])) == "NodeRequest cx32 for 1 pod of web, pool kwok-cx32"
    # min size or headroom: no pending pods behind it
    assert request_summary(request(pods={})) == "NodeRequest cx32 for node group web (no pending pods), pool kwok-cx32"
    assert request_summary(request(candidates=[])) == "NodeRequest for 7 pods of web, no pool fits"


def test_finished_request_says_finished_and_until_when_its_record_stays() -> None:
    status = NodeRequestStatus(id="r", group="web", current_pool="kwok-cx32", node_name="n1")
    status.phase = RequestPhase.PROVISIONING
    assert request_details(status, 600).startswith("Provisioning: pool kwok-cx32, node n1")
    status.phase, status.finished_at = RequestPhase.READY, datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
    assert request_details(status, 600) == (
        "Finished Ready at 2026-01-01 12:00:00Z, node n1, pool kwok-cx32. Record kept until 2026-01-01 12:10:00Z"
    )
    status.phase, status.message, status.node_name = RequestPhase.UNMET, "cancelled by operator", ""
    assert request_details(status, 60).startswith("Finished Unmet at 2026-01-01 12:00:00Z, pool kwok-cx32: cancelled")


def test_a_request_awaiting_approval_says_why_and_what_its_timeout_does() -> None:
    wait = ApprovalState(
        reason="kwok cx52 costs 0.054/h (approval above 0.01/h)",
        step="kwok-cx52",
        deadline=datetime(2026, 1, 1, 12, 30, tzinfo=UTC),
        default="deny",
    )
    status = NodeRequestStatus(
        id="r", group="web", current_pool="kwok-cx52", phase=RequestPhase.AWAITING_APPROVAL, approval=wait
    )
    assert request_details(status, 600) == (
        "AwaitingApproval: pool kwok-cx52: kwok cx52 costs 0.054/h (approval above 0.01/h); deny at 2026-01-01 12:30:00Z"
    )


def test_scale_down_and_loop_text() -> None:
    inp = NodeScaleDownInput(cluster="c", node="n1", pool="kwok-cx22", kind="Empty", scale_down_at=0)
    assert scale_down_summary(inp) == "NodeScaleDown n1 (empty), cluster c, pool kwok-cx22"
    marked = ScaleDownStatus(node="n1", scale_down_at=datetime(2026, 1, 1, tzinfo=UTC).timestamp())
    assert scale_down_details(marked) == "Marked, removal at 2026-01-01 00:00:00Z"
    gone = ScaleDownStatus(node="n1", phase=ScaleDownPhase.CANCELLED, reason="PodsLanded", message="2 pods")
    assert scale_down_details(gone) == "Finished Cancelled: PodsLanded (2 pods)"

    settings = AutoscalerSettings(cluster="c", scan_interval_s=10, max_nodes_total=40)
    assert autoscaler_summary(settings) == "NodeAutoscaler of cluster c, every 10 s, at most 40 nodes"
    state = NodeAutoscalerState(paused=True, iterations=3, banned_pools=["web/kwok-cx22"])
    text = autoscaler_details(state)
    assert text.startswith("PAUSED: loop 3, run 1") and "banned pools: web/kwok-cx22" in text


def batch(n: int = 3) -> NodeRequestBatchInput:
    return NodeRequestBatchInput(
        id="nodes/c/request/000002-cd",
        cluster="c",
        group="web",
        candidates=[POOL],
        members=[BatchMember(requirements=Resources(cpu_m=1000), pods={"k1": 2}) for _ in range(n)],
    )


def test_batch_summary_counts_its_nodes_and_their_pods() -> None:
    assert batch_summary(batch()) == "NodeRequestBatch 3 × cx32 for 6 pods of web, pool kwok-cx32"
    details = batch_static_details(batch())
    assert details.startswith("3 nodes, each its own request") and "pools in order: kwok-cx32" in details


def test_batch_details_count_phases_and_show_the_least_advanced_member() -> None:
    members = [
        NodeRequestStatus(id=f"nodes/c/request/000002-cd#{i}", group="web", phase=phase, current_pool="kwok-cx32")
        for i, phase in enumerate([RequestPhase.READY, RequestPhase.PROVISIONING, RequestPhase.PENDING])
    ]
    status = NodeRequestBatchStatus(id="nodes/c/request/000002-cd", cluster="c", group="web", members=members)
    assert least_advanced(members) is members[2]
    text = batch_details(status, 600)
    assert text.startswith("3 nodes: 1 Ready, 1 Provisioning, 1 Pending. 000002-cd#2: Pending: pool kwok-cx32")
    members[2].phase = RequestPhase.PROVISIONING
    assert least_advanced(members) is members[1]  # the first of the least advanced
    assert least_advanced([]) is None
