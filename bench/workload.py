"""The bundled benchmark workload: one node group with 20 equal-priority pools, 1,000 full
existing nodes, and a mixed pending workload (small and large, cpu-heavy and memory-heavy)."""

from __future__ import annotations

import random
from dataclasses import dataclass

from scaling.kube.models import LABEL_ZONE, NodeInfo, PodInfo, PodSpread, Resources, TopologySpread
from scaling.nodes.catalogue import catalogue_index
from scaling.nodes.models import LABEL_GROUP, LABEL_POOL, NodeGroup, ServerType
from scaling.nodes.nodegroups import parse_node_group, pool_name
from scaling.nodes.providers.kwok import kwok_catalogue

MIB = 1024**2
GROUP = "general"
PROVIDER = "kwok"

# 20 pools, one priority tier: every current shape family, different prices per resource.
POOL_TYPES = (
    "cx22",
    "cx32",
    "cx42",
    "cx52",
    "cx31",
    "cx33",
    "cpx11",
    "cpx21",
    "cpx31",
    "cpx41",
    "cpx51",
    "cax11",
    "cax21",
    "cax31",
    "cax41",
    "ccx13",
    "ccx23",
    "ccx33",
    "ccx43",
    "ccx53",
)

# (name, cpu millicores, memory MiB, share of pods)
SHAPES = (
    ("web", 100, 128, 0.28),
    ("sidecar-heavy", 50, 64, 0.05),
    ("api", 500, 512, 0.20),
    ("java", 1000, 2048, 0.15),
    ("cpu-worker", 2000, 1024, 0.10),
    ("cache", 250, 4096, 0.10),
    ("batch", 4000, 2048, 0.06),
    ("analytics", 1000, 12288, 0.06),
)


# Workload families (issue 8 item 4, issue 21 item 4): every family's pods, as (name, cpu m,
# memory MiB, share) and optionally a per-node limit (hostname anti-affinity: at most this many
# of the shape on one node).
Shape = tuple[str, int, int, float] | tuple[str, int, int, float, int]
FAMILIES: dict[str, tuple[Shape, ...]] = {
    "mixed": SHAPES,
    "uniform-small": (("web", 100, 128, 1.0),),
    "memory-heavy": (("cache", 250, 4096, 0.6), ("analytics", 500, 8192, 0.4)),
    "cpu-heavy": (("worker", 2000, 1024, 0.7), ("batch", 4000, 2048, 0.3)),
    # A few pods near the largest general-purpose type, many small ones: the case where a
    # per-node choice strands room (growth was 5.7% dearer than CA's price expander here).
    "few-large": (("huge", 14000, 24576, 0.02), ("api", 500, 512, 0.58), ("web", 100, 128, 0.40)),
    "spread": (
        ("s1", 100, 256, 0.2),
        ("s2", 300, 1024, 0.2),
        ("s3", 700, 1536, 0.2),
        ("s4", 1500, 3072, 0.2),
        ("s5", 3000, 5120, 0.2),
    ),  # fmt: skip
    # Two sizes far apart: a node type right for one strands room for the other.
    "bimodal": (("small", 200, 256, 0.8), ("large", 6000, 12288, 0.2)),
    "many-small-few-huge": (("tiny", 50, 64, 0.992), ("huge", 15000, 28672, 0.03)),
    "memory-skewed": (("cache", 250, 6144, 0.5), ("api", 500, 512, 0.3), ("analytics", 1000, 16384, 0.2)),
    "cpu-skewed": (("worker", 3000, 512, 0.5), ("web", 100, 128, 0.3), ("batch", 6000, 2048, 0.2)),
    # Replicas that must not share a node (databases, 1 per node) or spread 3 per node.
    "per-node-limit": (("db", 1500, 4096, 0.1, 1), ("web", 250, 256, 0.6, 3), ("api", 500, 1024, 0.3)),
    # Most replicas capped per node (databases and brokers one per node, web two, api three):
    # merges and emptying nodes are mostly refused, so what a node holds is set at packing.
    "anti-affinity-heavy": (
        ("db", 1500, 4096, 0.15, 1),
        ("broker", 1000, 8192, 0.15, 1),
        ("web", 250, 256, 0.4, 2),
        ("api", 500, 1024, 0.3, 3),
    ),
    # Memory just over a type's room (6249 MiB: a cx33 holds 6248) or just under half a small
    # one (1455 MiB: two per cx22), with tiny capped pods: the shapes of the counterexample
    # test_never_dearer found (a full node that only sheds part of its pods drops a type).
    "awkward-memory": (
        ("cache", 100, 1455, 0.45),
        ("big-cache", 250, 6249, 0.2),
        ("sidecar", 50, 64, 0.25, 1),
        ("api", 500, 512, 0.1),
    ),
    # Tiny pods and about one pod in 125 near the largest general-purpose type (2 of 300).
    "many-tiny-one-huge": (("tiny", 50, 64, 0.992), ("huge", 15000, 28000, 0.008)),
    # Every pod spread over three zones (maxSkew 1); the group has one pool set per zone.
    "zone-spread": (("web", 250, 512, 0.6), ("api", 1000, 2048, 0.3), ("cache", 500, 6144, 0.1)),
}
ZONE_SPREAD_FAMILIES = {"zone-spread"}
ZONES = ("za", "zb", "zc")


