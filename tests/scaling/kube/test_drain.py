"""Drain rules: what blocks evicting a pod or removing a node."""

from __future__ import annotations

from datetime import UTC, datetime

from scaling.kube.drain import (
    ANNOTATION_SAFE_TO_EVICT,
    ANNOTATION_SAFE_TO_EVICT_LOCAL_VOLUMES,
    ANNOTATION_SCALE_DOWN_DISABLED,
    LOCAL_STORAGE,
    NOT_ENOUGH_PDB,
    NOT_REPLICATED,
    NOT_SAFE_TO_EVICT,
    PROTECTED,
    SCALE_DOWN_DISABLED,
    UNMOVABLE_KUBE_SYSTEM,
    LabelSelector,
    LabelSelectorRequirement,
    PdbBudget,
    PdbInfo,
    drain_blockers,
    is_long_terminating,
    node_blockers,
    pdb_from_object,
    pod_blocker,
    pods_to_evict,
)
from scaling.kube.models import NodeInfo, PodInfo


def pod(name: str, ns: str = "default", node: str = "n1", **kw) -> PodInfo:
    kw.setdefault("controller_kind", "ReplicaSet")
    return PodInfo(namespace=ns, name=name, uid=f"uid-{ns}-{name}", node_name=node, phase="Running", **kw)


def pdb(name: str, labels: dict[str, str], allowed: int, ns: str = "default") -> PdbInfo:
    return PdbInfo(namespace=ns, name=name, selector=LabelSelector(match_labels=labels), disruptions_allowed=allowed)


def codes(blockers) -> list[str]:
    return [b.code for b in blockers]


def test_replicated_pod_is_evictable() -> None:
    assert pod_blocker(pod("web"), []) is None


def test_safe_to_evict_false_blocks_even_a_replicated_pod() -> None:
    b = pod_blocker(pod("web", annotations={ANNOTATION_SAFE_TO_EVICT: "false"}), [])
    assert b is not None and b.code == NOT_SAFE_TO_EVICT and b.pod == "default/web"
    assert "default/web" in b.message


def test_bare_pod_is_not_replicated() -> None:
    b = pod_blocker(pod("bare", controller_kind=None), [])
    assert b is not None and b.code == NOT_REPLICATED and "default/bare" in b.message


def test_custom_controller_kind_is_not_replicated() -> None:
    b = pod_blocker(pod("im", controller_kind="InstanceManager"), [])
    assert b is not None and b.code == NOT_REPLICATED and "InstanceManager" in b.message


def test_local_storage_blocks() -> None:
    b = pod_blocker(pod("cache", has_local_storage=True), [])
    assert b is not None and b.code == LOCAL_STORAGE


def test_local_storage_blocker_names_the_volumes_and_the_annotation() -> None:
    b = pod_blocker(pod("cache", has_local_storage=True, local_volumes=["scratch", "logs"]), [])
    assert b is not None and b.code == LOCAL_STORAGE
    assert "scratch, logs" in b.message and ANNOTATION_SAFE_TO_EVICT_LOCAL_VOLUMES in b.message
    assert b.volume == "scratch"


def test_safe_to_evict_local_volumes_lifts_the_listed_volumes_only() -> None:
    vols = {"has_local_storage": True, "local_volumes": ["scratch", "logs"]}

    def with_annotation(value: str) -> PodInfo:
        return pod("cache", annotations={ANNOTATION_SAFE_TO_EVICT_LOCAL_VOLUMES: value}, **vols)

    assert pod_blocker(with_annotation("scratch,logs"), []) is None
    assert pod_blocker(with_annotation(" logs , scratch "), []) is None
    partly = pod_blocker(with_annotation("scratch"), [])
    assert partly is not None and partly.code == LOCAL_STORAGE and "volume logs" in partly.message
    assert pod_blocker(with_annotation(""), []) is not None
    assert pod_blocker(with_annotation("other"), []) is not None
    # It lifts only local storage: a pod without a controller still blocks.
    bare = with_annotation("scratch,logs").model_copy(update={"controller_kind": None})
    assert pod_blocker(bare, []).code == NOT_REPLICATED


def test_long_terminating_is_deletion_plus_grace_plus_30s() -> None:
    deleted = datetime(2024, 5, 1, 10, tzinfo=UTC)
    t0 = deleted.timestamp()
    default_grace = pod("web", deletion_timestamp=deleted)
    assert not is_long_terminating(default_grace, t0 + 60)  # 30 s grace + 30 s margin, not past
    assert is_long_terminating(default_grace, t0 + 61)
    long_grace = pod("db", deletion_timestamp=deleted, termination_grace_period_s=600)
    assert not is_long_terminating(long_grace, t0 + 630) and is_long_terminating(long_grace, t0 + 631)
    zero = pod("quick", deletion_timestamp=deleted, termination_grace_period_s=0)
    assert is_long_terminating(zero, t0 + 31)
    assert not is_long_terminating(pod("alive"), t0 + 10**6)


def test_kube_system_pod_without_pdb_blocks_and_with_pdb_does_not() -> None:
    dns = pod("coredns", ns="kube-system", labels={"k8s-app": "dns"})
    b = pod_blocker(dns, [])
    assert b is not None and b.code == UNMOVABLE_KUBE_SYSTEM
    # A PDB in another namespace does not count.
    assert pod_blocker(dns, [pdb("dns", {"k8s-app": "dns"}, 1, ns="default")]).code == UNMOVABLE_KUBE_SYSTEM
    assert pod_blocker(dns, [pdb("dns", {"k8s-app": "dns"}, 1, ns="kube-system")]) is None


