"""The scheduler's pass works from state kept from the store's events and a per-kind heap of
nodes; these tests hold it to the plain algorithm: every pending pod in queue order, a full
filter cycle (sim/kube/filters/cycle.py) on every node and every feasible node scored
(TaintToleration normalized over them), the best by score with ties to the first by name, and a
pod like one that fit nowhere in the pass given that one's verdict.

Randomised clusters (resources, pod slots, zones, taints, PreferNoSchedule taints, cordons,
NotReady nodes, selectors, tolerations, priorities, hostname anti-affinity, zone spread, GPUs,
host ports, pod affinity, pods already bound) must come
out of one pass with the same bindings and the same Unschedulable messages as the reference,
so the order in which pods are placed is unchanged too.
"""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

import pytest

from sim.kube.control import FakeControl
from sim.kube.filters.cycle import Cluster, Cycle, NodeInfo
from sim.kube.filters.podaffinity import anti_affinity_terms
from sim.kube.filters.resources import allocatable, pod_requests
from sim.kube.scheduler import Scheduler, equivalence_key, is_terminal, requests, score
from sim.kube.scores import tainttoleration
from sim.kube.store import Obj, Store
from tests.sim.conftest import eventually

READY = [{"type": "Ready", "status": "True"}]


def ready_node(store: Store, name: str, cpu: str, pods: str) -> None:
    status = {"allocatable": {"cpu": cpu, "pods": pods}, "conditions": READY}
    store.create(store.builtin("nodes"), "", {"metadata": {"name": name}, "status": status})


def reference_pass(nodes: list[Obj], pods: list[Obj], order: dict[str, int], scoring: str) -> dict[str, str]:
    """pod name -> node name, or "!" + the Unschedulable message: the plain algorithm, a full
    cycle (every filter on every node) per pod."""
    nodes = sorted(nodes, key=lambda n: n["metadata"]["name"])
    infos = {n["metadata"]["name"]: NodeInfo(n, allocatable(n), Counter(), []) for n in nodes}
    cluster = Cluster(list(infos.values()))
    pending = []
    for pod in pods:
        node_name = pod["spec"].get("nodeName")
        if node_name:
            if node_name in infos and not is_terminal(pod):
                infos[node_name].add(pod, requests(pod))
                if terms := anti_affinity_terms(pod):
                    cluster.anti_pods.append((infos[node_name].node, terms))
        else:
            pending.append(pod)
    pending.sort(key=lambda p: (-int(p["spec"].get("priority") or 0), order[p["metadata"]["uid"]]))
    out: dict[str, str] = {}
    failed_like: dict[str, str] = {}  # a pod like one that fit nowhere gets its verdict
    for pod in pending:
        req = requests(pod)
        like = equivalence_key(pod, bool(cluster.anti_pods))
        if like is not None and like in failed_like:
            out[pod["metadata"]["name"]] = failed_like[like]
            continue
        cycle = Cycle(pod, req, cluster)
        feasible = [info for info in cluster.nodes if not cycle.reasons(info)]
        tolerations = tainttoleration.prefer_tolerations(pod)
        counts = [tainttoleration.untolerated(tolerations, tainttoleration.prefer_taints(i.node)) for i in feasible]
        best: tuple[int, str] | None = None
        for info, taints in zip(feasible, tainttoleration.normalize(counts), strict=True):
            s = score(req, info.node, info.used, scoring) + tainttoleration.WEIGHT * taints
            if best is None or s > best[0]:
                best = (s, info.name)
        if best is None:
            out[pod["metadata"]["name"]] = "!" + cycle.message()
            if like is not None:
                failed_like[like] = out[pod["metadata"]["name"]]
            continue
        out[pod["metadata"]["name"]] = best[1]
        infos[best[1]].add(pod, req)
        if terms := anti_affinity_terms(pod):
            cluster.anti_pods.append((infos[best[1]].node, terms))
    return out


