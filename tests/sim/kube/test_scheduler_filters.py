"""The scheduler's passes with the filters that read other pods and extended resources: GPUs,
pod affinity (a target placed, a target missing, a self-affine group), host ports, and the
scheduler's message for each. In-process (Store + Scheduler, one pass at a time)."""

from __future__ import annotations

from sim.kube.control import FakeControl
from sim.kube.scheduler import Scheduler
from sim.kube.store import Obj, Store
from tests.sim.kube.objects import make_node, make_pod, term

HOST = "kubernetes.io/hostname"


def cluster(*nodes: Obj) -> tuple[Store, Scheduler]:
    store = Store()
    for node in nodes:
        node["metadata"]["labels"].setdefault(HOST, node["metadata"]["name"])
        store.create(store.builtin("nodes"), "", node)
    return store, Scheduler(store, FakeControl(pod_initial_backoff=0.0, pod_max_backoff=0.0))


def placed(store: Store) -> dict[str, str]:
    """pod -> its node, or '!' + its Unschedulable message."""
    out = {}
    for pod in store.all(store.builtin("pods")):
        if node := pod["spec"].get("nodeName"):
            out[pod["metadata"]["name"]] = node
        else:
            c = next(c for c in pod["status"].get("conditions") or [] if c["type"] == "PodScheduled")
            out[pod["metadata"]["name"]] = "!" + c["message"]
    return out


def add(store: Store, *pods: Obj) -> None:
    for pod in pods:
        store.create(store.builtin("pods"), "default", pod)


def test_gpu_pods_go_to_the_gpu_node_and_say_so_when_none_has_room() -> None:
    store, scheduler = cluster(
        make_node("cpu-1"), make_node("cpu-2"), make_node("gpu-1", alloc={"nvidia.com/gpu": "1"})
    )
    add(
        store,
        make_pod("train-0", requests={"nvidia.com/gpu": "1"}),
        make_pod("train-1", requests={"nvidia.com/gpu": "1"}),
    )
    scheduler.schedule_once()
    assert placed(store) == {
        "train-0": "gpu-1",
        "train-1": "!0/3 nodes are available: 3 Insufficient nvidia.com/gpu.",
    }


def test_pod_affinity_follows_its_target_and_waits_for_a_missing_one() -> None:
    store, scheduler = cluster(*(make_node(f"n{i}", {"zone": z}) for i, z in enumerate("aab")))
    add(store, make_pod("cache", {"app": "cache"}, node="n2"))
    add(store, make_pod("web", {"app": "web"}, affinity=[term("app", "In", HOST, ["cache"])]))
    add(store, make_pod("zonal", affinity=[term("app", "In", "zone", ["cache"])]))
    add(store, make_pod("orphan", affinity=[term("app", "In", "zone", ["nobody"])]))
    scheduler.schedule_once()
    assert placed(store) == {
        "cache": "n2",
        "web": "n2",
        "zonal": "n2",
        "orphan": "!0/3 nodes are available: 3 node(s) didn't match pod affinity rules.",
    }


def test_a_self_affine_group_lands_where_its_first_pod_did() -> None:
    store, scheduler = cluster(*(make_node(f"n{i}", {"zone": z}) for i, z in enumerate("abc")))
    add(store, *(make_pod(f"g{i}", {"app": "g"}, affinity=[term("app", "In", "zone", ["g"])]) for i in range(4)))
    scheduler.schedule_once()
    zones = {placed(store)[f"g{i}"] for i in range(4)}
    assert len(zones) == 1


def test_zone_anti_affinity_one_per_zone_then_the_scheduler_says_why() -> None:
    store, scheduler = cluster(*(make_node(f"n{i}", {"zone": z}) for i, z in enumerate("aabb")))
    anti = [term("app", "In", "zone", ["db"])]
    add(store, *(make_pod(f"db-{i}", {"app": "db"}, anti=anti) for i in range(3)))
    scheduler.schedule_once()
    got = placed(store)
    assert {got["db-0"], got["db-1"]} in ({"n0", "n2"}, {"n0", "n3"}, {"n1", "n2"}, {"n1", "n3"})
    assert got["db-2"] == "!0/4 nodes are available: 4 node(s) didn't match pod anti-affinity rules."
    # A pod the running ones repel: their terms select it.
    add(store, make_pod("intruder", {"app": "db"}))
    scheduler.schedule_once()
    assert placed(store)["intruder"] == (
        "!0/4 nodes are available: 4 node(s) didn't satisfy existing pods anti-affinity rules."
    )


def test_host_ports_one_agent_per_node() -> None:
    store, scheduler = cluster(make_node("a"), make_node("b"))
    ports = [{"containerPort": 9100, "hostPort": 9100}]
    add(store, *(make_pod(f"agent-{i}", {"app": "agent"}, ports=ports) for i in range(3)))
    scheduler.schedule_once()
    got = placed(store)
    assert sorted([got["agent-0"], got["agent-1"]]) == ["a", "b"]
    assert got["agent-2"] == "!0/2 nodes are available: 2 node(s) didn't have free ports for the requested pod ports."


def test_the_first_refusing_filter_per_node_is_counted() -> None:
    store, scheduler = cluster(
        make_node("small", alloc={"cpu": "1"}),
        make_node("tainted", taints=[{"key": "gpu", "value": "yes", "effect": "NoSchedule"}]),
        make_node("busy"),
    )
    add(store, make_pod("holder", {"app": "x"}, node="busy", ports=[{"containerPort": 80, "hostPort": 80}]))
    add(store, make_pod("p", requests={"cpu": "2"}, ports=[{"containerPort": 80, "hostPort": 80}]))
    scheduler.schedule_once()
    assert placed(store)["p"] == (
        "!0/3 nodes are available: 1 Insufficient cpu, 1 node(s) didn't have free ports for the requested pod ports, "
        "1 node(s) had untolerated taint {gpu: yes}."
    )


def test_a_node_tainted_during_a_pass_takes_no_more_of_its_pods() -> None:
    """The kube-scheduler snapshots the nodes for each pod's cycle; the sim's pass reads them once.
    A node tainted NoSchedule while the pass runs (a scale-down's hard taint, which comes right
    before its re-check of the node's pods) must take no pod the pass bound after the taint."""
    store, scheduler = cluster(make_node("only"))
    add(store, make_pod("first"), make_pod("second"))
    requests_of = scheduler._requests_of
    seen: list[str] = []

    def taint_after_the_first(pod: Obj):  # noqa: ANN202
        # The pass has read the nodes; the second pod's turn comes after the taint landed.
        seen.append(pod["metadata"]["name"])
        if len(seen) == 2:

            def tainted(node: Obj) -> Obj:
                node["spec"]["taints"] = [{"key": "ToBeDeletedByClusterAutoscaler", "effect": "NoSchedule"}]
                return node

            store.mutate(store.builtin("nodes"), "", "only", tainted)
        return requests_of(pod)

    scheduler._requests_of = taint_after_the_first
    assert scheduler.schedule_once() == 1
    scheduler._requests_of = requests_of
    scheduler.schedule_once()
    assert placed(store) == {
        "first": "only",
        "second": "!0/1 nodes are available: 1 node(s) had untolerated taint {ToBeDeletedByClusterAutoscaler: }.",
    }
