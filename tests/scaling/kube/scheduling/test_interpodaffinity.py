"""InterPodAffinity, ported from kubernetes/kubernetes
pkg/scheduler/framework/plugins/interpodaffinity/filtering_test.go (TestRequiredAffinitySingleNode,
TestRequiredAffinityMultipleNodes): each case names the upstream case it ports."""

from __future__ import annotations

import pytest

from scaling.kube.scheduling import framework, interpodaffinity
from scaling.kube.scheduling.interpodaffinity import AFFINITY, ANTI_AFFINITY, EXISTING_ANTI_AFFINITY
from tests.scaling.kube.scheduling.make import cluster, info, node, pod, term

POD_LABEL = {"service": "securityscan"}
POD_LABEL2 = {"security": "S1"}
NODE1 = node("node1", {"region": "r1", "zone": "z11"})
EXISTING = pod("existing", labels=POD_LABEL, node="node1")
# upstream's `namespaces`: team labels for the namespaceSelector cases
NAMESPACES = {
    "subteam1.team1": {"team": "team1"},
    "subteam2.team1": {"team": "team1"},
    "subteam1.team2": {"team": "team2"},
}
TEAM1 = {"matchExpressions": [{"key": "team", "operator": "In", "values": ["team1"]}]}
SERVICE_IN = {"matchExpressions": [{"key": "service", "operator": "In", "values": ["securityscan", "value2"]}]}


def _reason(p: dict, pods: list[dict], nodes: list[dict] = (NODE1,), at: int = 0) -> str | None:
    c = cluster(list(nodes), pods, NAMESPACES)
    pi = info(p)
    state = framework.prefilter(pi, c)
    r = interpodaffinity.filter(state.affinity, c.nodes[at])
    return None if r is None else r.reason


