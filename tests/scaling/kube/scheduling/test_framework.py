"""The filters together, in the scheduler's order (the first refusal is the one reported), and
TaintToleration/NodeUnschedulable/NodeAffinity reasons, after kubernetes/kubernetes
pkg/scheduler/framework/plugins/tainttoleration/taint_toleration_test.go ("A pod having no
tolerations can't be scheduled onto a node with nonempty taints") and
nodeunschedulable/node_unschedulable_test.go."""

from __future__ import annotations

from scaling.kube.models import NodeInfo, Resources, Taint
from scaling.kube.scheduling import framework
from scaling.kube.scheduling.framework import SchedulingState
from tests.scaling.kube.scheduling.make import cluster, info, node, pod, term

ROOM = Resources(cpu_m=4000, memory=8 * 2**30, pods=110)


def test_a_pod_without_tolerations_is_refused_by_a_tainted_node_with_the_taint_named() -> None:
    n = NodeInfo(name="n", allocatable=ROOM, taints=[Taint(key="dedicated", value="user1", effect="NoSchedule")])
    r = framework.filter(info(pod()), SchedulingState(), n)
    assert r is not None and (r.plugin, r.reason) == (
        "TaintToleration",
        "node(s) had untolerated taint {dedicated: user1}",
    )


def test_cordoned_node_refuses_unless_the_pod_tolerates_unschedulable() -> None:
    n = NodeInfo(name="n", allocatable=ROOM, unschedulable=True)
    assert framework.filter(info(pod()), SchedulingState(), n).reason == "node(s) were unschedulable"
    tolerant = pod(
        tolerations=[{"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}]
    )
    assert framework.filter(info(tolerant), SchedulingState(), n) is None


def test_order_node_affinity_before_resources_before_inter_pod_affinity() -> None:
    c = cluster([node("a", {"zone": "z1", "disk": "ssd"})], [pod("e", labels={"app": "db"}, node="a")])
    big = pod(
        nodeSelector={"disk": "hdd"},
        containers=[{"name": "c", "resources": {"requests": {"cpu": "1000"}}}],
        anti=[term("app", "In", ["db"], "zone")],
    )
    p = info(big)
    state = framework.prefilter(p, c)
    assert framework.filter(p, state, c.nodes[0]).reason == "node(s) didn't match Pod's node affinity/selector"
    p2 = info({**big, "spec": {**big["spec"], "nodeSelector": {}}})
    assert framework.filter(p2, framework.prefilter(p2, c), c.nodes[0]).reason == "Insufficient cpu"
    p3 = info(pod(anti=[term("app", "In", ["db"], "zone")]))
    assert (
        framework.filter(p3, framework.prefilter(p3, c), c.nodes[0]).reason
        == "node(s) didn't match pod anti-affinity rules"
    )


def test_first_refusals_sum_reasons_over_nodes() -> None:
    c = cluster(
        [node("a", {"zone": "z1"}), node("b", {"zone": "z2"}), node("c", {"zone": "z3"})],
        [pod("e", labels={"app": "db"}, node="a")],
    )
    p = info(pod(anti=[term("app", "In", ["db"], "zone")], nodeSelector={"zone": "z1"}))
    got = framework.first_refusals(p, framework.prefilter(p, c), c.nodes)
    assert got == {
        "node(s) didn't match Pod's node affinity/selector": 2,
        "node(s) didn't match pod anti-affinity rules": 1,
    }
