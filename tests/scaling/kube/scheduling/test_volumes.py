"""VolumeZone and VolumeBinding, after kubernetes/kubernetes
pkg/scheduler/framework/plugins/volumezone/volume_zone_test.go (TestSingleZone: "label zone
failure domain matched", "label zone failure domain failed match", "label zone region matched",
"beta and GA zone labels", "node without labels") and volumebinding's node affinity and
WaitForFirstConsumer cases."""

from __future__ import annotations

from scaling.kube.models import NodeInfo
from scaling.kube.scheduling import volumebinding, volumezone
from scaling.kube.scheduling.volumes import volume_topology, volumes_from

ZONE, BETA_ZONE, REGION = (
    "topology.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/zone",
    "topology.kubernetes.io/region",
)


def pv(name: str, labels: dict | None = None, zones: list[str] | None = None) -> dict:
    spec: dict = {}
    if zones:
        spec["nodeAffinity"] = {
            "required": {
                "nodeSelectorTerms": [{"matchExpressions": [{"key": ZONE, "operator": "In", "values": zones}]}]
            }
        }
    return {"metadata": {"name": name, "labels": labels or {}}, "spec": spec}


def pvc(name: str, volume: str = "", sc: str = "") -> dict:
    return {"metadata": {"name": name, "namespace": "default"}, "spec": {"volumeName": volume, "storageClassName": sc}}


VOLS = volumes_from(
    [
        pvc("pvc_a", "Vol_1"),
        pvc("pvc_b", "Vol_2"),
        pvc("pvc_c", "Vol_3"),
        pvc("pvc_wffc", sc="wffc"),
        pvc("pvc_imm", sc="immediate"),
        pvc("pvc_gone", "Vol_missing"),
    ],
    [
        pv("Vol_1", {ZONE: "us-west1-a"}, zones=["us-west1-a"]),
        pv("Vol_2", {REGION: "us-west1-b", "uselessLabel": "none"}),
        pv("Vol_3", {BETA_ZONE: "us-west1-c__us-west1-d"}),
    ],
    [
        {
            "metadata": {"name": "wffc"},
            "volumeBindingMode": "WaitForFirstConsumer",
            "allowedTopologies": [{"matchLabelExpressions": [{"key": ZONE, "values": ["us-west1-a", "us-west1-b"]}]}],
        },
        {"metadata": {"name": "immediate"}, "volumeBindingMode": "Immediate"},
    ],
)


def refusal(claim: str, labels: dict) -> str | None:
    topo = volume_topology("default", [claim], VOLS)
    node = NodeInfo(name="host1", labels=labels)
    r = volumebinding.filter(topo, node) or volumezone.filter(topo, node)
    return None if r is None else r.reason


def test_label_zone_failure_domain_matched_and_failed_match() -> None:
    assert refusal("pvc_a", {ZONE: "us-west1-a", "uselessLabel": "none"}) is None
    assert refusal("pvc_a", {ZONE: "us-west1-b"}) == "node(s) had volume node affinity conflict"


def test_label_zone_region_matched_and_failed() -> None:
    assert refusal("pvc_b", {REGION: "us-west1-b"}) is None
    assert refusal("pvc_b", {REGION: "us-west1-c"}) == "node(s) had no available volume zone"


def test_beta_zone_label_with_several_zones_matches_the_ga_node_label() -> None:
    assert refusal("pvc_c", {ZONE: "us-west1-d"}) is None
    assert refusal("pvc_c", {ZONE: "us-west1-a"}) == "node(s) had no available volume zone"


def test_node_without_zone_labels_is_not_constrained_by_volume_zone() -> None:
    assert refusal("pvc_b", {}) is None


def test_wait_for_first_consumer_claim_follows_the_class_allowed_topologies() -> None:
    assert refusal("pvc_wffc", {ZONE: "us-west1-b"}) is None
    assert refusal("pvc_wffc", {ZONE: "us-west1-c"}) == "node(s) didn't find available persistent volumes to bind"


def test_claims_no_node_can_serve() -> None:
    assert refusal("pvc_imm", {ZONE: "us-west1-a"}) == "pod has unbound immediate PersistentVolumeClaims"
    assert refusal("nope", {}) == 'persistentvolumeclaim "nope" not found'
    assert refusal("pvc_gone", {}) == "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"