def random_cluster(rng: random.Random, store: Store) -> None:
    nodes, pods = store.builtin("nodes"), store.builtin("pods")
    names = []
    for i in range(rng.randint(1, 14)):
        name = f"n{rng.randint(0, 99):02d}-{i}"
        names.append(name)
        zone = rng.choice("abc")
        taints = [{"key": "gpu", "value": "yes", "effect": "NoSchedule"}] if rng.random() < 0.15 else []
        soft = rng.choice([[], [], [], ["drain"], ["drain"], ["spot"], ["drain", "spot"], ["drain", "spot", "old"]])
        taints += [{"key": k, "value": "x", "effect": "PreferNoSchedule"} for k in soft]
        spec: dict[str, Any] = {"taints": taints}
        if rng.random() < 0.1:
            spec["unschedulable"] = True
        cpu, memory, slots = rng.choice(["1", "2", "4", "8"]), rng.choice(["2Gi", "4Gi", "8Gi"]), rng.randint(2, 12)
        allocatable = {"cpu": cpu, "memory": memory, "pods": str(slots)}
        if rng.random() < 0.2:
            allocatable["nvidia.com/gpu"] = rng.choice(["1", "2"])
        ready = rng.random() < 0.9
        if not ready:  # as the node lifecycle controller taints it (the scheduler reads taints only)
            taints.append({"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"})
        store.create(
            nodes,
            "",
            {
                "metadata": {"name": name, "labels": {"zone": zone, "kubernetes.io/hostname": name}},
                "spec": spec,
                "status": {"allocatable": allocatable, "conditions": READY if ready else []},
            },
        )
    for i in range(rng.randint(1, 70)):
        app = rng.choice(["web", "db", "batch"])
        spec = {
            "containers": [
                {
                    "name": "c",
                    "image": "x",
                    "resources": {
                        "requests": {
                            "cpu": rng.choice(["100m", "250m", "500m", "1", "2", "3"]),
                            "memory": rng.choice(["64Mi", "256Mi", "1Gi", "3Gi"]),
                        }
                    },
                }
            ],
            "priority": rng.choice([0, 0, 0, 10]),
        }
        if rng.random() < 0.2:
            spec["nodeSelector"] = {"zone": rng.choice("abc")}
        if rng.random() < 0.2:
            spec["tolerations"] = [{"key": "gpu", "operator": "Exists"}]
        if rng.random() < 0.3:
            spec.setdefault("tolerations", []).append(
                rng.choice(
                    [
                        {"key": "drain", "operator": "Exists", "effect": "PreferNoSchedule"},
                        {"key": "spot", "operator": "Equal", "value": "x"},
                        {"key": "drain", "operator": "Exists", "effect": "NoSchedule"},  # not for the score
                        {"operator": "Exists", "effect": "PreferNoSchedule"},
                    ]
                )
            )
        if app == "db" and rng.random() < 0.5:
            spec["affinity"] = {
                "podAntiAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": [
                        {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": "kubernetes.io/hostname"}
                    ]
                }
            }
        if app == "batch" and rng.random() < 0.3:
            spec["topologySpreadConstraints"] = [
                {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
                 "labelSelector": {"matchLabels": {"app": "batch"}}}
            ]  # fmt: skip
        if app == "web" and rng.random() < 0.3:
            spec["containers"][0]["ports"] = [{"containerPort": 80, "hostPort": rng.choice([80, 8080])}]
        if app == "batch" and rng.random() < 0.2:
            spec["containers"][0]["resources"]["limits"] = {"nvidia.com/gpu": "1"}
        if app == "web" and rng.random() < 0.3:
            spec["affinity"] = {
                "podAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": [
                        {"labelSelector": {"matchLabels": {"app": rng.choice(["db", "web"])}},
                         "topologyKey": rng.choice(["zone", "kubernetes.io/hostname"])}
                    ]
                }
            }  # fmt: skip
        if rng.random() < 0.25:
            spec["nodeName"] = rng.choice(names)  # already bound (perhaps beyond its node's room)
        store.create(pods, "default", {"metadata": {"name": f"p{i:02d}", "labels": {"app": app}}, "spec": spec})


@pytest.mark.parametrize("scoring", ["least-allocated", "most-allocated"])
@pytest.mark.parametrize("seed", range(40))
def test_a_pass_binds_and_reports_as_the_plain_algorithm(seed: int, scoring: str) -> None:
    rng = random.Random(seed)
    store = Store()
    scheduler = Scheduler(store, FakeControl(scoring=scoring, pod_initial_backoff=0.0, pod_max_backoff=0.0))
    scheduler.step()  # an empty cluster: what follows reaches the scheduler as events
    random_cluster(rng, store)
    pods_rt = store.builtin("pods")
    pods = store.all(pods_rt)
    order = {p["metadata"]["uid"]: store.order(p) for p in pods}
    want = reference_pass(store.all(store.builtin("nodes")), pods, order, scoring)
    scheduler.schedule_once()
    got = {}
    for pod in store.all(pods_rt):
        name = pod["metadata"]["name"]
        if name not in want:
            continue  # bound before the pass
        if pod["spec"].get("nodeName"):
            got[name] = pod["spec"]["nodeName"]
        else:
            condition = next(c for c in pod["status"]["conditions"] if c["type"] == "PodScheduled")
            got[name] = "!" + condition["message"]
    assert got == want