@dataclass
class Workload:
    group: NodeGroup
    catalogue: dict[tuple[str, str], ServerType]
    nodes: list[NodeInfo]
    pods: list[PodInfo]


def node_group(zones: tuple[str, ...] = ()) -> NodeGroup:
    """The group: the 20 types in one tier, once per zone when `zones` are given."""
    pools = [{"provider": PROVIDER, "serverType": list(POOL_TYPES), "priority": 50}]
    if zones:
        pools = [{**pools[0], "config": {"zone": z}} for z in zones]
    return parse_node_group(
        {
            "apiVersion": "growth.autoscaling.dev/v1alpha1",
            "kind": "NodeGroupWithPriority",
            "metadata": {"name": GROUP},
            "spec": {"pools": pools},
        },
        known_providers={PROVIDER},
    )


def existing_nodes(catalogue: dict[tuple[str, str], ServerType], count: int = 1000) -> list[NodeInfo]:
    """Ready nodes of the group with no room left, so every pending pod needs a new node."""
    nodes = []
    for i in range(count):
        t = catalogue[(PROVIDER, POOL_TYPES[i % len(POOL_TYPES)])]
        nodes.append(
            NodeInfo(
                name=f"existing-{i}",
                labels={LABEL_GROUP: GROUP, LABEL_POOL: pool_name(PROVIDER, t.name)},
                allocatable=t.allocatable,
                requested=t.allocatable,
                ready=True,
            )
        )
    return nodes


def pending_pods(count: int, seed: int = 7, family: str = "mixed") -> list[PodInfo]:
    shapes = FAMILIES[family]
    rng = random.Random(seed)
    names = [s[0] for s in shapes]
    weights = [s[3] for s in shapes]
    by_name = {s[0]: s for s in shapes}
    pods = []
    for i, name in enumerate(rng.choices(names, weights=weights, k=count)):
        _, cpu, mem, _, *limit = by_name[name]
        spreads = [PodSpread(match_labels=(("app", name),), namespaces=("bench",), limit=limit[0])] if limit else []
        zoned = [TopologySpread(key=LABEL_ZONE, match_labels=(("app", name),), namespaces=("bench",))]
        pods.append(
            PodInfo(
                namespace="bench",
                name=f"{name}-{i}",
                uid=f"uid-{i}",
                labels={"app": name},
                requests=Resources(cpu_m=cpu, memory=mem * MIB, pods=1),
                spreads=spreads,
                topology_spreads=zoned if family in ZONE_SPREAD_FAMILIES else [],
                unschedulable=True,
            )
        )
    return pods


def workload(pod_count: int, node_count: int = 1000, family: str = "mixed") -> Workload:
    catalogue = catalogue_index(kwok_catalogue(PROVIDER))
    return Workload(
        group=node_group(ZONES if family in ZONE_SPREAD_FAMILIES else ()),
        catalogue=catalogue,
        nodes=existing_nodes(catalogue, node_count),
        pods=pending_pods(pod_count, family=family),
    )


