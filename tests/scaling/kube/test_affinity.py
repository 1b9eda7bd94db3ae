"""Required node affinity: parsing from a pod spec, and the scheduler's matching rules."""

from __future__ import annotations

from scaling.kube.affinity import node_affinity_matches, per_node_cap, required_node_affinity, spread_room
from scaling.kube.models import NodeSelectorRequirement, NodeSelectorTerm
from scaling.kube.pods import pod_info


def term(*exprs: tuple[str, str, tuple[str, ...]], fields: tuple = ()) -> NodeSelectorTerm:
    return NodeSelectorTerm(
        match_expressions=tuple(NodeSelectorRequirement(key=k, operator=op, values=v) for k, op, v in exprs),
        match_fields=tuple(NodeSelectorRequirement(key=k, operator=op, values=v) for k, op, v in fields),
    )


LABELS = {"zone": "a", "gpu-count": "4", "disk": "ssd"}


def test_every_operator() -> None:
    cases = {
        ("zone", "In", ("a", "b")): True,
        ("zone", "In", ("b",)): False,
        ("zone", "NotIn", ("b",)): True,
        ("zone", "NotIn", ("a",)): False,
        ("missing", "NotIn", ("a",)): True,  # absent key: NotIn holds, as in the scheduler
        ("disk", "Exists", ()): True,
        ("missing", "Exists", ()): False,
        ("missing", "DoesNotExist", ()): True,
        ("disk", "DoesNotExist", ()): False,
        ("gpu-count", "Gt", ("3",)): True,
        ("gpu-count", "Gt", ("4",)): False,
        ("gpu-count", "Lt", ("5",)): True,
        ("disk", "Gt", ("1",)): False,  # not an integer
        ("missing", "Lt", ("5",)): False,
    }
    for expr, expected in cases.items():
        assert node_affinity_matches([term(expr)], LABELS) is expected, expr


def test_terms_are_ored_expressions_anded_and_an_empty_term_matches_nothing() -> None:
    both = term(("zone", "In", ("a",)), ("disk", "In", ("hdd",)))
    assert not node_affinity_matches([both], LABELS)
    assert node_affinity_matches([both, term(("disk", "In", ("ssd",)))], LABELS)
    assert not node_affinity_matches([NodeSelectorTerm()], LABELS)
    assert node_affinity_matches([], LABELS)  # no required affinity: every node


def test_match_fields_name_an_existing_node_only() -> None:
    pinned = term(fields=(("metadata.name", "In", ("node-1",)),))
    assert node_affinity_matches([pinned], LABELS, node_name="node-1")
    assert not node_affinity_matches([pinned], LABELS, node_name="node-2")
    assert not node_affinity_matches([pinned], LABELS)  # a node not created yet has no name


def test_parsed_from_the_pod_spec() -> None:
    pod = {
        "metadata": {"name": "p", "namespace": "n", "uid": "u"},
        "spec": {
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [
                                    {"key": "kubernetes.io/arch", "operator": "In", "values": ["arm64"]}
                                ]
                            },
                            {"matchExpressions": [{"key": "disk", "operator": "Exists"}]},
                        ]
                    },
                    # Preferred affinity never blocks scheduling: not part of the requirement.
                    "preferredDuringSchedulingIgnoredDuringExecution": [
                        {"weight": 1, "preference": {"matchExpressions": [{"key": "x", "operator": "Exists"}]}}
                    ],
                }
            }
        },
    }
    assert pod_info(pod).node_affinity == [
        term(("kubernetes.io/arch", "In", ("arm64",))),
        term(("disk", "Exists", ())),
    ]
    assert required_node_affinity({}) == []


