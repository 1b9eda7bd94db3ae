"""PodTopologySpread, ported from kubernetes/kubernetes
pkg/scheduler/framework/plugins/podtopologyspread/filtering_test.go (TestSingleConstraint):
each case names the upstream case; the policy cases after them are growth's own."""

from __future__ import annotations

import pytest

from scaling.kube.scheduling import framework, podtopologyspread
from scaling.kube.scheduling.podtopologyspread import MISSING_LABEL, REASON
from tests.scaling.kube.scheduling.make import cluster, info, node, pod

FOO = {"matchExpressions": [{"key": "foo", "operator": "Exists"}]}
BAR = {"matchExpressions": [{"key": "bar", "operator": "Exists"}]}
OK, NO, MISSING = None, REASON, MISSING_LABEL


def spread(skew: int, key: str, selector: dict | None = FOO, **extra) -> dict:
    c = {"maxSkew": skew, "topologyKey": key, "whenUnsatisfiable": "DoNotSchedule", **extra}
    if selector is not None:
        c["labelSelector"] = selector
    return c


def four_nodes(zone_b: str = "zone") -> list[dict]:
    return [
        node("node-a", {"zone": "zone1", "node": "node-a"}),
        node("node-b", {zone_b: "zone1", "node": "node-b"}),
        node("node-x", {"zone": "zone2", "node": "node-x"}),
        node("node-y", {"zone": "zone2", "node": "node-y"}),
    ]


def on(name: str, where: str, **kw) -> dict:
    return pod(name, node=where, labels=kw.pop("labels", {"foo": ""}), **kw)


SPREAD_2_1_0_3 = [
    on("p-a1", "node-a"),
    on("p-a2", "node-a"),
    on("p-b1", "node-b"),
    on("p-y1", "node-y"),
    on("p-y2", "node-y"),
    on("p-y3", "node-y"),
]

