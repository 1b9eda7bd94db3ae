from datetime import UTC, datetime
from typing import Any

import pytest

from scaling.kube.models import Resources, Toleration
from scaling.kube.pods import MIN_POD_CPU_M, MIN_POD_MEMORY, counts_as_demand, is_unschedulable, pod_demand, pod_info

MI = 2**20


def pod(containers: list[dict[str, Any]] | None = None, **spec: Any) -> dict[str, Any]:
    p: dict[str, Any] = {
        "metadata": {"name": "p", "namespace": "ns", "uid": "u1"},
        "spec": {"containers": containers or [], **spec},
        "status": {
            "phase": "Pending",
            "conditions": [
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": "Unschedulable",
                    "lastTransitionTime": "2024-05-01T10:00:00Z",
                }
            ],
        },
    }
    return p


def c(cpu: str | None = None, mem: str | None = None, **extra: Any) -> dict[str, Any]:
    req = {k: v for k, v in (("cpu", cpu), ("memory", mem)) if v is not None}
    return {"name": "c", "resources": {"requests": req}, **extra}


def test_requests_sum_containers_then_max_with_init_plus_overhead() -> None:
    p = pod(
        [c("250m", "64Mi"), c("250m", "64Mi")],
        initContainers=[c("1", "32Mi"), c("100m", "256Mi")],
        overhead={"cpu": "10m", "memory": "1Mi"},
    )
    assert pod_demand(p) == Resources(cpu_m=1010, memory=257 * MI, pods=1)


def test_sidecar_init_containers_add_to_the_app_and_to_later_inits() -> None:
    p = pod(
        [c("500m", "100Mi")],
        initContainers=[c("100m", "10Mi", restartPolicy="Always"), c("900m", "10Mi")],
    )
    # app 500m + sidecar 100m = 600m; init after the sidecar: 900m + 100m = 1000m.
    assert pod_demand(p) == Resources(cpu_m=1000, memory=110 * MI, pods=1)


def test_limits_stand_in_for_missing_requests() -> None:
    p = pod([{"name": "c", "resources": {"limits": {"cpu": "2", "memory": "1Gi"}}}])
    assert pod_demand(p) == Resources(cpu_m=2000, memory=1024 * MI, pods=1)


def test_no_requests_counts_the_documented_minimum_and_one_slot() -> None:
    assert pod_demand(pod([{"name": "c"}])) == Resources(cpu_m=MIN_POD_CPU_M, memory=MIN_POD_MEMORY, pods=1)
    assert pod_demand(pod([c(cpu="2")])) == Resources(cpu_m=2000, memory=MIN_POD_MEMORY, pods=1)


def test_unschedulable_needs_pending_condition_and_no_node() -> None:
    assert is_unschedulable(pod([c("1")]))
    bound = pod([c("1")], nodeName="n1")
    assert not is_unschedulable(bound)
    running = pod([c("1")])
    running["status"]["phase"] = "Running"
    assert not is_unschedulable(running)
    other_reason = pod([c("1")])
    other_reason["status"]["conditions"][0]["reason"] = "SchedulingGated"
    assert not is_unschedulable(other_reason)
    no_cond = pod([c("1")])
    no_cond["status"]["conditions"] = []
    assert not is_unschedulable(no_cond)


def test_daemonset_and_mirror_pods_never_count_as_demand() -> None:
    ds = pod([c("1")])
    ds["metadata"]["ownerReferences"] = [{"kind": "DaemonSet", "name": "d", "controller": True}]
    assert not counts_as_demand(pod_info(ds)) and pod_info(ds).is_daemonset
    not_controller = pod([c("1")])
    not_controller["metadata"]["ownerReferences"] = [{"kind": "DaemonSet", "name": "d", "controller": False}]
    assert counts_as_demand(pod_info(not_controller))
    mirror = pod([c("1")])
    mirror["metadata"]["annotations"] = {"kubernetes.io/config.mirror": "abc"}
    assert not counts_as_demand(pod_info(mirror)) and pod_info(mirror).is_mirror


def test_pod_info_fields() -> None:
    p = pod(
        [c("1", "1Gi")],
        nodeSelector={"kubernetes.io/arch": "arm64"},
        tolerations=[{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}, {"key": "a", "value": "b"}],
        volumes=[{"name": "v", "emptyDir": {}}, {"name": "d", "persistentVolumeClaim": {"claimName": "data"}}],
    )
    p["metadata"]["ownerReferences"] = [{"kind": "ReplicaSet", "name": "rs", "controller": True}]
    info = pod_info(p)
    assert info.uid == "u1" and info.namespace == "ns"
    assert info.requests == Resources(cpu_m=1000, memory=1024 * MI, pods=1)
    assert info.node_selector == {"kubernetes.io/arch": "arm64"}
    assert info.tolerations == [
        Toleration(key="gpu", operator="Exists", effect="NoSchedule"),
        Toleration(key="a", operator="Equal", value="b"),
    ]
    assert info.controller_kind == "ReplicaSet"
    assert info.has_local_storage and info.pvc_names == ["data"]
    assert info.unschedulable
    assert info.unschedulable_since == datetime(2024, 5, 1, 10, tzinfo=UTC)


def test_host_path_is_local_storage_and_configmap_is_not() -> None:
    assert pod_info(pod([c("1")], volumes=[{"name": "h", "hostPath": {"path": "/x"}}])).has_local_storage
    assert not pod_info(pod([c("1")], volumes=[{"name": "c", "configMap": {"name": "x"}}])).has_local_storage


def test_memory_medium_empty_dir_is_not_local_storage() -> None:
    """tmpfs goes with the pod wherever it runs: Cluster Autoscaler does not count it."""
    vols = [
        {"name": "shm", "emptyDir": {"medium": "Memory"}},
        {"name": "tmp", "emptyDir": {"medium": ""}},
        {"name": "cache", "emptyDir": {"sizeLimit": "1Gi"}},
        {"name": "logs", "hostPath": {"path": "/var/log"}},
    ]
    info = pod_info(pod([c("1")], volumes=vols))
    assert info.local_volumes == ["tmp", "cache", "logs"] and info.has_local_storage
    only_memory = pod_info(pod([c("1")], volumes=[{"name": "shm", "emptyDir": {"medium": "Memory"}}]))
    assert only_memory.local_volumes == [] and not only_memory.has_local_storage


def test_deletion_timestamp_and_grace_period() -> None:
    p = pod([c("1")], terminationGracePeriodSeconds=120)
    p["metadata"]["deletionTimestamp"] = "2024-05-01T10:00:00Z"
    info = pod_info(p)
    assert info.deletion_timestamp == datetime(2024, 5, 1, 10, tzinfo=UTC)
    assert info.termination_grace_period_s == 120
    plain = pod_info(pod([c("1")]))
    assert plain.deletion_timestamp is None and plain.termination_grace_period_s is None


def test_bad_quantity_names_the_string() -> None:
    with pytest.raises(ValueError, match="'lots'"):
        pod_demand(pod([c("lots")]))