def test_pods_with_the_same_affinity_share_terms_but_not_the_list() -> None:
    def spec(arch: str) -> dict:
        expr = {"key": "kubernetes.io/arch", "operator": "In", "values": [arch]}
        required = {"nodeSelectorTerms": [{"matchExpressions": [expr]}]}
        return {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": required}}}

    first, second = required_node_affinity(spec("arm64")), required_node_affinity(spec("arm64"))
    assert first == second == [term(("kubernetes.io/arch", "In", ("arm64",)))]
    first.clear()  # a caller's list is its own
    assert required_node_affinity(spec("arm64")) == second
    assert required_node_affinity(spec("amd64")) == [term(("kubernetes.io/arch", "In", ("amd64",)))]


def _pod(spec: dict, labels: dict | None = None, namespace: str = "web") -> dict:
    return {
        "metadata": {"name": "p", "namespace": namespace, "uid": "u", "labels": labels or {"app": "web"}},
        "spec": {"containers": [{"name": "c"}], **spec},
    }


def _anti(selector: dict | None, key: str = "kubernetes.io/hostname", **extra: object) -> dict:
    term = {"topologyKey": key, **extra}
    if selector is not None:
        term["labelSelector"] = selector
    return {"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}}


def test_hostname_anti_affinity_on_its_own_labels_is_one_per_node() -> None:
    (s,) = pod_info(_pod(_anti({"matchLabels": {"app": "web"}}))).spreads
    assert (s.limit, s.counts_self, s.namespaces, s.match_labels) == (1, True, ("web",), (("app", "web"),))
    assert per_node_cap([s]) == 1
    assert spread_room([s], []) == 1
    assert spread_room([s], [("web", {"app": "web"})]) == 0
    assert spread_room([s], [("other", {"app": "web"})]) == 1  # another namespace does not count
    # Against other pods only: a node without them takes any number, a new node is no limit.
    (other,) = pod_info(_pod(_anti({"matchExpressions": [{"key": "app", "operator": "In", "values": ["db"]}]}))).spreads
    assert not other.counts_self and per_node_cap([other]) is None
    assert spread_room([other], [("web", {"app": "web"})]) is None
    assert spread_room([other], [("web", {"app": "db"})]) == 0
    # matchLabelKeys folds the pod's own values in; a namespaceSelector reads as every namespace.
    (keyed,) = pod_info(
        _pod(_anti({}, matchLabelKeys=["pod-template-hash"]), labels={"app": "web", "pod-template-hash": "h1"})
    ).spreads
    assert keyed.match_labels == (("pod-template-hash", "h1"),)
    (wide,) = pod_info(_pod(_anti({"matchLabels": {"app": "web"}}, namespaceSelector={}))).spreads
    assert wide.namespaces == () and spread_room([wide], [("other", {"app": "web"})]) == 0


def test_terms_growth_does_not_read_set_no_limit() -> None:
    assert pod_info(_pod(_anti({"matchLabels": {"app": "web"}}, key="topology.kubernetes.io/zone"))).spreads == []
    assert pod_info(_pod(_anti(None))).spreads == []  # a null selector selects no pod
    soft = {"maxSkew": 1, "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "ScheduleAnyway"}
    soft["labelSelector"] = {"matchLabels": {"app": "web"}}
    assert pod_info(_pod({"topologySpreadConstraints": [soft]})).spreads == []
    assert pod_info(_pod({})).spreads == []


def test_hostname_spread_is_max_skew_per_node() -> None:
    c = {"maxSkew": 2, "topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"app": "web"}}}
    (s,) = pod_info(_pod({"topologySpreadConstraints": [{**c, "whenUnsatisfiable": "DoNotSchedule"}]})).spreads
    assert (s.limit, s.counts_self, per_node_cap([s])) == (2, True, 2)
    assert spread_room([s], [("web", {"app": "web"})]) == 1
    # Not selecting itself: the node may hold up to maxSkew of the others (skew vs an empty node).
    (o,) = pod_info(_pod({"topologySpreadConstraints": [c]}, labels={"app": "api"})).spreads
    assert (o.limit, o.counts_self) == (3, False)
    assert spread_room([o], [("web", {"app": "web"})] * 2) is None
    assert spread_room([o], [("web", {"app": "web"})] * 3) == 0
