"""InterPodAffinity's Filter, case for case from kubernetes/kubernetes
pkg/scheduler/framework/plugins/interpodaffinity/filtering_test.go (TestRequiredAffinitySingleNode,
TestRequiredAffinityMultipleNodes), run against sim/kube/filters/podaffinity.py alone; plus
namespaceSelector with the namespaces' labels and matchLabelKeys/mismatchLabelKeys."""

from __future__ import annotations

import pytest

from sim.kube.filters import podaffinity
from sim.kube.filters.podaffinity import AFFINITY, ANTI_AFFINITY, EXISTING_ANTI_AFFINITY
from tests.sim.kube.objects import Obj, infos, make_node, make_pod, term

OK = None
SEC = {"service": "securityscan"}
S1 = {"security": "S1"}
NODE1 = make_node("node1", {"region": "r1", "zone": "z11"})


def verdicts(
    pod: Obj, nodes: list[Obj], pods: list[Obj], namespaces: dict[str, dict[str, str]] | None = None
) -> list[str | None]:
    node_infos = infos(nodes, pods)
    anti = [(i.node, t) for i in node_infos for p in i.pods if (t := podaffinity.anti_affinity_terms(p))]
    state = podaffinity.prefilter(pod, [(i.node, i.pods) for i in node_infos], anti, namespaces or {})
    return [podaffinity.refusal(state, n) for n in nodes]


def on_node1(labels: dict[str, str] | None = None, **kw: object) -> Obj:
    return make_pod("existing", labels if labels is not None else SEC, node="node1", **kw)  # type: ignore[arg-type]