def soft_tainted_cluster(rng: random.Random, store: Store) -> None:
    """Nodes of any size with 0-3 PreferNoSchedule taints, pods that only room constrains (the
    per-kind heap's, unless a node has 2+ taints a kind does not tolerate), some bound."""
    names = []
    for i in range(rng.randint(2, 10)):
        name = f"n{i}"
        names.append(name)
        soft = rng.sample(["drain", "spot", "old"], k=rng.choice([0, 0, 1, 1, 1, 2, 3]))
        cpu, memory = rng.choice([("1", "2Gi"), ("4", "8Gi"), ("8", "4Gi"), ("64", "256Gi")])
        body = {
            "metadata": {"name": name},
            "spec": {"taints": [{"key": k, "value": "x", "effect": "PreferNoSchedule"} for k in soft]},
            "status": {"allocatable": {"cpu": cpu, "memory": memory, "pods": "20"}, "conditions": READY},
        }
        store.create(store.builtin("nodes"), "", body)
    kinds = []
    for _ in range(rng.randint(1, 4)):
        req = rng.choice([{}, {"cpu": "100m"}, {"cpu": "1", "memory": "1Gi"}, {"cpu": "2", "memory": "256Mi"}])
        tolerations = rng.sample(
            [
                {"key": "drain", "operator": "Exists", "effect": "PreferNoSchedule"},
                {"key": "spot", "operator": "Equal", "value": "x"},
                {"key": "old", "operator": "Exists", "effect": "NoSchedule"},
            ],
            k=rng.choice([0, 0, 1, 2]),
        )
        kinds.append(
            {"containers": [{"name": "c", "image": "x", "resources": {"requests": req}}], "tolerations": tolerations}
        )
    for i in range(rng.randint(1, 40)):
        spec = dict(rng.choice(kinds))
        if rng.random() < 0.2:
            spec["nodeName"] = rng.choice(names)
        store.create(store.builtin("pods"), "default", {"metadata": {"name": f"p{i:02d}"}, "spec": spec})


@pytest.mark.parametrize("scoring", ["least-allocated", "most-allocated"])
@pytest.mark.parametrize("seed", range(40))
def test_soft_tainted_nodes_are_scored_as_the_plain_algorithm(seed: int, scoring: str) -> None:
    """TaintToleration normalizes over the feasible nodes; the heap's per-node score must pick
    what that picks (exact while no count is above 1, the full path otherwise)."""
    rng = random.Random(seed)
    store = Store()
    soft_tainted_cluster(rng, store)
    pods_rt = store.builtin("pods")
    pods = store.all(pods_rt)
    order = {p["metadata"]["uid"]: store.order(p) for p in pods}
    want = reference_pass(store.all(store.builtin("nodes")), pods, order, scoring)
    Scheduler(store, FakeControl(scoring=scoring, pod_initial_backoff=0.0, pod_max_backoff=0.0)).schedule_once()
    got = {}
    for pod in store.all(pods_rt):
        if pod["metadata"]["name"] in want:
            got[pod["metadata"]["name"]] = pod["spec"].get("nodeName") or "!" + next(
                c["message"] for c in pod["status"]["conditions"] if c["type"] == "PodScheduled"
            )
    assert got == want


