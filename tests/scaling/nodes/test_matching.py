from scaling.kube.models import (
    LABEL_ARCH,
    LABEL_HOSTNAME,
    LABEL_INSTANCE_TYPE,
    LABEL_OS,
    LABEL_REGION,
    LABEL_ZONE,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    PodInfo,
    Taint,
    Toleration,
)
from scaling.nodes.catalogue import catalogue_index
from scaling.nodes.matching import (
    eligible_pools,
    match_pods_to_groups,
    node_labels_for,
    pod_fits_node_shape,
    selector_matches,
    tolerates,
)
from scaling.nodes.models import LABEL_GROUP, LABEL_POOL
from scaling.nodes.nodegroups import flatten_pools, parse_node_group
from scaling.nodes.providers.kwok import kwok_catalogue

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
        LABEL_REGION: "kwok",
        LABEL_ZONE: "kwok-a",
    }


def hetzner_group(config: dict) -> object:
    return parse_node_group(
        {
            "metadata": {"name": "h"},
            "spec": {"pools": [{"provider": "hetzner", "serverType": "cx22", "priority": 1, "config": config}]},
        },
        {"hetzner"},
    )


def test_topology_labels_per_provider() -> None:
    # KWOK: the pool's config, or the defaults; a group label cannot override them.
    g = group("g", ["cx22"], labels={LABEL_ZONE: "mine"})
    g.pools[0].config.update({"region": "r1", "zone": "r1-b"})
    labels = node_labels_for(g, flatten_pools(g)[0], None)
    assert (labels[LABEL_REGION], labels[LABEL_ZONE]) == ("r1", "r1-b")
    # Hetzner: the region is the location (as hcloud's cloud controller manager sets it), known
    # only when the pool names one; the zone (datacenter) never before creation.
    one = hetzner_group({"locations": ["nbg1"]})
    assert node_labels_for(one, flatten_pools(one)[0], None)[LABEL_REGION] == "nbg1"
    assert LABEL_ZONE not in node_labels_for(one, flatten_pools(one)[0], None)
    single = hetzner_group({"location": "hel1"})
    assert node_labels_for(single, flatten_pools(single)[0], None)[LABEL_REGION] == "hel1"
    several = hetzner_group({"locations": ["fsn1", "nbg1"]})
    assert LABEL_REGION not in node_labels_for(several, flatten_pools(several)[0], None)
    # A planned node has no hostname: it is unknown until the node exists.
    assert LABEL_HOSTNAME not in labels


def test_planner_selects_pools_by_zone_region_and_not_hostname() -> None:
    g = parse_node_group(
        {
            "metadata": {"name": "g"},
            "spec": {
                "pools": [
                    {"provider": "kwok", "serverType": "cx22", "priority": 1, "config": {"zone": "kwok-b"}},
                    {"provider": "kwok", "serverType": "cx32", "priority": 1},
                ]
            },
        },
        {"kwok"},
    )
    by_zone = eligible_pools({LABEL_ZONE: "kwok-b"}, [], g, CAT)
    assert [p.server_type for p in by_zone] == ["cx22"]
    assert [p.server_type for p in eligible_pools({LABEL_REGION: "kwok"}, [], g, CAT)] == ["cx22", "cx32"]
    assert eligible_pools({LABEL_HOSTNAME: "n1"}, [], g, CAT) == []
    affinity = [NodeSelectorTerm(match_expressions=(NodeSelectorRequirement(key=LABEL_ZONE, values=("kwok-a",)),))]
    assert [p.server_type for p in eligible_pools({}, [], g, CAT, node_affinity=affinity)] == ["cx32"]


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


def test_a_groups_startup_taint_does_not_keep_pods_off_its_planned_nodes() -> None:
    """A group registers its nodes with a startup taint (Cluster Autoscaler's prefixes: a CNI's agent
    lifts it once the node can run pods); its planned nodes are read without it, as Cluster
    Autoscaler's templates are (SanitizeTaints), so a pod that does not tolerate it still gets one. A
    status taint likewise; any other taint keeps such pods off."""
    cni = {"key": "startup-taint.cluster-autoscaler.kubernetes.io/cni", "value": "true", "effect": "NoSchedule"}
    status = {"key": "status-taint.cluster-autoscaler.kubernetes.io/gpu", "effect": "NoSchedule"}
    net = group("net", ["cx32"], taints=[cni, status])
    assert [t.key for t in net.taints] == [cni["key"], status["key"]]  # what its nodes register with
    assert net.template_taints == []
    matched, problems = match_pods_to_groups([pod("web")], [net], CAT)
    assert [p.uid for p in matched["net"]] == ["web"] and problems == []
    dedicated = group("dedicated", ["cx32"], taints=[cni, {"key": "dedicated", "value": "db", "effect": "NoSchedule"}])
    matched, problems = match_pods_to_groups([pod("web")], [dedicated], CAT)
    assert not matched and problems[0].reason == "NoMatchingNodeGroup"


def test_arm_selector_only_matches_groups_with_arm_types() -> None:
    amd = group("amd", ["cx32"])
    arm = group("arm", ["cax21"])
    matched, problems = match_pods_to_groups([pod("a", node_selector={"kubernetes.io/arch": "arm64"})], [amd, arm], CAT)
    assert list(matched) == ["arm"] and problems == []