SINGLE = [
    (
        "satisfies with requiredDuringSchedulingIgnoredDuringExecution in PodAffinity using In operator that matches the existing pod",
        make_pod(labels=S1, affinity=[term("service", "In", "region", ["securityscan", "value2"])]),
        [on_node1()],
        OK,
    ),
    (
        "satisfies the pod with requiredDuringSchedulingIgnoredDuringExecution in PodAffinity using not in operator in labelSelector that matches the existing pod",
        make_pod(labels=S1, affinity=[term("service", "NotIn", "region", ["securityscan3", "value3"])]),
        [on_node1()],
        OK,
    ),
    (
        "Does not satisfy the PodAffinity with labelSelector because of diff Namespace",
        make_pod(
            labels=S1,
            affinity=[term("service", "In", "", ["securityscan", "value2"], namespaces=["DiffNameSpace"])],
        ),
        [make_pod("x", SEC, node="node1", namespace="ns")],
        AFFINITY,
    ),
    (
        "Doesn't satisfy the PodAffinity because of unmatching labelSelector with the existing pod",
        make_pod(labels=SEC, affinity=[term("service", "In", "", ["antivirusscan", "value2"])]),
        [on_node1()],
        AFFINITY,
    ),
    (
        "satisfies the PodAffinity with different label Operators in multiple RequiredDuringSchedulingIgnoredDuringExecution",
        make_pod(
            labels=S1,
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
        [on_node1()],
        OK,
    ),
    (
        "The labelSelector requirements(items of matchExpressions) are ANDed, the pod cannot schedule onto the node because one of the matchExpression item don't match.",
        make_pod(
            labels=S1,
            affinity=[
                term("service", "Exists", "region"),
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
        [on_node1()],
        AFFINITY,
    ),
    (
        "satisfies the PodAffinity and PodAntiAffinity with the existing pod",
        make_pod(
            labels=S1,
            affinity=[term("service", "In", "region", ["securityscan", "value2"])],
            anti=[term("service", "In", "node", ["antivirusscan", "value2"])],
        ),
        [on_node1()],
        OK,
    ),
    (
        "satisfies the PodAffinity and PodAntiAffinity and PodAntiAffinity symmetry with the existing pod",
        make_pod(
            labels=S1,
            affinity=[term("service", "In", "region", ["securityscan", "value2"])],
            anti=[term("service", "In", "node", ["antivirusscan", "value2"])],
        ),
        [on_node1(anti=[term("service", "In", "node", ["antivirusscan", "value2"])])],
        OK,
    ),
    (
        "satisfies the PodAffinity but doesn't satisfy the PodAntiAffinity with the existing pod",
        make_pod(
            labels=S1,
            affinity=[term("service", "In", "region", ["securityscan", "value2"])],
            anti=[term("service", "In", "zone", ["securityscan", "value2"])],
        ),
        [on_node1()],
        ANTI_AFFINITY,
    ),
    (
        "satisfies the PodAffinity and PodAntiAffinity but doesn't satisfy PodAntiAffinity symmetry with the existing pod",
        make_pod(
            labels=SEC,
            affinity=[term("service", "In", "region", ["securityscan", "value2"])],
            anti=[term("service", "In", "node", ["antivirusscan", "value2"])],
        ),
        [on_node1(anti=[term("service", "In", "zone", ["securityscan", "value2"])])],
        EXISTING_ANTI_AFFINITY,
    ),
    (
        "pod matches its own Label in PodAffinity and that matches the existing pod Labels",
        make_pod(labels=SEC, affinity=[term("service", "NotIn", "region", ["securityscan", "value2"])]),
        [make_pod("elsewhere", SEC, node="node2")],
        AFFINITY,
    ),
    (
        "verify that PodAntiAffinity from existing pod is respected when pod has no AntiAffinity constraints. doesn't satisfy PodAntiAffinity symmetry with the existing pod",
        make_pod(labels=SEC),
        [on_node1(anti=[term("service", "In", "zone", ["securityscan", "value2"])])],
        EXISTING_ANTI_AFFINITY,
    ),
    (
        "verify that PodAntiAffinity from existing pod is respected when pod has no AntiAffinity constraints. satisfy PodAntiAffinity symmetry with the existing pod",
        make_pod(labels=SEC),
        [on_node1(anti=[term("service", "NotIn", "zone", ["securityscan", "value2"])])],
        OK,
    ),
    (
        "satisfies the PodAntiAffinity with existing pod but doesn't satisfy PodAntiAffinity symmetry with incoming pod",
        make_pod(labels=SEC, anti=[term("service", "Exists", "region"), term("security", "Exists", "region")]),
        [on_node1(S1, anti=[term("security", "Exists", "zone")])],
        ANTI_AFFINITY,
    ),
    (
        "PodAntiAffinity symmetry check a1: incoming pod and existing pod partially match each other on AffinityTerms",
        make_pod(labels=SEC, anti=[term("service", "Exists", "zone"), term("security", "Exists", "zone")]),
        [on_node1(S1, anti=[term("security", "Exists", "zone")])],
        ANTI_AFFINITY,
    ),
    (
        "PodAntiAffinity symmetry check a2: incoming pod and existing pod partially match each other on AffinityTerms",
        make_pod(labels=S1, anti=[term("security", "Exists", "zone")]),
        [on_node1(SEC, anti=[term("service", "Exists", "zone"), term("security", "Exists", "zone")])],
        EXISTING_ANTI_AFFINITY,
    ),
    (
        "PodAntiAffinity symmetry check b1: incoming pod and existing pod partially match each other on AffinityTerms",
        make_pod(labels={"abc": "", "xyz": ""}, anti=[term("abc", "Exists", "zone"), term("def", "Exists", "zone")]),
        [on_node1({"def": "", "xyz": ""}, anti=[term("abc", "Exists", "zone"), term("def", "Exists", "zone")])],
        ANTI_AFFINITY,
    ),
    (
        "PodAntiAffinity symmetry check b2: incoming pod and existing pod partially match each other on AffinityTerms",
        make_pod(labels={"def": "", "xyz": ""}, anti=[term("abc", "Exists", "zone"), term("def", "Exists", "zone")]),
        [on_node1({"abc": "", "xyz": ""}, anti=[term("abc", "Exists", "zone"), term("def", "Exists", "zone")])],
        ANTI_AFFINITY,
    ),
]


@pytest.mark.parametrize(("name", "pod", "pods", "want"), SINGLE, ids=[c[0][:90] for c in SINGLE])
def test_required_affinity_single_node(name: str, pod: Obj, pods: list[Obj], want: str | None) -> None:
    assert verdicts(pod, [NODE1], pods) == [want]


AB = [
    make_node("nodeA", {"region": "r1", "zone": "z1", "hostname": "nodeA"}),
    make_node("nodeB", {"region": "r1", "zone": "z2", "hostname": "nodeB"}),
]
SAME_ZONE = [
    make_node("nodeA", {"region": "r1", "zone": "z1", "hostname": "nodeA"}),
    make_node("nodeB", {"region": "r1", "zone": "z1", "hostname": "nodeB"}),
]
CHINA_INDIA = [
    make_node("nodeA", {"region": "China"}),
    make_node("nodeB", {"region": "China", "az": "az1"}),
    make_node("nodeC", {"region": "India"}),
]
FOO_BAR_ZONE = [term("foo", "In", "zone", ["bar"]), term("service", "In", "zone", ["securityscan"])]

MULTIPLE = [
    (
        "The affinity rule is to schedule all of the pods of this collection to the same zone. The first pod of the "
        "collection should not be blocked from being scheduled onto any node, even there's no existing pod that matches the rule anywhere.",
        make_pod(labels={"foo": "bar", "service": "securityscan"}, affinity=FOO_BAR_ZONE),
        [],
        [make_node("nodeA", {"zone": "az1", "hostname": "h1"}), make_node("nodeB", {"zone": "az2", "hostname": "h2"})],
        [OK, OK],
    ),
    (
        "The first pod of the collection can only be scheduled on nodes labelled with the requested topology keys",
        make_pod(labels={"foo": "bar", "service": "securityscan"}, affinity=FOO_BAR_ZONE),
        [make_pod("p1", {"foo": "bar"}, node="nodeA")],
        [
            make_node("nodeA", {"zoneLabel": "az1", "hostname": "h1"}),
            make_node("nodeB", {"zoneLabel": "az2", "hostname": "h2"}),
        ],
        [AFFINITY, AFFINITY],
    ),
    (
        "NodeA and nodeB have same topologyKey and label value. NodeA has an existing pod that matches the inter pod "
        "affinity rule. The pod can not be scheduled onto nodeA and nodeB.",
        make_pod(anti=[term("foo", "In", "region", ["abc"])]),
        [make_pod("x", {"foo": "abc"}, node="nodeA")],
        [
            make_node("nodeA", {"region": "r1", "hostname": "nodeA"}),
            make_node("nodeB", {"region": "r1", "hostname": "nodeB"}),
        ],
        [ANTI_AFFINITY, ANTI_AFFINITY],
    ),
    (
        "This test ensures that anti-affinity matches a pod when any term of the anti-affinity rule matches a pod.",
        make_pod(anti=[term("foo", "In", "region", ["abc"]), term("service", "In", "zone", ["securityscan"])]),
        [make_pod("x", {"foo": "abc", "service": "securityscan"}, node="nodeA")],
        AB,
        [ANTI_AFFINITY, ANTI_AFFINITY],
    ),
    (
        "NodeA and nodeB have same topologyKey and label value. NodeA has an existing pod that matches the inter pod "
        "affinity rule. The pod can not be scheduled onto nodeA and nodeB but can be scheduled onto nodeC",
        make_pod(anti=[term("foo", "In", "region", ["abc"])]),
        [make_pod("x", {"foo": "abc"}, node="nodeA")],
        CHINA_INDIA,
        [ANTI_AFFINITY, ANTI_AFFINITY, OK],
    ),
    (
        "NodeA and nodeB have same topologyKey and label value. NodeA has an existing pod that matches the inter pod "
        "affinity rule. The pod can not be scheduled onto nodeA, nodeB, but can be scheduled onto nodeC (NodeC has an "
        "existing pod that match the inter pod affinity rule but in different namespace)",
        make_pod(labels={"foo": "123"}, namespace="NS1", anti=[term("foo", "In", "region", ["bar"])]),
        [
            make_pod("x", {"foo": "bar"}, node="nodeA", namespace="NS1"),
            make_pod("y", node="nodeC", namespace="NS2", anti=[term("foo", "In", "region", ["123"])]),
        ],
        CHINA_INDIA,
        [ANTI_AFFINITY, ANTI_AFFINITY, OK],
    ),
    (
        "Test existing pod's anti-affinity: if an existing pod has a term with invalid topologyKey, labelSelector of "
        "the term is firstly checked, and then topologyKey of the term is also checked",
        make_pod(labels={"foo": ""}),
        [make_pod("x", node="nodeA", anti=[term("foo", "Exists", "invalid-node-label")])],
        SAME_ZONE,
        [OK, OK],
    ),
    (
        "Test incoming pod's anti-affinity: even if labelSelector matches, we still check if topologyKey matches",
        make_pod(anti=[term("foo", "Exists", "invalid-node-label")]),
        [make_pod("x", {"foo": ""}, node="nodeA")],
        SAME_ZONE,
        [OK, OK],
    ),
    (
        "Test existing pod's anti-affinity: incoming pod wouldn't considered as a fit as it violates each "
        "existingPod's terms on all nodes",
        make_pod(labels={"foo": "", "bar": ""}),
        [
            make_pod("x", node="nodeA", anti=[term("foo", "Exists", "zone")]),
            make_pod("y", node="nodeA", anti=[term("bar", "Exists", "region")]),
        ],
        AB,
        [EXISTING_ANTI_AFFINITY, EXISTING_ANTI_AFFINITY],
    ),
    (
        "Test incoming pod's anti-affinity: incoming pod wouldn't considered as a fit as it at least violates one "
        "anti-affinity rule of existingPod",
        make_pod(anti=[term("foo", "Exists", "zone"), term("bar", "Exists", "region")]),
        [make_pod("x", {"foo": ""}, node="nodeA"), make_pod("y", {"bar": ""}, node="nodeB")],
        AB,
        [ANTI_AFFINITY, ANTI_AFFINITY],
    ),
    (
        "Test existing pod's anti-affinity: only when labelSelector and topologyKey both match, it's counted as a "
        "single term match - case when one term has invalid topologyKey",
        make_pod(labels={"foo": "", "bar": ""}),
        [
            make_pod(
                "x", node="nodeA", anti=[term("foo", "Exists", "invalid-node-label"), term("bar", "Exists", "zone")]
            )
        ],
        AB,
        [EXISTING_ANTI_AFFINITY, OK],
    ),
    (
        "Test incoming pod's anti-affinity: only when labelSelector and topologyKey both match, it's counted as a "
        "single term match - case when one term has invalid topologyKey",
        make_pod(anti=[term("foo", "Exists", "invalid-node-label"), term("bar", "Exists", "zone")]),
        [make_pod("podA", {"foo": "", "bar": ""}, node="nodeA")],
        AB,
        [ANTI_AFFINITY, OK],
    ),
    (
        "Test existing pod's anti-affinity: existingPod on nodeA and nodeB has at least one anti-affinity term "
        "matches incoming pod, so incoming pod can only be scheduled to nodeC",
        make_pod(labels={"foo": "", "bar": ""}),
        [
            make_pod("x", node="nodeA", anti=[term("foo", "Exists", "zone"), term("labelA", "Exists", "zone")]),
            make_pod("y", node="nodeB", anti=[term("bar", "Exists", "zone"), term("labelB", "Exists", "zone")]),
        ],
        [*AB, make_node("nodeC", {"region": "r1", "zone": "z3", "hostname": "nodeC"})],
        [EXISTING_ANTI_AFFINITY, EXISTING_ANTI_AFFINITY, OK],
    ),
    (
        "Test incoming pod's affinity: firstly check if all affinityTerms match, and then check if all topologyKeys match",
        make_pod(affinity=[term("foo", "Exists", "region"), term("bar", "Exists", "zone")]),
        [make_pod("pod1", {"foo": "", "bar": ""}, node="nodeA")],
        SAME_ZONE,
        [OK, OK],
    ),
    # namespaceSelector reads the namespaces' labels; the empty selector is every namespace.
    (
        "namespaceSelector: an anti-affine pod avoids pods of namespaces labelled team=a",
        make_pod(anti=[term("app", "Exists", "zone", namespaceSelector={"matchLabels": {"team": "a"}})]),
        [
            make_pod("x", {"app": "db"}, node="nodeA", namespace="team-a"),
            make_pod("y", {"app": "db"}, node="nodeB", namespace="other"),
        ],
        AB,
        [ANTI_AFFINITY, OK],
    ),
    (
        "namespaceSelector {} is every namespace",
        make_pod(affinity=[term("app", "Exists", "zone", namespaceSelector={})]),
        [make_pod("y", {"app": "db"}, node="nodeB", namespace="other")],
        AB,
        [AFFINITY, OK],
    ),
    (
        "an existing pod's namespaceSelector is read with the incoming pod's namespace labels",
        make_pod(labels={"app": "web"}, namespace="team-a"),
        [
            make_pod(
                "x",
                node="nodeA",
                namespace="other",
                anti=[term("app", "Exists", "zone", namespaceSelector={"matchLabels": {"team": "a"}})],
            )
        ],
        AB,
        [EXISTING_ANTI_AFFINITY, OK],
    ),
    (
        "mismatchLabelKeys: pods of another tenant repel, pods of the same tenant do not",
        make_pod(labels={"tenant": "t1"}, anti=[term("tenant", "Exists", "zone", mismatchLabelKeys=["tenant"])]),
        [make_pod("x", {"tenant": "t1"}, node="nodeA"), make_pod("y", {"tenant": "t2"}, node="nodeB")],
        AB,
        [OK, ANTI_AFFINITY],
    ),
    (
        "matchLabelKeys: affinity only to pods of the same revision",
        make_pod(labels={"app": "web", "rev": "2"}, affinity=[term("app", "Exists", "zone", matchLabelKeys=["rev"])]),
        [
            make_pod("x", {"app": "web", "rev": "1"}, node="nodeA"),
            make_pod("y", {"app": "web", "rev": "2"}, node="nodeB"),
        ],
        AB,
        [AFFINITY, OK],
    ),
]


@pytest.mark.parametrize(("name", "pod", "pods", "nodes", "want"), MULTIPLE, ids=[c[0][:90] for c in MULTIPLE])
def test_required_affinity_multiple_nodes(
    name: str, pod: Obj, pods: list[Obj], nodes: list[Obj], want: list[str | None]
) -> None:
    namespaces = {"team-a": {"team": "a"}, "other": {"team": "b"}, "default": {}}
    assert verdicts(pod, nodes, pods, namespaces) == want
