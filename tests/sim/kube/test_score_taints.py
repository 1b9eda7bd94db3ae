"""TaintToleration's score in the simulated scheduler: a pod goes to the node with fewer
PreferNoSchedule taints it does not tolerate, weight 3 over the resource scores, normalized over
the feasible nodes (sim/kube/scores/tainttoleration.py). The first cases are upstream's,
ported from kubernetes/kubernetes
pkg/scheduler/framework/plugins/tainttoleration/taint_toleration_test.go (TestTaintTolerationScore);
the others run scheduler passes on a store, each on the per-kind heap path (a plain pod) and on
the full path (a pod with a topology spread constraint or pod anti-affinity), which must agree.
No threads, no HTTP."""

from __future__ import annotations

from typing import Any

import pytest

from sim.kube.control import FakeControl
from sim.kube.scheduler import Scheduler, requests, score
from sim.kube.scores.tainttoleration import normalize, prefer_taints, prefer_tolerations, untolerated
from sim.kube.store import Obj, Store
from tests.sim.kube.objects import make_node, make_pod, spread_constraint, term

HOST = "kubernetes.io/hostname"
SOFT = "DeletionCandidateOfClusterAutoscaler"  # Cluster Autoscaler's mark on an unneeded node
SOFT_TAINT = {"key": SOFT, "value": "1767225600", "effect": "PreferNoSchedule"}


def taint(key: str, value: str = "", effect: str = "PreferNoSchedule") -> Obj:
    return {"key": key, "value": value, "effect": effect}


def toleration(key: str, value: str = "", effect: str = "", operator: str = "Equal") -> Obj:
    return {"key": key, "operator": operator, "value": value, "effect": effect}


def scores(tolerations: list[Obj], nodes: list[list[Obj]]) -> list[int]:
    """Score then NormalizeScore over nodes carrying these taints, as upstream's test runs them."""
    pod = {"spec": {"tolerations": tolerations}}
    counts = [untolerated(prefer_tolerations(pod), prefer_taints({"spec": {"taints": t}})) for t in nodes]
    return normalize(counts)


@pytest.mark.parametrize(
    ("case", "tolerations", "nodes", "want"),
    [
        (
            "node with taints tolerated by the pod, gets a higher score than those node with intolerable taints",
            [toleration("foo", "bar", "PreferNoSchedule")],
            [[taint("foo", "bar")], [taint("foo", "blah")]],
            [100, 0],
        ),
        (
            "the nodes that all of their taints are tolerated by the pod, get the same score, no matter how many tolerable taints a node has",
            [toleration("cpu-type", "arm64", "PreferNoSchedule"), toleration("disk-type", "ssd", "PreferNoSchedule")],
            [[], [taint("cpu-type", "arm64")], [taint("cpu-type", "arm64"), taint("disk-type", "ssd")]],
            [100, 100, 100],
        ),
        (
            "the more intolerable taints a node has, the lower score it gets.",
            [toleration("foo", "bar", "PreferNoSchedule")],
            [[], [taint("cpu-type", "arm64")], [taint("cpu-type", "arm64"), taint("disk-type", "ssd")]],
            [100, 50, 0],
        ),
        (
            "only taints and tolerations that have effect PreferNoSchedule are checked by taints-tolerations priority function",
            [toleration("cpu-type", "arm64", "NoSchedule"), toleration("disk-type", "ssd", "NoSchedule")],
            [[], [taint("cpu-type", "arm64", "NoSchedule")], [taint("cpu-type", "arm64"), taint("disk-type", "ssd")]],
            [100, 100, 0],
        ),
        (
            "Default behaviour No taints and tolerations, lands on node with no taints",
            [],
            [[], [taint("cpu-type", "arm64")]],
            [100, 0],
        ),
    ],
)  # fmt: skip
def test_upstream_score_cases(case: str, tolerations: list[Obj], nodes: list[list[Obj]], want: list[int]) -> None:
    assert scores(tolerations, nodes) == want


def test_normalize_reverses_the_counts_over_their_largest() -> None:
    """helper.DefaultNormalizeScore(100, reverse=true): integer division before the reversal."""
    assert normalize([0, 0]) == [100, 100]
    assert normalize([0, 1, 2]) == [100, 50, 0]
    assert normalize([1, 2, 4]) == [75, 50, 0]
    assert normalize([0, 1, 3]) == [100, 67, 0]  # 100 - 100 * 1 // 3
    assert normalize([]) == []