@pytest.mark.parametrize("seed", range(10))
def test_passes_never_bind_a_pod_beyond_its_nodes_room(seed: int) -> None:
    """Pods come and go between passes (the cached state follows the events): no pass puts a
    pod on a node whose allocatable its pods would then exceed."""
    rng = random.Random(seed)
    store = Store()
    random_cluster(rng, store)
    scheduler = Scheduler(store, FakeControl(pod_initial_backoff=0.0, pod_max_backoff=0.0))
    pods_rt = store.builtin("pods")
    preplaced = {p["metadata"]["name"] for p in store.all(pods_rt) if p["spec"].get("nodeName")}
    for round_ in range(6):
        scheduler.step()
        for pod in rng.sample(store.all(pods_rt), k=min(5, len(store.all(pods_rt)))):
            if rng.random() < 0.5:
                store.delete(pods_rt, "default", pod["metadata"]["name"])
        store.create(
            pods_rt,
            "default",
            {
                "metadata": {"name": f"late{round_}", "labels": {"app": "late"}},
                "spec": {"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "500m"}}}]},
            },
        )
    scheduler.step()
    for node in store.all(store.builtin("nodes")):
        name = node["metadata"]["name"]
        on_node = [
            p for p in store.all(pods_rt)
            if p["spec"].get("nodeName") == name and p["metadata"]["name"] not in preplaced
        ]  # fmt: skip
        if not on_node:
            continue
        held: Counter[str] = Counter()
        for p in store.all(pods_rt):
            if p["spec"].get("nodeName") == name:
                held.update(pod_requests(p))
        room = allocatable(node)
        # What the pods the passes placed there ask for (a zero request needs no room).
        asked = {k for p in on_node for k, v in pod_requests(p).items() if v > 0}
        assert all(held[k] <= room.get(k, 0) for k in asked), (name, held, room)


def test_a_node_deleted_mid_pass_gets_no_pod_and_the_next_pass_places_them_elsewhere() -> None:
    store = Store()
    nodes, pods = store.builtin("nodes"), store.builtin("pods")
    for name, cpu in (("a", "8"), ("b", "4")):
        ready_node(store, name, cpu, "20")
    for i in range(6):
        body = {"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "500m"}}}]}
        store.create(pods, "default", {"metadata": {"name": f"p{i}"}, "spec": body})
    deleted = []

    def delete_a_after_the_first_bind() -> None:
        bound = [p for p in store.all(pods) if p["spec"].get("nodeName")]
        if bound and not deleted:
            deleted.append(True)
            store.delete(nodes, "", "a")  # its pods go with it (the pod garbage collector)

    store.write_listeners.append(delete_a_after_the_first_bind)
    scheduler = Scheduler(store, FakeControl(pod_initial_backoff=0.0, pod_max_backoff=0.0))
    scheduler.schedule_once()
    assert deleted
    assert all(p["spec"].get("nodeName") in (None, "b") for p in store.all(pods))
    scheduler.schedule_once()
    remaining = store.all(pods)
    assert remaining and all(p["spec"].get("nodeName") == "b" for p in remaining)


def test_a_pod_in_backoff_gets_its_new_message_once_the_backoff_ends_without_other_writes() -> None:
    """Nothing else changes: the loop's steps write the deferred message when it is due, once."""
    store = Store()
    pods = store.builtin("pods")
    ready_node(store, "a", "1", "9")
    body = {"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "2"}}}]}
    store.create(pods, "default", {"metadata": {"name": "big"}, "spec": body})
    scheduler = Scheduler(store, FakeControl(pod_initial_backoff=0.3, pod_max_backoff=0.3))
    scheduler.step()

    def message() -> str:
        pod = store.find(pods, "default", "big")
        assert pod is not None
        return next(c["message"] for c in pod["status"]["conditions"] if c["type"] == "PodScheduled")

    assert message() == "0/1 nodes are available: 1 Insufficient cpu."
    ready_node(store, "b", "1", "9")
    scheduler.step()
    assert message() == "0/1 nodes are available: 1 Insufficient cpu."  # within its backoff
    rv = store.rv

    def stepped() -> bool:
        scheduler.step()
        return message() == "0/2 nodes are available: 2 Insufficient cpu."

    eventually(stepped, timeout=10, message="the deferred message written")
    assert store.rv == rv + 1  # one write: the message
    for _ in range(3):
        scheduler.step()
    assert store.rv == rv + 1


def test_a_started_pod_does_not_start_a_pass_but_a_new_pod_does() -> None:
    store = Store()
    pods = store.builtin("pods")
    ready_node(store, "a", "4", "9")
    body = {"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}]}
    store.create(pods, "default", {"metadata": {"name": "p"}, "spec": body})
    scheduler = Scheduler(store, FakeControl())
    passes = []
    original = scheduler.schedule_once
    scheduler.schedule_once = lambda: passes.append(1) or original()  # type: ignore[method-assign]
    scheduler.step()  # binds p
    scheduler.step()  # the pass after a bind (room changed)
    assert len(passes) == 2 and store.find(pods, "default", "p")["spec"]["nodeName"] == "a"  # type: ignore[index]

    def running(obj: Obj) -> Obj:
        obj["status"]["phase"] = "Running"
        return obj

    store.mutate(pods, "default", "p", running, "status")
    scheduler.step()
    assert len(passes) == 2
    store.create(pods, "default", {"metadata": {"name": "q"}, "spec": body})
    scheduler.step()
    assert len(passes) == 3 and store.find(pods, "default", "q")["spec"]["nodeName"] == "a"  # type: ignore[index]
