"""Workloads over the scheduler's filters, as hypothesis strategies and plain pod objects.

Each workload is a few pods of one app: plain, GPU, host-port agents, a zone anti-affine
database, web pods affine to a cache on the hostname, pods affine to another workload's zone,
a zone spread with minDomains, a pod on a PersistentVolume pinned to one zone, and impossible
pods (too big, a label no node has, affinity to a pod that does not exist).
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from scaling.nodes.models import NodeGroup
from scaling.nodes.nodegroups import parse_node_group

Obj = dict[str, Any]
ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"
ZONES = ("kwok-a", "kwok-b", "kwok-c")
KINDS = ("plain", "gpu", "agents", "zone-db", "host-db", "web-cache", "zone-follow", "spread", "pv", "impossible")


def three_zone_group(types: list[str], gpu_types: list[str] = ()) -> NodeGroup:  # type: ignore[assignment]
    pools = [{"provider": "kwok", "serverType": types, "priority": 50, "config": {"zone": z}} for z in ZONES]
    pools += [
        {"provider": "kwok", "serverType": gpu_types, "priority": 50, "config": {"zone": z}} for z in ZONES if gpu_types
    ]
    return parse_node_group({"metadata": {"name": "g"}, "spec": {"pools": pools}}, {"kwok"})


def pod(name: str, app: str, cpu_m: int, **spec: Any) -> Obj:
    resources = spec.pop("resources", None) or {"requests": {"cpu": f"{cpu_m}m", "memory": "256Mi"}}
    container: Obj = {"name": "c", "image": "registry.local/app:1", "resources": resources}
    if ports := spec.pop("ports", None):
        container["ports"] = ports
    return {
        "metadata": {"name": name, "namespace": "default", "labels": {"app": app}},
        "spec": {"containers": [container], **spec},
    }


def required(kind: str, app: str, key: str) -> Obj:
    terms = [{"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": key}]
    return {kind: {"requiredDuringSchedulingIgnoredDuringExecution": terms}}


def workload(kind: str, index: int, count: int, cpu_m: int) -> tuple[list[Obj], list[tuple[str, str, Obj]]]:
    """(pods, objects they need) of one workload."""
    app = f"w{index}"
    names = [f"{app}-{kind}-{i}" for i in range(count)]
    if kind == "plain":
        return [pod(n, app, cpu_m) for n in names], []
    if kind == "gpu":
        limits = {"cpu": f"{cpu_m}m", "memory": "1Gi", "nvidia.com/gpu": "1"}
        return [pod(n, app, cpu_m, resources={"limits": limits}) for n in names], []
    if kind == "agents":
        return [pod(n, app, cpu_m, ports=[{"containerPort": 9100, "hostPort": 9100}]) for n in names], []
    if kind == "zone-db":
        return [pod(n, app, cpu_m, affinity=required("podAntiAffinity", app, ZONE)) for n in names], []
    if kind == "host-db":
        return [pod(n, app, cpu_m, affinity=required("podAntiAffinity", app, HOST)) for n in names], []
    if kind == "web-cache":
        cache = [pod(f"{app}-cache-{i}", f"{app}-cache", cpu_m) for i in range(count)]
        web = [pod(n, app, cpu_m, affinity=required("podAffinity", f"{app}-cache", HOST)) for n in names]
        return cache + web, []
    if kind == "zone-follow":
        leader = [pod(f"{app}-leader", f"{app}-leader", cpu_m, nodeSelector={ZONE: ZONES[index % 3]})]
        return leader + [pod(n, app, cpu_m, affinity=required("podAffinity", f"{app}-leader", ZONE)) for n in names], []
    if kind == "spread":
        spread = [
            {
                "maxSkew": 1,
                "topologyKey": ZONE,
                "whenUnsatisfiable": "DoNotSchedule",
                "minDomains": 3,
                "labelSelector": {"matchLabels": {"app": app}},
            }
        ]
        return [pod(n, app, cpu_m, topologySpreadConstraints=spread) for n in names], []
    if kind == "pv":
        zone = ZONES[index % 3]
        pv = {
            "metadata": {"name": f"{app}-pv", "labels": {ZONE: zone}},
            "spec": {
                "capacity": {"storage": "10Gi"},
                "accessModes": ["ReadWriteOnce"],
                "storageClassName": "local",
                "claimRef": {"namespace": "default", "name": f"{app}-data"},
                "nodeAffinity": {
                    "required": {
                        "nodeSelectorTerms": [{"matchExpressions": [{"key": ZONE, "operator": "In", "values": [zone]}]}]
                    }
                },
            },
        }
        claim = {
            "metadata": {"name": f"{app}-data"},
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": "10Gi"}},
                "storageClassName": "local",
                "volumeName": f"{app}-pv",
            },
        }
        volumes = [{"name": "data", "persistentVolumeClaim": {"claimName": f"{app}-data"}}]
        objects = [("persistentvolumes", "", pv), ("persistentvolumeclaims", "default", claim)]
        return [pod(names[0], app, cpu_m, volumes=volumes)], objects
    # impossible: one pod each way
    return [
        pod(f"{app}-huge", app, 500_000),
        pod(f"{app}-nolabel", app, cpu_m, nodeSelector={"disk": "ssd"}),
        pod(f"{app}-orphan", app, cpu_m, affinity=required("podAffinity", "nobody", ZONE)),
    ][: max(1, count)], []


@st.composite
def workloads(draw: st.DrawFn, kinds: tuple[str, ...] = KINDS) -> tuple[list[Obj], list[tuple[str, str, Obj]]]:
    pods: list[Obj] = []
    objects: list[tuple[str, str, Obj]] = []
    for index in range(draw(st.integers(1, 5))):
        kind = draw(st.sampled_from(kinds))
        p, o = workload(kind, index, draw(st.integers(1, 4)), draw(st.sampled_from([250, 500, 1000, 1500])))
        pods += p
        objects += o
    return pods, objects