# ---- through scheduler passes -----------------------------------------------------------------

PATHS = ("heap", "spread", "anti")  # a plain pod takes the per-kind heap, the others the full path


def pod_on(path: str, name: str = "p", **kw: Any) -> Obj:
    if path == "spread":
        return make_pod(
            name, {"app": "web"}, spread=[spread_constraint(10, HOST, {"matchLabels": {"app": "web"}})], **kw
        )
    if path == "anti":
        return make_pod(name, {"app": "web"}, anti=[term("app", "In", HOST, ["nothing"])], **kw)
    return make_pod(name, {"app": "web"}, **kw)


def run(nodes: list[Obj], holders: dict[str, dict[str, str]], *pods: Obj) -> dict[str, str]:
    """One pass over `nodes`, each of `holders` (node -> requests) holding one bound pod:
    pending pod -> its node, or '!' + its Unschedulable message."""
    store = Store()
    for node in nodes:
        node["metadata"]["labels"].setdefault(HOST, node["metadata"]["name"])
        store.create(store.builtin("nodes"), "", node)
    for node_name, req in holders.items():
        store.create(store.builtin("pods"), "default", make_pod(f"holder-{node_name}", node=node_name, requests=req))
    for pod in pods:
        store.create(store.builtin("pods"), "default", pod)
    Scheduler(store, FakeControl(pod_initial_backoff=0.0, pod_max_backoff=0.0)).schedule_once()
    out = {}
    for pod in store.all(store.builtin("pods")):
        if pod["metadata"]["name"].startswith("holder-"):
            continue
        if node_name := pod["spec"].get("nodeName"):
            out[pod["metadata"]["name"]] = node_name
        else:
            c = next(c for c in pod["status"]["conditions"] if c["type"] == "PodScheduled")
            out[pod["metadata"]["name"]] = "!" + c["message"]
    return out


def soft_and_busy(soft_taints: list[Obj] | None = None) -> tuple[list[Obj], dict[str, dict[str, str]]]:
    """`a-soft`, empty and marked by Cluster Autoscaler, and `b`, holding half its room: an
    emptier node LeastAllocated prefers, by name too."""
    nodes = [make_node("a-soft", taints=[SOFT_TAINT] if soft_taints is None else soft_taints), make_node("b")]
    return nodes, {"b": {"cpu": "2", "memory": "4Gi"}}


@pytest.mark.parametrize("path", PATHS)
def test_a_pod_goes_to_the_fuller_node_without_the_soft_taint(path: str) -> None:
    assert run(*soft_and_busy([]), pod_on(path, requests={"cpu": "1"})) == {"p": "a-soft"}  # unmarked: the emptier
    assert run(*soft_and_busy(), pod_on(path, requests={"cpu": "1"})) == {"p": "b"}


@pytest.mark.parametrize("path", PATHS)
def test_prefer_no_schedule_never_blocks(path: str) -> None:
    """b has no room for 3 cpu: the marked node is the only feasible one, and takes it."""
    assert run(*soft_and_busy(), pod_on(path, requests={"cpu": "3"})) == {"p": "a-soft"}


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize(
    ("tolerations", "want"),
    [
        ([toleration(SOFT, operator="Exists", effect="PreferNoSchedule")], "a-soft"),
        ([toleration(SOFT, operator="Exists")], "a-soft"),  # an empty effect tolerates every effect
        ([toleration(SOFT, "1767225600")], "a-soft"),
        ([toleration("", operator="Exists", effect="PreferNoSchedule")], "a-soft"),  # every key
        ([toleration(SOFT, "other")], "b"),
        ([toleration(SOFT, operator="Exists", effect="NoSchedule")], "b"),  # PreScore leaves it out
        ([toleration(SOFT, operator="Exists", effect="NoExecute")], "b"),
    ],
)  # fmt: skip
def test_a_tolerated_soft_taint_leaves_the_choice_to_the_resources(
    path: str, tolerations: list[Obj], want: str
) -> None:
    assert run(*soft_and_busy(), pod_on(path, requests={"cpu": "1"}, tolerations=tolerations)) == {"p": want}


@pytest.mark.parametrize("path", ("heap", "anti"))
def test_pods_of_one_kind_fill_the_unmarked_node_before_the_marked_one(path: str) -> None:
    """b has room for two 1-cpu pods: the pass's heap follows the binds, then the third pod
    (b full) goes to the marked node."""
    pods = [pod_on(path, f"p{i}", requests={"cpu": "1"}) for i in range(3)]
    assert run(*soft_and_busy(), *pods) == {"p0": "b", "p1": "b", "p2": "a-soft"}


