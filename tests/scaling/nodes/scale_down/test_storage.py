"""Longhorn-aware rules of seed 003: attached volumes, a last healthy replica and backing-image or
share managers keep a node from scale-down."""

from __future__ import annotations

from scaling.kube.models import PodInfo
from scaling.nodes.scale_down.storage import (
    BACKING_IMAGE_MANAGER,
    LAST_HEALTHY_REPLICA,
    SHARE_MANAGER,
    VOLUME_ATTACHED,
    LonghornReplica,
    LonghornState,
    LonghornVolume,
    longhorn_state_from_objects,
    storage_blockers,
)

ALL = {"n1", "n2", "n3"}


def state(volumes=(), replicas=(), **kw) -> LonghornState:
    return LonghornState(volumes=list(volumes), replicas=list(replicas), **kw)


def rep(vol: str, node: str, healthy: bool = True) -> LonghornReplica:
    return LonghornReplica(name=f"{vol}-r-{node}", volume=vol, node=node, healthy=healthy)


def codes(bs) -> list[str]:
    return [b.code for b in bs]


def test_no_longhorn_no_blockers() -> None:
    assert storage_blockers("n1", None, ALL) == []
    assert (
        storage_blockers(
            "n1", LonghornState(present=False, volumes=[LonghornVolume(name="v", state="attached", node="n1")]), ALL
        )
        == []
    )


def test_attached_volume_keeps_its_node() -> None:
    s = state([LonghornVolume(name="vol-1", state="attached", node="n1")], [rep("vol-1", "n1"), rep("vol-1", "n2")])
    bs = storage_blockers("n1", s, ALL)
    assert codes(bs) == [VOLUME_ATTACHED]
    assert str(bs[0]).startswith("LonghornVolumeAttached: volume vol-1 attached") and bs[0].volume == "vol-1"
    # The node holding the other replica is free: the volume is healthy elsewhere.
    assert storage_blockers("n2", s, ALL) == []


def test_attaching_and_detaching_hold_the_node_too() -> None:
    for st in ("attaching", "detaching"):
        s = state([LonghornVolume(name="v", state=st, node="n1")])
        assert codes(storage_blockers("n1", s, ALL)) == [VOLUME_ATTACHED]


def test_detached_volume_with_healthy_peer_frees_the_node() -> None:
    s = state([LonghornVolume(name="vol-1")], [rep("vol-1", "n1"), rep("vol-1", "n2")])
    assert storage_blockers("n1", s, ALL) == []


def test_last_healthy_replica_keeps_its_node() -> None:
    s = state([LonghornVolume(name="vol-1")], [rep("vol-1", "n1"), rep("vol-1", "n2", healthy=False)])
    bs = storage_blockers("n1", s, ALL)
    assert codes(bs) == [LAST_HEALTHY_REPLICA]
    assert str(bs[0]) == "LonghornLastHealthyReplica: node n1 holds the only healthy replica of volume vol-1"
    # The node with the failed replica may go.
    assert storage_blockers("n2", s, ALL) == []


def test_peer_on_an_unschedulable_node_does_not_count() -> None:
    s = state([LonghornVolume(name="vol-1")], [rep("vol-1", "n1"), rep("vol-1", "n2")])
    assert codes(storage_blockers("n1", s, {"n1", "n3"})) == [LAST_HEALTHY_REPLICA]


def test_backing_image_and_share_manager_pods_keep_the_node() -> None:
    s = state(
        backing_image_manager_pods={"n1": ["backing-image-manager-abc"]},
        share_manager_pods={"n2": ["share-manager-pvc-1"]},
    )
    b1 = storage_blockers("n1", s, ALL)
    assert codes(b1) == [BACKING_IMAGE_MANAGER] and "backing-image-manager-abc" in b1[0].message
    assert codes(storage_blockers("n2", s, ALL)) == [SHARE_MANAGER]
    assert storage_blockers("n3", s, ALL) == []


def test_state_from_longhorn_objects() -> None:
    volumes = [
        {
            "metadata": {"name": "vol-1"},
            "spec": {"numberOfReplicas": 2, "nodeID": "n1"},
            "status": {"state": "attached", "currentNodeID": "n1"},
        },
        {
            "metadata": {"name": "vol-2"},
            "spec": {"numberOfReplicas": 2, "nodeID": ""},
            "status": {"state": "detached", "currentNodeID": ""},
        },
    ]
    replicas = [
        {
            "metadata": {"name": "vol-2-r-a"},
            "spec": {"volumeName": "vol-2", "nodeID": "n1", "healthyAt": "2024-01-01T00:00:00Z", "failedAt": ""},
            "status": {"currentState": "stopped"},
        },
        {
            "metadata": {"name": "vol-2-r-b"},
            "spec": {
                "volumeName": "vol-2",
                "nodeID": "n2",
                "healthyAt": "2024-01-01T00:00:00Z",
                "failedAt": "2024-01-02T00:00:00Z",
            },
            "status": {"currentState": "stopped"},
        },
        {
            "metadata": {"name": "vol-2-r-c"},
            "spec": {"volumeName": "vol-2", "nodeID": "n3", "healthyAt": ""},
            "status": {"currentState": "running"},
        },
    ]
    engines = [
        {
            "metadata": {"name": "vol-3-e-0"},
            "spec": {"volumeName": "vol-3", "nodeID": "n3"},
            "status": {"currentState": "running"},
        }
    ]
    ims = [
        {
            "metadata": {"name": "instance-manager-n1"},
            "spec": {"nodeID": "n1", "type": "aio"},
            "status": {"instanceEngines": {"vol-1-e-0": {}}, "instanceReplicas": {"vol-1-r": {}}},
        }
    ]
    pods = [
        PodInfo(
            namespace="longhorn-system",
            name="backing-image-manager-x",
            uid="1",
            node_name="n2",
            phase="Running",
            labels={"longhorn.io/component": "backing-image-manager"},
        ),
        PodInfo(namespace="longhorn-system", name="share-manager-pvc-1", uid="2", node_name="n3", phase="Running"),
        PodInfo(namespace="default", name="share-manager-not-longhorn", uid="3", node_name="n1", phase="Running"),
    ]
    s = longhorn_state_from_objects(volumes, replicas, engines, ims, pods)
    assert [(v.name, v.attached, v.node) for v in s.volumes] == [("vol-1", True, "n1"), ("vol-2", False, None)]
    assert [r.healthy for r in s.replicas] == [True, False, False]
    assert s.instance_managers[0].instances == 2
    assert s.backing_image_manager_pods == {"n2": ["backing-image-manager-x"]}
    assert s.share_manager_pods == {"n3": ["share-manager-pvc-1"]}
    assert codes(storage_blockers("n1", s, ALL)) == [VOLUME_ATTACHED, LAST_HEALTHY_REPLICA]
    assert codes(storage_blockers("n3", s, ALL)) == [VOLUME_ATTACHED, SHARE_MANAGER]  # running engine of vol-3
    assert codes(storage_blockers("n2", s, ALL)) == [BACKING_IMAGE_MANAGER]