SINGLE_NODE = [
    (
        "satisfies with requiredDuringSchedulingIgnoredDuringExecution in PodAffinity using In operator that matches the existing pod",
        pod(labels=POD_LABEL2, affinity=[term("service", "In", ["securityscan", "value2"], "region")]),
        [EXISTING],
        None,
    ),
    (
        "satisfies the pod with requiredDuringSchedulingIgnoredDuringExecution in PodAffinity using not in operator in labelSelector that matches the existing pod",
        pod(labels=POD_LABEL2, affinity=[term("service", "NotIn", ["securityscan3", "value3"], "region")]),
        [EXISTING],
        None,
    ),
    (
        "Does not satisfy the PodAffinity with labelSelector because of diff Namespace",
        pod(labels=POD_LABEL2, affinity=[{"labelSelector": SERVICE_IN, "namespaces": ["DiffNameSpace"]}]),
        [pod("e", namespace="ns", labels=POD_LABEL, node="node1")],
        AFFINITY,
    ),
    (
        "Doesn't satisfy the PodAffinity because of unmatching labelSelector with the existing pod",
        pod(labels=POD_LABEL, affinity=[term("service", "In", ["antivirusscan", "value2"], "")]),
        [EXISTING],
        AFFINITY,
    ),
    (
        "satisfies the PodAffinity with different label Operators in multiple RequiredDuringSchedulingIgnoredDuringExecution",
        pod(
            labels=POD_LABEL2,
            affinity=[
                {
                    "labelSelector": {
                        "matchExpressions": [
                            {"key": "service", "operator": "Exists"},
                            {"key": "wrongkey", "operator": "DoesNotExist"},
                        ]
                    },
                    "topologyKey": "region",
                },
                {
                    "labelSelector": {
                        "matchExpressions": [
                            {"key": "service", "operator": "In", "values": ["securityscan"]},
                            {"key": "service", "operator": "NotIn", "values": ["WrongValue"]},
                        ]
                    },
                    "topologyKey": "region",
                },
            ],
        ),
        [EXISTING],
        None,
    ),
    (
        "The labelSelector requirements(items of matchExpressions) are ANDed, the pod cannot schedule onto the node because one of the matchExpression item don't match.",
        pod(
            labels=POD_LABEL2,
            affinity=[
                {
                    "labelSelector": {
                        "matchExpressions": [
                            {"key": "service", "operator": "Exists"},
                            {"key": "wrongkey", "operator": "DoesNotExist"},
                        ]
                    },
                    "topologyKey": "region",
                },
                {
                    "labelSelector": {
                        "matchExpressions": [
                            {"key": "service", "operator": "In", "values": ["securityscan2"]},
                            {"key": "service", "operator": "NotIn", "values": ["WrongValue"]},
                        ]
                    },
                    "topologyKey": "region",
                },
            ],
        ),
        [EXISTING],
        AFFINITY,
    ),
    (
        "satisfies the PodAffinity and PodAntiAffinity with the existing pod",
        pod(
            labels=POD_LABEL2,
            affinity=[term("service", "In", ["securityscan", "value2"], "region")],
            anti=[term("service", "In", ["antivirusscan", "value2"], "node")],
        ),
        [EXISTING],
        None,
    ),
    (
        "satisfies the PodAffinity and PodAntiAffinity and PodAntiAffinity symmetry with the existing pod",
        pod(
            labels=POD_LABEL2,
            affinity=[term("service", "In", ["securityscan", "value2"], "region")],
            anti=[term("service", "In", ["antivirusscan", "value2"], "node")],
        ),
        [pod("e", labels=POD_LABEL, node="node1", anti=[term("service", "In", ["antivirusscan", "value2"], "node")])],
        None,
    ),
    (
        "satisfies the PodAffinity but doesn't satisfy the PodAntiAffinity with the existing pod",
        pod(
            labels=POD_LABEL2,
            affinity=[term("service", "In", ["securityscan", "value2"], "region")],
            anti=[term("service", "In", ["securityscan", "value2"], "zone")],
        ),
        [EXISTING],
        ANTI_AFFINITY,
    ),
    (
        "satisfies the PodAffinity and PodAntiAffinity but doesn't satisfy PodAntiAffinity symmetry with the existing pod",
        pod(
            labels=POD_LABEL,
            affinity=[term("service", "In", ["securityscan", "value2"], "region")],
            anti=[term("service", "In", ["antivirusscan", "value2"], "node")],
        ),
        [pod("e", labels=POD_LABEL, node="node1", anti=[term("service", "In", ["securityscan", "value2"], "zone")])],
        EXISTING_ANTI_AFFINITY,
    ),
    (
        "pod matches its own Label in PodAffinity and that matches the existing pod Labels",
        pod(labels=POD_LABEL, affinity=[term("service", "NotIn", ["securityscan", "value2"], "region")]),
        [pod("e", labels=POD_LABEL, node="node2")],
        AFFINITY,
    ),
    (
        "verify that PodAntiAffinity from existing pod is respected when pod has no AntiAffinity constraints. doesn't satisfy PodAntiAffinity symmetry with the existing pod",
        pod(labels=POD_LABEL),
        [pod("e", labels=POD_LABEL, node="node1", anti=[term("service", "In", ["securityscan", "value2"], "zone")])],
        EXISTING_ANTI_AFFINITY,
    ),
    (
        "verify that PodAntiAffinity from existing pod is respected when pod has no AntiAffinity constraints. satisfy PodAntiAffinity symmetry with the existing pod",
        pod(labels=POD_LABEL),
        [pod("e", labels=POD_LABEL, node="node1", anti=[term("service", "NotIn", ["securityscan", "value2"], "zone")])],
        None,
    ),
    (
        "satisfies the PodAntiAffinity with existing pod but doesn't satisfy PodAntiAffinity symmetry with incoming pod",
        pod(
            labels=POD_LABEL,
            anti=[term("service", "Exists", None, "region"), term("security", "Exists", None, "region")],
        ),
        [pod("e", labels=POD_LABEL2, node="node1", anti=[term("security", "Exists", None, "zone")])],
        ANTI_AFFINITY,
    ),
    (
        "PodAntiAffinity symmetry check a1: incoming pod and existing pod partially match each other on AffinityTerms",
        pod(labels=POD_LABEL, anti=[term("service", "Exists", None, "zone"), term("security", "Exists", None, "zone")]),
        [pod("e", labels=POD_LABEL2, node="node1", anti=[term("security", "Exists", None, "zone")])],
        ANTI_AFFINITY,
    ),
    (
        "PodAntiAffinity symmetry check a2: incoming pod and existing pod partially match each other on AffinityTerms",
        pod(labels=POD_LABEL2, anti=[term("security", "Exists", None, "zone")]),
        [
            pod(
                "e",
                labels=POD_LABEL,
                node="node1",
                anti=[term("service", "Exists", None, "zone"), term("security", "Exists", None, "zone")],
            )
        ],
        EXISTING_ANTI_AFFINITY,
    ),
    (
        "PodAntiAffinity symmetry check b1: incoming pod and existing pod partially match each other on AffinityTerms",
        pod(
            labels={"abc": "", "xyz": ""},
            anti=[term("abc", "Exists", None, "zone"), term("def", "Exists", None, "zone")],
        ),
        [
            pod(
                "e",
                labels={"def": "", "xyz": ""},
                node="node1",
                anti=[term("abc", "Exists", None, "zone"), term("def", "Exists", None, "zone")],
            )
        ],
        ANTI_AFFINITY,
    ),
    (
        "affinity with NamespaceSelector",
        pod(
            labels=POD_LABEL2,
            affinity=[{"labelSelector": SERVICE_IN, "namespaceSelector": TEAM1, "topologyKey": "region"}],
        ),
        [pod("e", namespace="subteam1.team1", labels=POD_LABEL, node="node1")],
        None,
    ),
    (
        "affinity with non-matching NamespaceSelector",
        pod(
            labels=POD_LABEL2,
            affinity=[{"labelSelector": SERVICE_IN, "namespaceSelector": TEAM1, "topologyKey": "region"}],
        ),
        [pod("e", namespace="subteam1.team2", labels=POD_LABEL, node="node1")],
        AFFINITY,
    ),
    (
        "anti-affinity with matching NamespaceSelector",
        pod(
            namespace="subteam1.team1",
            labels=POD_LABEL2,
            anti=[{"labelSelector": SERVICE_IN, "namespaceSelector": TEAM1, "topologyKey": "zone"}],
        ),
        [pod("e", namespace="subteam2.team1", labels=POD_LABEL, node="node1")],
        ANTI_AFFINITY,
    ),
    (
        "anti-affinity with matching all NamespaceSelector",
        pod(
            namespace="subteam1.team1",
            labels=POD_LABEL2,
            anti=[{"labelSelector": SERVICE_IN, "namespaceSelector": {}, "topologyKey": "zone"}],
        ),
        [pod("e", namespace="subteam2.team1", labels=POD_LABEL, node="node1")],
        ANTI_AFFINITY,
    ),
    (
        "anti-affinity with non-matching NamespaceSelector",
        pod(
            namespace="subteam1.team1",
            labels=POD_LABEL2,
            anti=[{"labelSelector": SERVICE_IN, "namespaceSelector": TEAM1, "topologyKey": "zone"}],
        ),
        [pod("e", namespace="subteam1.team2", labels=POD_LABEL, node="node1")],
        None,
    ),
]


