"""PodTopologySpread's Filter, case for case from kubernetes/kubernetes
pkg/scheduler/framework/plugins/podtopologyspread/filtering_test.go (TestSingleConstraint,
TestMultipleConstraints), run against sim/kube/filters/spread.py alone as upstream runs the plugin
alone; plus minDomains, nodeTaintsPolicy, nodeAffinityPolicy and matchLabelKeys."""

from __future__ import annotations

import pytest

from sim.kube.filters import spread
from tests.sim.kube.objects import Obj, exists, infos, make_node, make_pod, spread_constraint

OK, NO, MISSING = None, spread.REASON, spread.MISSING_LABEL


def four_nodes() -> list[Obj]:
    return [
        make_node("node-a", {"zone": "zone1", "node": "node-a"}),
        make_node("node-b", {"zone": "zone1", "node": "node-b"}),
        make_node("node-x", {"zone": "zone2", "node": "node-x"}),
        make_node("node-y", {"zone": "zone2", "node": "node-y"}),
    ]


def foo_pods(*placements: str, namespace: str = "default") -> list[Obj]:
    return [make_pod(f"p-{n}{i}", {"foo": ""}, node=n, namespace=namespace) for i, n in enumerate(placements)]


SPREAD_2_1_0_3 = foo_pods("node-a", "node-a", "node-b", "node-y", "node-y", "node-y")


def verdicts(pod: Obj, nodes: list[Obj], pods: list[Obj]) -> dict[str, str | None]:
    state = spread.prefilter(pod, [(i.node, i.pods) for i in infos(nodes, pods)])
    return {n["metadata"]["name"]: spread.refusal(pod, state, n) for n in nodes}


def zone_pod(selector: Obj | None = None, **extra: object) -> Obj:
    return make_pod(labels={"foo": ""}, spread=[spread_constraint(1, "zone", selector or exists("foo"), **extra)])


