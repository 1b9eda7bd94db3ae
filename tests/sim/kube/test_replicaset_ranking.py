"""Which pods a ReplicaSet's scale-down deletes first: the ranking of kubernetes/kubernetes
pkg/controller/controller_utils.go (ActivePodsWithRanks.Less; cases after
TestSortingActivePodsWithRanks in controller_utils_test.go), without ready time and restarts."""

from __future__ import annotations

from typing import Any

from sim.kube.controllers import DELETION_COST, _deletion_rank


def pod(
    name: str, node: str | None = "n1", phase: str = "Running", ready: bool = True, cost: int = 0
) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "annotations": {DELETION_COST: str(cost)} if cost else {}},
        "spec": {"nodeName": node} if node else {},
        "status": {"phase": phase, "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]},
    }


def first_deleted(pods: list[dict[str, Any]]) -> list[str]:
    created = {p["metadata"]["name"]: k for k, p in enumerate(pods)}  # listed oldest first
    return [
        p["metadata"]["name"] for p in sorted(pods, key=_deletion_rank(pods, lambda p: created[p["metadata"]["name"]]))
    ]


def test_unscheduled_pending_and_unready_pods_go_first() -> None:
    pods = [
        pod("ready"),
        pod("unready", ready=False),
        pod("pending", phase="Pending", ready=False),
        pod("unscheduled", node=None, phase="Pending", ready=False),
    ]
    assert first_deleted(pods) == ["unscheduled", "pending", "unready", "ready"]


def test_a_lower_deletion_cost_goes_before_a_doubled_up_pod() -> None:
    pods = [pod("a1", "a"), pod("a2", "a"), pod("cheap", "b", cost=-5), pod("dear", "c", cost=10)]
    assert first_deleted(pods)[0] == "cheap" and first_deleted(pods)[-1] == "dear"


def test_pods_doubled_up_on_a_node_go_before_newer_ones_alone() -> None:
    # three old pods on n1, one newer pod alone on n2: scaling in empties the crowded node first,
    # so a burst's scale-in leaves partly used nodes (not the newest nodes emptied)
    pods = [pod("old-1", "n1"), pod("old-2", "n1"), pod("old-3", "n1"), pod("new", "n2")]
    assert first_deleted(pods) == ["old-3", "old-2", "old-1", "new"]