@pytest.mark.parametrize(("name", "incoming", "pods", "want"), SINGLE_NODE, ids=[c[0][:60] for c in SINGLE_NODE])
def test_required_affinity_single_node(name: str, incoming: dict, pods: list[dict], want: str | None) -> None:
    assert _reason(incoming, pods) == want


CHINA, CHINA_AZ1, INDIA = {"region": "China"}, {"region": "China", "az": "az1"}, {"region": "India"}
MULTI_NODE = [
    (
        "A pod can be scheduled onto all the nodes that have the same topology key & label value with one of them has an existing pod that matches the affinity rules",
        pod(affinity=[term("foo", "In", ["bar"], "region")]),
        [pod("p1", labels={"foo": "bar"}, node="node1")],
        [node("node1", CHINA), node("node2", CHINA_AZ1), node("node3", INDIA)],
        [None, None, AFFINITY],
    ),
    (
        "The affinity rule is to schedule all of the pods of this collection to the same zone. The first pod of the collection should not be blocked from being scheduled onto any node, even there's no existing pod that matches the rule anywhere.",
        pod(
            labels={"foo": "bar", "service": "securityscan"},
            affinity=[term("foo", "In", ["bar"], "zone"), term("service", "In", ["securityscan"], "zone")],
        ),
        [pod("p1", labels={"foo": "bar"}, node="nodeA")],
        [node("nodeA", {"zone": "az1", "hostname": "h1"}), node("nodeB", {"zone": "az2", "hostname": "h2"})],
        [None, None],
    ),
    (
        "The first pod of the collection can only be scheduled on nodes labelled with the requested topology keys",
        pod(
            labels={"foo": "bar", "service": "securityscan"},
            affinity=[term("foo", "In", ["bar"], "zone"), term("service", "In", ["securityscan"], "zone")],
        ),
        [pod("p1", labels={"foo": "bar"}, node="nodeA")],
        [node("nodeA", {"zoneLabel": "az1", "hostname": "h1"}), node("nodeB", {"zoneLabel": "az2", "hostname": "h2"})],
        [AFFINITY, AFFINITY],
    ),
    (
        "NodeA and nodeB have same topologyKey and label value. NodeA has an existing pod that matches the inter pod affinity rule. The pod can not be scheduled onto nodeA and nodeB.",
        pod(anti=[term("foo", "In", ["abc"], "region")]),
        [pod("e", labels={"foo": "abc"}, node="nodeA")],
        [node("nodeA", {"region": "r1", "hostname": "nodeA"}), node("nodeB", {"region": "r1", "hostname": "nodeB"})],
        [ANTI_AFFINITY, ANTI_AFFINITY],
    ),
    (
        "This test ensures that anti-affinity matches a pod when any term of the anti-affinity rule matches a pod.",
        pod(anti=[term("foo", "In", ["abc"], "region"), term("service", "In", ["securityscan"], "zone")]),
        [pod("e", labels={"foo": "abc", "service": "securityscan"}, node="nodeA")],
        [
            node("nodeA", {"region": "r1", "zone": "z1", "hostname": "nodeA"}),
            node("nodeB", {"region": "r1", "zone": "z2", "hostname": "nodeB"}),
        ],
        [ANTI_AFFINITY, ANTI_AFFINITY],
    ),
    (
        "NodeA and nodeB have same topologyKey and label value. NodeA has an existing pod that matches the inter pod affinity rule. The pod can not be scheduled onto nodeA, nodeB, but can be scheduled onto nodeC (NodeC has an existing pod that match the inter pod affinity rule but in different namespace)",
        pod(namespace="NS1", labels={"foo": "123"}, anti=[term("foo", "In", ["bar"], "region")]),
        [
            pod("a", namespace="NS1", labels={"foo": "bar"}, node="nodeA"),
            pod("c", namespace="NS2", node="nodeC", anti=[term("foo", "In", ["123"], "region")]),
        ],
        [node("nodeA", CHINA), node("nodeB", CHINA_AZ1), node("nodeC", INDIA)],
        [ANTI_AFFINITY, ANTI_AFFINITY, None],
    ),
    (
        "Test existing pod's anti-affinity: if an existing pod has a term with invalid topologyKey, labelSelector of the term is firstly checked, and then topologyKey of the term is also checked",
        pod(labels={"foo": ""}),
        [pod("e", node="nodeA", anti=[term("foo", "Exists", None, "invalid-node-label")])],
        [
            node("nodeA", {"region": "r1", "zone": "z1", "hostname": "nodeA"}),
            node("nodeB", {"region": "r1", "zone": "z1", "hostname": "nodeB"}),
        ],
        [None, None],
    ),
    (
        "Test incoming pod's anti-affinity: even if labelSelector matches, we still check if topologyKey matches",
        pod(anti=[term("foo", "Exists", None, "invalid-node-label")]),
        [pod("e", labels={"foo": ""}, node="nodeA")],
        [
            node("nodeA", {"region": "r1", "zone": "z1", "hostname": "nodeA"}),
            node("nodeB", {"region": "r1", "zone": "z1", "hostname": "nodeB"}),
        ],
        [None, None],
    ),
]