CASES = [
    ("no existing pods", pod(labels={"foo": ""}, spread=[spread(1, "zone")]), four_nodes(), [], [OK, OK, OK, OK]),
    (
        "no existing pods, incoming pod doesn't match itself",
        pod(labels={"foo": ""}, spread=[spread(1, "zone", BAR)]),
        four_nodes(),
        [],
        [OK, OK, OK, OK],
    ),
    (
        "existing pods in a different namespace do not count",
        pod(labels={"foo": ""}, spread=[spread(1, "zone")]),
        four_nodes(),
        [
            on("p-a1", "node-a", namespace="ns1"),
            on("p-b1", "node-a", namespace="ns2"),
            on("p-x1", "node-x"),
            on("p-y1", "node-y"),
        ],
        [OK, OK, NO, NO],
    ),
    (
        "existing pods do not match null selector",
        pod(labels={"foo": ""}, spread=[spread(1, "zone", None)]),
        four_nodes(),
        [on("p-x1", "node-x"), on("p-y1", "node-y")],
        [OK, OK, OK, OK],
    ),
    (
        "pods spread across zones as 3/3, all nodes fit",
        pod(labels={"foo": ""}, spread=[spread(1, "zone")]),
        four_nodes(),
        [
            on("p-a1", "node-a"),
            on("p-a2", "node-a"),
            on("p-b1", "node-b"),
            on("p-y1", "node-y"),
            on("p-y2", "node-y"),
            on("p-y3", "node-y"),
        ],
        [OK, OK, OK, OK],
    ),
    (
        "pods spread across zones as 1/2 due to absence of label 'zone' on node-b",
        pod(labels={"foo": ""}, spread=[spread(1, "zone")]),
        four_nodes("zon"),
        [on("p-a1", "node-a"), on("p-b1", "node-b"), on("p-x1", "node-x"), on("p-y1", "node-y")],
        [OK, MISSING, NO, NO],
    ),
    (
        "pod cannot be scheduled as all nodes don't have label 'rack'",
        pod(labels={"foo": ""}, spread=[spread(1, "rack")]),
        [node("node-a", {"zone": "zone1", "node": "node-a"}), node("node-x", {"zone": "zone2", "node": "node-x"})],
        [],
        [MISSING, MISSING],
    ),
    (
        "pods spread across nodes as 2/1/0/3, only node-x fits",
        pod(labels={"foo": ""}, spread=[spread(1, "node")]),
        four_nodes(),
        SPREAD_2_1_0_3,
        [NO, NO, OK, NO],
    ),
    (
        "pods spread across nodes as 2/1/0/3, maxSkew is 2, node-b and node-x fit",
        pod(labels={"foo": ""}, spread=[spread(2, "node")]),
        four_nodes(),
        SPREAD_2_1_0_3,
        [NO, OK, OK, NO],
    ),
    (
        "pods spread across nodes as 2/1/0/3, but pod doesn't match itself",
        pod(labels={"bar": ""}, spread=[spread(1, "node")]),
        four_nodes(),
        SPREAD_2_1_0_3,
        [NO, OK, OK, NO],
    ),
    (
        "incoming pod has nodeAffinity, pods spread as 2/~1~/~0~/3, hence node-a fits",
        pod(labels={"foo": ""}, spread=[spread(1, "node")], affinity_nodes=["node-a", "node-y"]),
        four_nodes(),
        SPREAD_2_1_0_3,
        [OK, OK, OK, NO],
    ),
    (
        "terminating Pods should be excluded",
        pod(labels={"foo": ""}, spread=[spread(1, "node")]),
        [node("node-a", {"node": "node-a"}), node("node-b", {"node": "node-b"})],
        [on("p-a", "node-a", deleting=True), on("p-b", "node-b")],
        [OK, NO],
    ),
    (
        "pods spread across nodes as 2/2/1, maxSkew is 2, and the number of domains < minDomains, then the third node fits",
        pod(labels={"foo": ""}, spread=[spread(2, "node", minDomains=4)]),
        [node("node-a", {"node": "node-a"}), node("node-b", {"node": "node-b"}), node("node-c", {"node": "node-c"})],
        [on("p-a1", "node-a"), on("p-a2", "node-a"), on("p-b1", "node-b"), on("p-b2", "node-b"), on("p-c1", "node-c")],
        [NO, NO, OK],
    ),
    (
        "pods spread across nodes as 2/2/1, maxSkew is 2, and the number of domains > minDomains, then the all nodes fit",
        pod(labels={"foo": ""}, spread=[spread(2, "node", minDomains=2)]),
        [node("node-a", {"node": "node-a"}), node("node-b", {"node": "node-b"}), node("node-c", {"node": "node-c"})],
        [on("p-a1", "node-a"), on("p-a2", "node-a"), on("p-b1", "node-b"), on("p-b2", "node-b"), on("p-c1", "node-c")],
        [OK, OK, OK],
    ),
    # growth's own: the policies and several constraints
    (
        "nodeTaintsPolicy Honor leaves a tainted node's domain out of the minimum",
        pod(labels={"foo": ""}, spread=[spread(1, "zone", nodeTaintsPolicy="Honor")]),
        [node("node-a", {"zone": "zone1"}), node("node-x", {"zone": "zone2"}, taints=True)],
        [on("p-a1", "node-a")],
        [OK, OK],
    ),
    (
        "nodeTaintsPolicy Ignore (the default) counts the tainted node's empty domain",
        pod(labels={"foo": ""}, spread=[spread(1, "zone")]),
        [node("node-a", {"zone": "zone1"}), node("node-x", {"zone": "zone2"}, taints=True)],
        [on("p-a1", "node-a")],
        [NO, OK],
    ),
    (
        "nodeAffinityPolicy Ignore counts domains the pod may not use",
        pod(
            labels={"foo": ""},
            spread=[spread(1, "zone", nodeAffinityPolicy="Ignore")],
            affinity_nodes=["zone1"],
            affinity_key="zone",
        ),
        [node("node-a", {"zone": "zone1"}), node("node-x", {"zone": "zone2"})],
        [on("p-a1", "node-a")],
        [NO, OK],
    ),
    (
        "two constraints: the node must satisfy both",
        pod(labels={"foo": ""}, spread=[spread(1, "zone"), spread(1, "node")]),
        four_nodes(),
        [on("p-a1", "node-a"), on("p-x1", "node-x")],
        [NO, OK, NO, OK],
    ),
    (
        "ScheduleAnyway is a preference, never a refusal",
        pod(labels={"foo": ""}, spread=[{**spread(1, "node"), "whenUnsatisfiable": "ScheduleAnyway"}]),
        four_nodes(),
        SPREAD_2_1_0_3,
        [OK, OK, OK, OK],
    ),
]


@pytest.mark.parametrize(("name", "incoming", "nodes", "pods", "want"), CASES, ids=[c[0][:60] for c in CASES])
def test_single_constraint(name: str, incoming: dict, nodes: list[dict], pods: list[dict], want: list) -> None:
    c = cluster(nodes, pods)
    state = framework.prefilter(info(incoming), c)
    got = []
    for n in c.nodes:
        r = podtopologyspread.filter(state.spread, n)
        got.append(None if r is None else r.reason)
    assert got == want