def four_node_cluster(c4_fits: bool, with_c0: bool) -> tuple[list[Obj], dict[str, dict[str, str]]]:
    """Nodes with 1, 2 and 4 untolerated soft taints (c1, c2, c4) and perhaps c0 with none.
    c1 and c0 are full after the pod, c2 is large and empty, c4 small (too small for the pod
    unless `c4_fits`)."""
    small = {"cpu": "4", "memory": "4Gi"}
    soft = [taint(f"soft-{i}") for i in range(4)]
    nodes = [
        make_node("c1", taints=soft[:1], alloc=small),
        make_node("c2", taints=soft[:2], alloc={"cpu": "64", "memory": "64Gi"}),
        make_node("c4", taints=soft, alloc=small if c4_fits else {"cpu": "500m", "memory": "4Gi"}),
    ]
    holders = {"c1": {"cpu": "3", "memory": "3Gi"}}
    if with_c0:
        nodes.append(make_node("c0", alloc=small))
        holders["c0"] = {"cpu": "3", "memory": "3Gi"}
    return nodes, holders


def test_the_four_node_cluster_resource_scores() -> None:
    """The hand-computed resource scores the next test adds the taint scores to."""
    nodes, holders = four_node_cluster(c4_fits=True, with_c0=True)
    req = requests(make_pod(requests={"cpu": "1", "memory": "1Gi"}))
    got = {}
    for node in nodes:
        name = node["metadata"]["name"]
        used = requests(make_pod(requests=holders[name])) if name in holders else {}
        got[name] = score(req, node, used, "least-allocated")
    # full: LeastAllocated 0, balanced 100; 1/64 of c2: (63 * 100 // 64 = 98), 100; 1/4 of c4: 75, 100
    assert got == {"c1": 100, "c2": 198, "c4": 175, "c0": 100}


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize(
    ("c4_fits", "with_c0", "want"),
    [
        # maxCount 4: c1 100 + 3 * 75 = 325, c2 198 + 3 * 50 = 348, c4 175 + 0: the large node's
        # room outweighs its second taint (the gap between counts 1 and 2 is 3 * 25).
        (True, False, "c2"),
        # c4 infeasible, maxCount 2: c1 100 + 3 * 50 = 250, c2 198 + 0: the gap is 3 * 50.
        (False, False, "c1"),
        # A node without the taints: c0 100 + 300 = 400 against c2's 348 (or c1's 250).
        (True, True, "c0"),
        (False, True, "c0"),
    ],
)  # fmt: skip
def test_two_or_more_soft_taints_the_normalization_over_the_feasible_nodes_decides(
    path: str, c4_fits: bool, with_c0: bool, want: str
) -> None:
    pod = pod_on(path, requests={"cpu": "1", "memory": "1Gi"})
    assert run(*four_node_cluster(c4_fits, with_c0), pod) == {"p": want}


@pytest.mark.parametrize("path", ("heap", "anti"))
def test_pods_of_a_kind_with_two_soft_taints_on_a_node_are_placed_in_turn(path: str) -> None:
    """A kind some feasible node has 2 untolerated soft taints for leaves the heap for the full
    path; each pod still sees the room the earlier ones took and the nodes still feasible."""
    small = {"cpu": "4", "memory": "4Gi"}
    nodes = [
        make_node("c0", alloc={"cpu": "1", "memory": "4Gi"}),
        make_node("c1", taints=[taint("soft-0")], alloc=small),
        make_node("c2", taints=[taint("soft-0"), taint("soft-1")], alloc={"cpu": "64", "memory": "64Gi"}),
    ]
    pods = [pod_on(path, f"p{i}", requests={"cpu": "1", "memory": "1Gi"}) for i in range(6)]
    # p0, maxCount 2: c0 (cpu 1/1, memory 1/4) (0 + 75) // 2 = 37 + balanced 62 + 300 = 399,
    #     c1 175 + 150 = 325, c2 198 + 0.
    # p1-p4, c0 full: c1 175, 150, 125, 100 (+ 150) against c2's 198.
    # p5, c1 full: c2.
    assert run(nodes, {}, *pods) == {"p0": "c0", "p1": "c1", "p2": "c1", "p3": "c1", "p4": "c1", "p5": "c2"}
