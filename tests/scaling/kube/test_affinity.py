"""Required node affinity: parsing from a pod spec, and the scheduler's matching rules."""

from __future__ import annotations

from scaling.kube.affinity import node_affinity_matches, required_node_affinity
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