CASES = [
    ("no existing pods", zone_pod(), four_nodes(), [], [OK, OK, OK, OK]),
    ("no existing pods, incoming pod doesn't match itself", zone_pod(exists("bar")), four_nodes(), [], [OK] * 4),
    (
        "existing pods in a different namespace do not count",
        zone_pod(),
        four_nodes(),
        foo_pods("node-a", namespace="ns1") + foo_pods("node-a", namespace="ns2") + foo_pods("node-x", "node-y"),
        [OK, OK, NO, NO],
    ),
    (
        "pods spread across zones as 3/3, all nodes fit",
        zone_pod(),
        four_nodes(),
        foo_pods("node-a", "node-a", "node-b", "node-y", "node-y", "node-y"),
        [OK] * 4,
    ),
    (
        "pods spread across zones as 1/2 due to absence of label 'zone' on node-b",
        zone_pod(),
        [make_node("node-a", {"zone": "zone1"}), make_node("node-b", {"zon": "zone1"})] + four_nodes()[2:],
        foo_pods("node-a", "node-b", "node-x", "node-y"),
        [OK, MISSING, NO, NO],
    ),
    (
        "pod cannot be scheduled as all nodes don't have label 'rack'",
        make_pod(labels={"foo": ""}, spread=[spread_constraint(1, "rack", exists("foo"))]),
        [four_nodes()[0], four_nodes()[2]],
        [],
        [MISSING, MISSING],
    ),
    (
        "pods spread across nodes as 2/1/0/3, only node-x fits",
        make_pod(labels={"foo": ""}, spread=[spread_constraint(1, "node", exists("foo"))]),
        four_nodes(),
        SPREAD_2_1_0_3,
        [NO, NO, OK, NO],
    ),
    (
        "pods spread across nodes as 2/1/0/3, maxSkew is 2, node-b and node-x fit",
        make_pod(labels={"foo": ""}, spread=[spread_constraint(2, "node", exists("foo"))]),
        four_nodes(),
        SPREAD_2_1_0_3,
        [NO, OK, OK, NO],
    ),
    (
        "pods spread across nodes as 2/1/0/3, but pod doesn't match itself",
        make_pod(labels={"bar": ""}, spread=[spread_constraint(1, "node", exists("foo"))]),
        four_nodes(),
        SPREAD_2_1_0_3,
        [NO, OK, OK, NO],
    ),
    (
        "incoming pod has nodeAffinity, pods spread as 2/~1~/~0~/3, hence node-a fits",
        make_pod(
            labels={"foo": ""},
            spread=[spread_constraint(1, "node", exists("foo"))],
            node_affinity={
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "node", "operator": "In", "values": ["node-a", "node-y"]}]}
                ]
            },
        ),
        four_nodes(),
        SPREAD_2_1_0_3,
        [OK, OK, OK, NO],  # upstream: node-b and node-x pass this plugin alone (NodeAffinity refuses them)
    ),
    (
        "terminating Pods should be excluded",
        make_pod(labels={"foo": ""}, spread=[spread_constraint(1, "node", exists("foo"))]),
        [make_node("node-a", {"node": "node-a"}), make_node("node-b", {"node": "node-b"})],
        [make_pod("p-a", {"foo": ""}, node="node-a", terminating=True), make_pod("p-b", {"foo": ""}, node="node-b")],
        [OK, NO],
    ),
    (
        "two Constraints on zone and node, spreads = [3/3, 2/1/0/3]",
        make_pod(
            labels={"foo": ""},
            spread=[spread_constraint(1, "zone", exists("foo")), spread_constraint(1, "node", exists("foo"))],
        ),
        four_nodes(),
        SPREAD_2_1_0_3,
        [NO, NO, OK, NO],
    ),
    # minDomains: fewer domains than asked make the global minimum 0 (filtering.go minMatchNum).
    (
        "minDomains 3 over two zones 1/1: the minimum is 0, every node refuses at maxSkew 1",
        zone_pod(minDomains=3),
        four_nodes(),
        foo_pods("node-a", "node-x"),
        [NO, NO, NO, NO],
    ),
    (
        "minDomains 2 over two zones 1/1: the minimum is 1, every node fits",
        zone_pod(minDomains=2),
        four_nodes(),
        foo_pods("node-a", "node-x"),
        [OK, OK, OK, OK],
    ),
    # nodeTaintsPolicy Honor: a node whose taints the pod does not tolerate makes no domain.
    (
        "nodeTaintsPolicy Honor leaves the tainted zone out of the minimum: zone1 may take another",
        zone_pod(nodeTaintsPolicy="Honor"),
        four_nodes()[:2]
        + [
            make_node("node-x", {"zone": "zone2"}, taints=[{"key": "t", "effect": "NoSchedule"}]),
            make_node("node-y", {"zone": "zone2"}, taints=[{"key": "t", "effect": "NoSchedule"}]),
        ],
        foo_pods("node-a"),
        [OK, OK, OK, OK],  # node-x/-y pass this plugin; TaintToleration refuses them
    ),
    (
        "nodeTaintsPolicy Ignore (the default) counts the tainted zone: zone1 is 1 ahead",
        zone_pod(),
        four_nodes()[:2]
        + [
            make_node("node-x", {"zone": "zone2"}, taints=[{"key": "t", "effect": "NoSchedule"}]),
            make_node("node-y", {"zone": "zone2"}, taints=[{"key": "t", "effect": "NoSchedule"}]),
        ],
        foo_pods("node-a"),
        [NO, NO, OK, OK],
    ),
    (
        "nodeAffinityPolicy Ignore counts the zone the pod may not go to",
        make_pod(
            labels={"foo": ""},
            spread=[spread_constraint(1, "zone", exists("foo"), nodeAffinityPolicy="Ignore")],
            nodeSelector={"zone": "zone1"},
        ),
        four_nodes(),
        foo_pods("node-a"),
        [NO, NO, OK, OK],
    ),
    (
        "nodeAffinityPolicy Honor (the default) leaves it out: zone1 is the only domain",
        make_pod(
            labels={"foo": ""}, spread=[spread_constraint(1, "zone", exists("foo"))], nodeSelector={"zone": "zone1"}
        ),
        four_nodes(),
        foo_pods("node-a"),
        [OK, OK, OK, OK],
    ),
    (
        "matchLabelKeys: only pods of the pod's own revision count",
        make_pod(
            labels={"foo": "", "rev": "2"},
            spread=[spread_constraint(1, "zone", exists("foo"), matchLabelKeys=["rev"])],
        ),
        four_nodes(),
        [make_pod(f"old{i}", {"foo": "", "rev": "1"}, node="node-a") for i in range(3)]
        + [make_pod("new", {"foo": "", "rev": "2"}, node="node-x")],
        [OK, OK, NO, NO],
    ),
]


@pytest.mark.parametrize(("name", "pod", "nodes", "pods", "want"), CASES, ids=[c[0] for c in CASES])
def test_spread_filter(name: str, pod: Obj, nodes: list[Obj], pods: list[Obj], want: list[str | None]) -> None:
    assert list(verdicts(pod, nodes, pods).values()) == want