# The affinity-heavy family (issue 29 item 5): 50 workloads over three zones, each pod with
# required pod affinity or anti-affinity on the zone or the hostname, built from pod specs as
# the observer parses them. Running "base-<zone>" pods on the full existing nodes are what the
# zone terms point at. Kinds, ten workloads each:
#   solo      anti-affinity to itself on the hostname (one per node)
#   apart     anti-affinity on the hostname to the next workload (never on one node with it)
#   near      affinity on the zone to the running base of one zone (planned in that zone)
#   away      anti-affinity on the zone to the running base of one zone (the other two)
#   near-solo affinity on the zone to a base, anti-affinity to itself on the hostname
AFFINITY_KINDS = ("solo", "apart", "near", "away", "near-solo")
AFFINITY_SIZES = ((100, 128), (250, 256), (500, 1024), (1000, 2048), (250, 4096))


def _affinity_pod(i: int, w: int, zone: str) -> PodInfo:
    from scaling.kube.pods import pod_info

    kind = AFFINITY_KINDS[w // 10]
    cpu, mem = AFFINITY_SIZES[w % len(AFFINITY_SIZES)]
    app = f"w{w}"

    def term(labels: dict[str, str], key: str) -> dict:
        return {"labelSelector": {"matchLabels": labels}, "topologyKey": key}

    host = "kubernetes.io/hostname"
    affinity, anti = [], []
    if kind in ("solo", "near-solo"):
        anti.append(term({"app": app}, host))
    if kind == "apart":
        anti.append(term({"app": f"w{(w + 1) % 10 + 10}"}, host))
    if kind in ("near", "near-solo"):
        affinity.append(term({"app": f"base-{zone}"}, LABEL_ZONE))
    if kind == "away":
        anti.append(term({"app": f"base-{zone}"}, LABEL_ZONE))
    aff: dict = {}
    if affinity:
        aff["podAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": affinity}
    if anti:
        aff["podAntiAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": anti}
    return pod_info(
        {
            "metadata": {"namespace": "bench", "name": f"{app}-{i}", "uid": f"uid-{i}", "labels": {"app": app}},
            "spec": {
                "affinity": aff,
                "containers": [{"name": "c", "resources": {"requests": {"cpu": f"{cpu}m", "memory": f"{mem}Mi"}}}],
            },
            "status": {
                "phase": "Pending",
                "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}],
            },
        }
    )


def affinity_workload(pod_count: int = 10_000, node_count: int = 300) -> Workload:
    """50 workloads of pods with affinity terms; `node_count` full existing nodes over the three
    zones, each running one base pod of its zone."""
    catalogue = catalogue_index(kwok_catalogue(PROVIDER))
    from scaling.kube.pods import pod_info

    bases = {
        z: pod_info(
            {
                "metadata": {"namespace": "bench", "name": "base", "uid": "base", "labels": {"app": f"base-{z}"}},
                "spec": {"containers": [{"name": "c"}]},
                "status": {"phase": "Running"},
            }
        )
        for z in ZONES
    }
    nodes, running = [], []
    for i, n in enumerate(existing_nodes(catalogue, node_count)):
        zone = ZONES[i % len(ZONES)]
        nodes.append(n.model_copy(update={"labels": {**n.labels, LABEL_ZONE: zone, "kubernetes.io/hostname": n.name}}))
        running.append(bases[zone].model_copy(update={"name": f"base-{i}", "uid": f"base-{i}", "node_name": n.name}))
    # Workload w's zone terms point at the base of zone w % 3. One pod parsed per workload,
    # the others copies under their own names (parsing 30,000 specs is not what is measured).
    first = [_affinity_pod(w, w, ZONES[w % len(ZONES)]) for w in range(50)]
    pods = [first[i % 50].model_copy(update={"name": f"w{i % 50}-{i}", "uid": f"uid-{i}"}) for i in range(pod_count)]
    return Workload(group=node_group(ZONES), catalogue=catalogue, nodes=nodes, pods=running + pods)