def test_kube_system_daemonset_pod_is_never_evicted() -> None:
    ds = pod("kube-proxy", ns="kube-system", controller_kind="DaemonSet", is_daemonset=True)
    assert pods_to_evict("n1", [ds]) == []
    assert drain_blockers("n1", [ds], []) == []


def test_safe_to_evict_true_lifts_not_replicated_local_storage_and_kube_system() -> None:
    ann = {ANNOTATION_SAFE_TO_EVICT: "true"}
    assert pod_blocker(pod("bare", controller_kind=None, annotations=ann), []) is None
    assert (
        pod_blocker(pod("im", controller_kind="InstanceManager", has_local_storage=True, annotations=ann), []) is None
    )
    assert pod_blocker(pod("x", ns="kube-system", controller_kind=None, annotations=ann), []) is None


def test_safe_to_evict_true_does_not_lift_a_pdb() -> None:
    im = pod(
        "im-1",
        ns="longhorn-system",
        controller_kind="InstanceManager",
        labels={"im": "n1"},
        annotations={ANNOTATION_SAFE_TO_EVICT: "true"},
    )
    blockers = drain_blockers("n1", [im], [pdb("im-pdb", {"im": "n1"}, 0, ns="longhorn-system")])
    assert codes(blockers) == [NOT_ENOUGH_PDB]
    assert "longhorn-system/im-1" in blockers[0].message and "longhorn-system/im-pdb" in blockers[0].message


def test_pdb_counts_all_pods_of_the_node_it_selects() -> None:
    pods = [pod("a", labels={"app": "x"}), pod("b", labels={"app": "x"}), pod("c", node="n2", labels={"app": "x"})]
    assert codes(drain_blockers("n1", pods, [pdb("x", {"app": "x"}, 1)])) == [NOT_ENOUGH_PDB]
    assert drain_blockers("n1", pods, [pdb("x", {"app": "x"}, 2)]) == []
    # n2 has one such pod, within the budget of 1.
    assert drain_blockers("n2", pods, [pdb("x", {"app": "x"}, 1)]) == []


def test_terminal_and_mirror_pods_are_ignored() -> None:
    pods = [
        PodInfo(namespace="default", name="done", uid="u1", node_name="n1", phase="Succeeded"),
        PodInfo(namespace="kube-system", name="etcd", uid="u2", node_name="n1", phase="Running", is_mirror=True),
    ]
    assert drain_blockers("n1", pods, []) == []


def test_pdb_budget_is_shared_across_nodes() -> None:
    budget = PdbBudget([pdb("x", {"app": "x"}, 1)])
    a, b = pod("a", labels={"app": "x"}), pod("b", node="n2", labels={"app": "x"})
    assert budget.check([a]) is None
    budget.consume([a])
    blocked = budget.check([b])
    assert blocked is not None and blocked.code == NOT_ENOUGH_PDB


def test_node_blockers() -> None:
    node = NodeInfo(name="n1", annotations={ANNOTATION_SCALE_DOWN_DISABLED: "true"})
    assert codes(node_blockers(node)) == [SCALE_DOWN_DISABLED]
    assert codes(node_blockers(node, {"n1"})) == [PROTECTED, SCALE_DOWN_DISABLED]
    assert node_blockers(NodeInfo(name="n1", annotations={ANNOTATION_SCALE_DOWN_DISABLED: "false"})) == []


def test_pdb_from_object_and_selectors() -> None:
    obj = {
        "metadata": {"name": "p", "namespace": "ns"},
        "spec": {
            "minAvailable": 1,
            "selector": {
                "matchLabels": {"app": "x"},
                "matchExpressions": [{"key": "tier", "operator": "In", "values": ["web", "api"]}],
            },
        },
        "status": {"disruptionsAllowed": 2},
    }
    p = pdb_from_object(obj)
    assert (p.namespace, p.name, p.disruptions_allowed) == ("ns", "p", 2)
    assert p.selects(pod("a", ns="ns", labels={"app": "x", "tier": "web"}))
    assert not p.selects(pod("a", ns="ns", labels={"app": "x", "tier": "db"}))
    assert not p.selects(pod("a", ns="other", labels={"app": "x", "tier": "web"}))
    # Null selector selects nothing; empty selector selects the whole namespace.
    assert not pdb_from_object({"metadata": {"name": "n", "namespace": "ns"}, "spec": {}}).selects(pod("a", ns="ns"))
    assert pdb_from_object({"metadata": {"name": "n", "namespace": "ns"}, "spec": {"selector": {}}}).selects(
        pod("a", ns="ns")
    )
    sel = LabelSelector(
        match_expressions=[
            LabelSelectorRequirement(key="a", operator="Exists"),
            LabelSelectorRequirement(key="b", operator="DoesNotExist"),
            LabelSelectorRequirement(key="c", operator="NotIn", values=["1"]),
        ]
    )
    assert sel.matches({"a": ""}) and sel.matches({"a": "", "c": "2"})
    assert not sel.matches({}) and not sel.matches({"a": "", "b": ""}) and not sel.matches({"a": "", "c": "1"})
