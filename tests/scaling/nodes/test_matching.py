from scaling.kube.models import LABEL_ARCH, LABEL_INSTANCE_TYPE, LABEL_OS, PodInfo, Taint, Toleration
from scaling.nodes.catalogue import catalogue_index, kwok_catalogue
from scaling.nodes.matching import (
    match_pods_to_groups,
    node_labels_for,
    pod_fits_node_shape,
    selector_matches,
    tolerates,
)
from scaling.nodes.models import LABEL_GROUP, LABEL_POOL
from scaling.nodes.nodegroups import flatten_pools, parse_node_group

CAT = catalogue_index(kwok_catalogue())
NS = Taint(key="dedicated", value="gpu", effect="NoSchedule")


def test_tolerations() -> None:
    assert tolerates([], [])
    assert not tolerates([], [NS])
    assert tolerates([], [Taint(key="soft", effect="PreferNoSchedule")])  # never blocks
    assert tolerates([Toleration(key="dedicated", value="gpu")], [NS])
    assert not tolerates([Toleration(key="dedicated", value="cpu")], [NS])
    assert tolerates([Toleration(key="dedicated", operator="Exists")], [NS])
    assert tolerates([Toleration(operator="Exists")], [NS, Taint(key="x", effect="NoExecute")])
    assert not tolerates([Toleration(key="dedicated", value="gpu", effect="NoExecute")], [NS])
    assert tolerates([Toleration(key="dedicated", value="gpu", effect="NoSchedule")], [NS])
    assert not tolerates([Toleration(key="dedicated", value="gpu")], [NS, Taint(key="other", effect="NoExecute")])


def test_selector_and_shape() -> None:
    assert selector_matches({}, {"a": "b"})
    assert selector_matches({"a": "b"}, {"a": "b", "c": "d"})
    assert not selector_matches({"a": "b"}, {"a": "c"})
    pod = PodInfo(
        namespace="n",
        name="p",
        uid="u",
        node_selector={"a": "b"},
        tolerations=[Toleration(key="dedicated", operator="Exists")],
    )
    assert pod_fits_node_shape(pod, {"a": "b"}, [NS])
    assert not pod_fits_node_shape(pod, {"a": "x"}, [NS])


def group(name: str, types: list[str], **spec) -> object:
    return parse_node_group(
        {
            "metadata": {"name": name},
            "spec": {"pools": [{"provider": "kwok", "serverType": types, "priority": 1}], **spec},
        },
        {"kwok"},
    )


def test_node_labels_include_growth_labels_and_arch() -> None:
    g = group("g", ["CAX11"], labels={"team": "a"})
    pool = flatten_pools(g)[0]
    labels = node_labels_for(g, pool, CAT[("kwok", "cax11")])
    assert labels == {
        "team": "a",
        LABEL_GROUP: "g",
        LABEL_POOL: "kwok-cax11",
        LABEL_INSTANCE_TYPE: "cax11",
        LABEL_ARCH: "arm64",
        LABEL_OS: "linux",
    }


def pod(uid: str, **kw) -> PodInfo:
    return PodInfo(namespace="n", name=uid, uid=uid, **kw)


def test_match_by_labels_arch_and_taints() -> None:
    mixed = group("mixed", ["cx32", "cax21"], labels={"tier": "general"})
    gpu = group("gpu", ["ccx33"], taints=[{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}])
    pods = [
        pod("general", node_selector={"tier": "general"}),
        pod("arm", node_selector={"kubernetes.io/arch": "arm64"}),
        pod("gpu", tolerations=[Toleration(key="dedicated", value="gpu")], node_selector={LABEL_GROUP: "gpu"}),
        pod("none", node_selector={"tier": "nope"}),
        pod("both", tolerations=[Toleration(operator="Exists")]),
        pod("s390", node_selector={"kubernetes.io/arch": "s390x"}),
    ]
    matched, problems = match_pods_to_groups(pods, [mixed, gpu], CAT)
    assert {k: [p.uid for p in v] for k, v in matched.items()} == {"mixed": ["general", "arm"], "gpu": ["gpu"]}
    by_uid = {p.uid: p for p in problems}
    assert by_uid["none"].reason == "NoMatchingNodeGroup"
    assert by_uid["s390"].reason == "NoMatchingNodeGroup"
    assert by_uid["both"].reason == "MultipleNodeGroups"
    assert "gpu" in by_uid["both"].message and "mixed" in by_uid["both"].message


def test_arm_selector_only_matches_groups_with_arm_types() -> None:
    amd = group("amd", ["cx32"])
    arm = group("arm", ["cax21"])
    matched, problems = match_pods_to_groups([pod("a", node_selector={"kubernetes.io/arch": "arm64"})], [amd, arm], CAT)
    assert list(matched) == ["arm"] and problems == []
