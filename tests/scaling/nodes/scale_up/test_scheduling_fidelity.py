"""The planner follows the kube-scheduler's filters (issue 29): scenarios after
kubernetes-sigs/karpenter pkg/controllers/provisioning/scheduling/topology_test.go and
suite_test.go ("should schedule a pod with pod affinity to an existing pod's zone", "should not
violate pod anti-affinity on zone", "should allow violation of a self-affinity ... first pod",
"should schedule pods with host ports on different nodes", extended resources), as
NodeGroupWithPriority pools over three zones. Never a node the scheduler would not use, and
always the scheduler's words for a pod no pool can take."""

from __future__ import annotations

from collections import Counter
from typing import Any

from scaling.kube.models import LABEL_ZONE, NodeInfo, PodInfo, Resources
from scaling.kube.pods import pod_info
from scaling.kube.scheduling.volumes import volumes_from
from scaling.nodes.catalogue import catalogue_index
from scaling.nodes.models import ScaleUpPlan
from scaling.nodes.nodegroups import parse_node_group
from scaling.nodes.providers.kwok import kwok_catalogue
from scaling.nodes.scale_up.planning import plan_scale_up
from tests.scaling.nodes.scale_up.test_planning import request_for

CAT = catalogue_index(kwok_catalogue())
HOST = "kubernetes.io/hostname"
ZONES = ["z1", "z2", "z3"]


def zoned(types: tuple[str, ...] = ("cx32",), zones: list[str] = ZONES, **config: Any):
    pools = [
        {"provider": "kwok", "serverType": list(types), "priority": 10, "config": {"zone": z, **config}} for z in zones
    ]
    return parse_node_group({"metadata": {"name": "g"}, "spec": {"pools": pools}}, {"kwok"})


def pod(name: str, labels: dict | None = None, node: str = "", cpu: str = "500m", **spec: Any) -> PodInfo:
    requests = {"cpu": cpu, "memory": "512Mi", **spec.pop("requests", {})}
    container: dict[str, Any] = {"name": "c", "resources": {"requests": requests}}
    if "ports" in spec:
        container["ports"] = spec.pop("ports")
    affinity: dict[str, Any] = {}
    for kind, key in (("affinity", "podAffinity"), ("anti", "podAntiAffinity")):
        if kind in spec:
            affinity[key] = {"requiredDuringSchedulingIgnoredDuringExecution": spec.pop(kind)}
    if affinity:
        spec["affinity"] = affinity
    return pod_info(
        {
            "metadata": {"namespace": "ns", "name": name, "uid": name, "labels": labels or {}},
            "spec": {"containers": [container], **({"nodeName": node} if node else {}), **spec},
            "status": {"phase": "Running" if node else "Pending"},
        }
    )