@pytest.mark.parametrize(("name", "incoming", "pods", "nodes", "want"), MULTI_NODE, ids=[c[0][:60] for c in MULTI_NODE])
def test_required_affinity_multiple_nodes(
    name: str, incoming: dict, pods: list[dict], nodes: list[dict], want: list
) -> None:
    assert [_reason(incoming, pods, nodes, i) for i in range(len(nodes))] == want


def test_match_label_keys_fold_into_the_selector() -> None:
    """matchLabelKeys/mismatchLabelKeys (KEP-3633): the pod's own value joins the selector."""
    p = pod(labels={"app": "web", "rev": "2"}, anti=[term("app", "In", ["web"], "region", matchLabelKeys=["rev"])])
    old = pod("old", labels={"app": "web", "rev": "1"}, node="node1")
    assert _reason(p, [old]) is None  # another revision does not repel
    assert _reason(p, [pod("same", labels={"app": "web", "rev": "2"}, node="node1")]) == ANTI_AFFINITY
    q = pod(
        labels={"app": "web", "tenant": "a"},
        affinity=[term("app", "In", ["web"], "region", mismatchLabelKeys=["tenant"])],
    )
    assert _reason(q, [pod("b", labels={"app": "web", "tenant": "b"}, node="node1")]) is None
    assert _reason(q, [pod("a", labels={"app": "web", "tenant": "a"}, node="node1")]) == AFFINITY