def term(app: str, key: str) -> dict:
    return {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": key}


def full_node(name: str, zone: str) -> NodeInfo:
    """A Ready node in `zone` with no room left: its pods count, nothing settles on it."""
    r = Resources(cpu_m=4000, memory=8 * 2**30, pods=110)
    return NodeInfo(name=name, labels={LABEL_ZONE: zone, HOST: name}, allocatable=r, requested=r, ready=True)


def zones_of(plan: ScaleUpPlan) -> Counter[str]:
    return Counter(n.pool.rsplit("-", 1)[-1] for n in plan.new_nodes for _ in n.pod_uids)


def pools_of(plan: ScaleUpPlan) -> list[str]:
    return [n.pool for n in plan.new_nodes]


def reasons(plan: ScaleUpPlan) -> dict[str, str]:
    return {p.name: f"{p.reason}: {p.message}" for p in plan.problems}


def test_pod_affinity_to_a_running_pods_zone_buys_in_that_zone_only() -> None:
    running = [pod("db-0", {"app": "db"}, node="n3")]
    web = [pod(f"web-{i}", {"app": "web"}, affinity=[term("db", LABEL_ZONE)]) for i in range(3)]
    plan = plan_scale_up(running + web, [full_node("n3", "z3")], [zoned()], CAT, [])
    assert plan.problems == [] and zones_of(plan) == {"z3": 3}


def test_pod_affinity_to_a_pod_that_exists_nowhere_buys_nothing_and_says_why() -> None:
    web = [pod(f"web-{i}", {"app": "web"}, affinity=[term("cache", LABEL_ZONE)]) for i in range(2)]
    plan = plan_scale_up(web, [], [zoned()], CAT, [])
    assert plan.new_nodes == []
    assert {p.reason for p in plan.problems} == {"NeverSatisfiable"}
    assert "node(s) didn't match pod affinity rules" in plan.problems[0].message


def test_pod_affinity_to_a_pod_in_another_namespace_only_is_not_met() -> None:
    other = pod_info(
        {
            "metadata": {"namespace": "other", "name": "c", "uid": "c", "labels": {"app": "cache"}},
            "spec": {"nodeName": "n1", "containers": [{"name": "c"}]},
            "status": {"phase": "Running"},
        }
    )
    web = [pod("web-0", {"app": "web"}, affinity=[term("cache", LABEL_ZONE)])]
    plan = plan_scale_up([other, *web], [full_node("n1", "z1")], [zoned()], CAT, [])
    assert plan.new_nodes == [] and "didn't match pod affinity rules" in plan.problems[0].message


def test_self_affinity_on_the_hostname_puts_the_first_pods_on_one_node() -> None:
    group_pods = [pod(f"p-{i}", {"app": "batch"}, affinity=[term("batch", HOST)]) for i in range(4)]
    plan = plan_scale_up(group_pods, [], [zoned(("cx22", "cx42"))], CAT, [])
    assert len(plan.new_nodes) == 1 and len(plan.new_nodes[0].pod_uids) == 4 and plan.problems == []
    assert sum(plan.new_nodes[0].pods.values()) == 4


def test_self_affinity_group_larger_than_any_node_reports_the_rest() -> None:
    group_pods = [pod(f"p-{i}", {"app": "batch"}, cpu="1500m", affinity=[term("batch", HOST)]) for i in range(4)]
    plan = plan_scale_up(group_pods, [], [zoned(("cx32",))], CAT, [])  # cx32 holds two
    assert len(plan.new_nodes) == 1 and len(plan.new_nodes[0].pod_uids) == 2
    assert {p.reason for p in plan.problems} == {"NeverSatisfiable"} and sum(p.count for p in plan.problems) == 2


def test_affinity_to_a_pending_pod_waits_for_it_and_buys_nothing_for_it() -> None:
    cache = [pod("cache-0", {"app": "cache"})]
    web = [pod(f"web-{i}", {"app": "web"}, affinity=[term("cache", HOST)]) for i in range(2)]
    plan = plan_scale_up(cache + web, [], [zoned()], CAT, [])
    assert [u for n in plan.new_nodes for u in n.pod_uids] == ["cache-0"]
    assert {p.name: p.reason for p in plan.problems} == {
        "web-0": "WaitingForAffinityTarget",
        "web-1": "WaitingForAffinityTarget",
    }


def test_zone_anti_affinity_avoids_every_zone_with_a_match() -> None:
    running = [pod("db-0", {"app": "db"}, node="n1"), pod("db-1", {"app": "db"}, node="n2")]
    batch = [pod("b-0", {"app": "batch"}, anti=[term("db", LABEL_ZONE)])]
    plan = plan_scale_up(running + batch, [full_node("n1", "z1"), full_node("n2", "z2")], [zoned()], CAT, [])
    assert zones_of(plan) == {"z3": 1}
    plan = plan_scale_up(
        running + batch, [full_node("n1", "z1"), full_node("n2", "z2")], [zoned(zones=["z1", "z2"])], CAT, []
    )
    assert plan.new_nodes == [] and "node(s) didn't match pod anti-affinity rules" in plan.problems[0].message


def test_a_running_pods_anti_affinity_repels_the_pending_pod() -> None:
    # The running db repels every "web" pod from its zone: not settled on n1's room, not bought in z1.
    running = [pod("db-0", {"app": "db"}, node="n1", anti=[term("web", LABEL_ZONE)])]
    roomy = NodeInfo(
        name="n1",
        labels={LABEL_ZONE: "z1", HOST: "n1"},
        allocatable=Resources(cpu_m=4000, memory=8 * 2**30, pods=110),
        ready=True,
    )
    web = [pod("web-0", {"app": "web"})]
    plan = plan_scale_up(running + web, [roomy], [zoned(zones=["z1", "z2"])], CAT, [])
    assert plan.fits_existing == [] and zones_of(plan) == {"z2": 1}
    plan = plan_scale_up(running + web, [roomy], [zoned(zones=["z1"])], CAT, [])
    assert (
        plan.new_nodes == [] and "node(s) didn't satisfy existing pods anti-affinity rules" in plan.problems[0].message
    )


def test_a_zone_anti_affine_database_gets_one_pod_per_zone() -> None:
    db = [pod(f"db-{i}", {"app": "db"}, anti=[term("db", LABEL_ZONE)]) for i in range(4)]
    plan = plan_scale_up(db, [], [zoned()], CAT, [])
    assert zones_of(plan) == {"z1": 1, "z2": 1, "z3": 1}
    assert [(p.reason, p.count) for p in plan.problems] == [("NeverSatisfiable", 1)]
    assert "didn't match pod anti-affinity rules" in plan.problems[0].message


def test_a_ready_node_the_database_settles_on_keeps_the_rest_out_of_its_zone() -> None:
    # The constraints demo's wasted node: the first plan buys one node per zone for db-0..2; the
    # z2 node turns Ready (its request no longer counts in flight, its room does) before the
    # scheduler binds anything. The pod that settles on it must repel the other two from z2 as
    # the scheduler's AddPod does, so the z1 and z3 requests cover them and nothing is bought.
    db = [pod(f"db-{i}", {"app": "db"}, cpu="1", anti=[term("db", LABEL_ZONE)]) for i in range(3)]
    group = zoned(("cx22",))
    first = plan_scale_up(db, [], [group], CAT, [])
    assert zones_of(first) == {"z1": 1, "z2": 1, "z3": 1}
    in_flight = [
        request_for(n, f"r{i}", pods=n.pods) for i, n in enumerate(first.new_nodes) if not n.pool.endswith("z2")
    ]
    room = Resources(cpu_m=1900, memory=3 * 2**30, pods=110)
    ready = NodeInfo(name="n2", labels={LABEL_ZONE: "z2", HOST: "n2"}, allocatable=room, ready=True)
    plan = plan_scale_up(db, [ready], [group], CAT, in_flight)
    assert (len(plan.fits_existing), len(plan.covered_in_flight), plan.new_nodes) == (1, 2, [])
    # db-0 already runs in z1: db-1 settles on the z2 node, the z3 request covers db-2.
    running = pod("db-0", {"app": "db"}, node="n1", cpu="1", anti=[term("db", LABEL_ZONE)])
    plan = plan_scale_up([running, *db[1:]], [full_node("n1", "z1"), ready], [group], CAT, in_flight[1:])
    assert (plan.fits_existing, plan.covered_in_flight, plan.new_nodes) == (["db-1"], ["db-2"], [])


def test_two_workloads_that_repel_each_other_never_share_a_planned_node() -> None:
    a = [pod(f"a-{i}", {"app": "a"}, anti=[term("b", HOST)]) for i in range(2)]
    b = [pod(f"b-{i}", {"app": "b"}) for i in range(2)]
    plan = plan_scale_up(a + b, [], [zoned(("cx42",), zones=["z1"])], CAT, [])
    for n in plan.new_nodes:
        assert len({u[0] for u in n.pod_uids}) == 1, n.pod_uids
    assert sorted(u for n in plan.new_nodes for u in n.pod_uids) == ["a-0", "a-1", "b-0", "b-1"]


def test_host_ports_one_pod_per_node_and_clashing_workloads_apart() -> None:
    ports = [{"containerPort": 9100, "hostPort": 9100}]
    agents = [pod(f"agent-{i}", {"app": "agent"}, ports=ports) for i in range(3)]
    other = [pod("other-0", {"app": "other"}, ports=ports)]
    plan = plan_scale_up(agents + other, [], [zoned(("cx42",), zones=["z1"])], CAT, [])
    assert len(plan.new_nodes) == 4 and all(len(n.pod_uids) == 1 for n in plan.new_nodes)


def test_gpu_pods_go_to_gpu_types_and_without_one_are_never_satisfiable() -> None:
    gpu = [pod(f"train-{i}", {"app": "train"}, requests={"nvidia.com/gpu": "1"}) for i in range(3)]
    plan = plan_scale_up(gpu, [], [zoned(("cx32", "gpu1", "gpu4"), zones=["z1"])], CAT, [])
    assert plan.problems == [] and {n.pool for n in plan.new_nodes} <= {"kwok-gpu1-z1", "kwok-gpu4-z1"}
    assert all(
        n.requirements.amount("nvidia.com/gpu")
        <= CAT[("kwok", n.pool.split("-")[1])].allocatable.amount("nvidia.com/gpu")
        for n in plan.new_nodes
    )
    assert sum(n.requirements.amount("nvidia.com/gpu") for n in plan.new_nodes) == 3
    plan = plan_scale_up(gpu, [], [zoned(("cx32",), zones=["z1"])], CAT, [])
    assert plan.new_nodes == [] and "Insufficient nvidia.com/gpu" in plan.problems[0].message


def test_kwok_pools_may_declare_extended_resources() -> None:
    foo = [pod("f-0", requests={"example.com/foo": "2"})]
    assert plan_scale_up(foo, [], [zoned(zones=["z1"])], CAT, []).new_nodes == []
    plan = plan_scale_up(foo, [], [zoned(zones=["z1"], resources={"example.com/foo": 4})], CAT, [])
    assert len(plan.new_nodes) == 1 and plan.new_nodes[0].requirements.amount("example.com/foo") == 2


def test_a_pv_bound_in_one_zone_gets_its_node_there() -> None:
    vols = volumes_from(
        [{"metadata": {"namespace": "ns", "name": "data"}, "spec": {"volumeName": "pv-1"}}],
        [
            {
                "metadata": {"name": "pv-1", "labels": {LABEL_ZONE: "z2"}},
                "spec": {
                    "nodeAffinity": {
                        "required": {
                            "nodeSelectorTerms": [
                                {"matchExpressions": [{"key": LABEL_ZONE, "operator": "In", "values": ["z2"]}]}
                            ]
                        }
                    }
                },
            }
        ],
        [],
    )
    p = pod("pg-0", {"app": "pg"}, volumes=[{"name": "d", "persistentVolumeClaim": {"claimName": "data"}}])
    plan = plan_scale_up([p], [], [zoned()], CAT, [], volumes=vols)
    assert zones_of(plan) == {"z2": 1}
    plan = plan_scale_up([p], [], [zoned(zones=["z1"])], CAT, [], volumes=vols)
    assert plan.new_nodes == [] and "node(s) had volume node affinity conflict" in plan.problems[0].message


def test_min_domains_caps_each_zone_while_fewer_zones_exist() -> None:
    spread = {
        "maxSkew": 1,
        "topologyKey": LABEL_ZONE,
        "whenUnsatisfiable": "DoNotSchedule",
        "minDomains": 3,
        "labelSelector": {"matchLabels": {"app": "web"}},
    }
    web = [pod(f"w-{i}", {"app": "web"}, topologySpreadConstraints=[spread]) for i in range(4)]
    plan = plan_scale_up(web, [], [zoned(zones=["z1", "z2"])], CAT, [])
    # Two zones < minDomains 3: the global minimum is 0, so each zone takes maxSkew (1) pod.
    assert zones_of(plan) == {"z1": 1, "z2": 1} and sum(p.count for p in plan.problems) == 2


def test_a_pod_with_resource_claims_is_reported_not_modelled_and_never_bought_for() -> None:
    dra = [pod("dra-0", resourceClaims=[{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}])]
    roomy = NodeInfo(
        name="n1", labels={LABEL_ZONE: "z1"}, allocatable=Resources(cpu_m=4000, memory=8 * 2**30, pods=110), ready=True
    )
    plan = plan_scale_up(dra, [roomy], [zoned()], CAT, [])
    assert plan.new_nodes == [] and plan.fits_existing == []
    assert [(p.reason, "DynamicResources" in p.message) for p in plan.problems] == [("NotModelled", True)]


def test_two_workloads_on_one_host_port_without_other_terms_never_share_a_node() -> None:
    ports = [{"containerPort": 53, "hostPort": 53, "protocol": "UDP"}]
    a = [pod_info({"metadata": {"name": "a", "uid": "a"}, "spec": {"containers": [{"name": "c", "ports": ports}]}})]
    big = {"resources": {"requests": {"cpu": "1"}}}
    b = [
        pod_info(
            {"metadata": {"name": "b", "uid": "b"}, "spec": {"containers": [{"name": "c", "ports": ports, **big}]}}
        )
    ]
    plan = plan_scale_up(a + b, [], [zoned(("cx42",), zones=["z1"])], CAT, [])
    assert sorted(len(n.pod_uids) for n in plan.new_nodes) == [1, 1]


def test_pods_kept_off_one_gpu_node_use_the_room_of_another_before_a_node_of_their_own() -> None:
    """Two GPU workloads (never on one gpu1: one GPU each) and two pods anti-affine on the
    hostname: one goes beside each GPU pod. A plan that gave the second one a cx22 of its own
    would see the scheduler put it on the second gpu1 and the cx22 stay empty (found by
    tests/differential)."""
    group = parse_node_group(
        {
            "metadata": {"name": "g"},
            "spec": {
                "pools": [
                    {"provider": "kwok", "serverType": types, "priority": 10, "config": {"zone": "z1"}}
                    for types in (["cx22", "cx32"], ["gpu1"])
                ]
            },
        },
        {"kwok"},
    )
    gpu = {"cpu": "250m", "memory": "1Gi", "nvidia.com/gpu": "1"}
    pods = [
        pod("train-0", {"app": "train"}, cpu="250m", requests=gpu),
        *(pod(f"db-{i}", {"app": "db"}, cpu="250m", anti=[term("db", HOST)]) for i in range(2)),
        pod("infer-0", {"app": "infer"}, cpu="250m", requests=gpu),
    ]
    plan = plan_scale_up(pods, [], [group], CAT, [])
    assert plan.problems == []
    assert [n.pool for n in plan.new_nodes] == ["kwok-gpu1-z1"] * 2
    beside = sorted(sorted(u.split("-")[0] for u in n.pod_uids) for n in plan.new_nodes)
    assert beside == [["db", "infer"], ["db", "train"]]


def test_workloads_asking_for_a_little_disk_share_a_node() -> None:
    """Five one-pod workloads that each ask 1Gi of ephemeral-storage: a cx22's 40 GB disk holds
    them all, so one node, as without the disk (kept apart per resource, five were bought and
    the scheduler would have left four empty)."""
    disk = {"ephemeral-storage": "1Gi"}
    pods = [pod(f"w{i}-0", {"app": f"w{i}"}, cpu=f"{200 + 10 * i}m", requests=disk) for i in range(5)]
    plan = plan_scale_up(pods, [], [zoned(("cx22", "cx32"), zones=["z1"])], CAT, [])
    assert plan.problems == [] and [len(n.pod_uids) for n in plan.new_nodes] == [5]
    assert plan.new_nodes[0].requirements.amount("ephemeral-storage") == 5 * 2**30
