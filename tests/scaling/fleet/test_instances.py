"""Per-instance agent reports and ManagedKafka versions, read from upstream's own payloads
(tests/activities/fleet/upstream/, each naming its kas-fleet-manager path)."""

from __future__ import annotations

from pathlib import Path

import yaml

from scaling.fleet.contracts import AgentStatusReport, InstanceStatusReport
from scaling.fleet.instances import apply_instance_statuses, latest_ready_versions, mark_deleted, reported_status
from scaling.fleet.models import InstanceVersions, ManagedInstance

UPSTREAM = Path(__file__).parents[2] / "activities" / "fleet" / "upstream"
STATUSES = {
    k: InstanceStatusReport.model_validate(v)
    for k, v in yaml.safe_load((UPSTREAM / "kafka_statuses.yaml").read_text()).items()
}


def inst(iid: str, **kw: object) -> ManagedInstance:
    return ManagedInstance(id=iid, instance_type="standard", size="x1", units=1, cluster_id="c1", **kw)


def test_upstream_statuses_read_as_upstream_reads_them() -> None:
    assert {k: reported_status(v) for k, v in STATUSES.items()} == {
        "installing": "installing",
        "ready": "ready",
        "deleted": "deleted",
        "rejected": "rejectedClusterFull",
    }
    assert reported_status(InstanceStatusReport()) == "installing"  # no Ready condition


def test_placed_to_ready_to_deleted() -> None:
    instances = [inst("a"), inst("b")]
    instances, gone = apply_instance_statuses(instances, {"a": STATUSES["ready"], "b": STATUSES["installing"]})
    assert [i.phase for i in instances] == ["ready", "placed"] and gone == []
    assert instances[0].versions == InstanceVersions(kafka="2.7.0", strimzi="strimzi-cluster-operator.v0.23.0-0")
    assert instances[1].versions.kafka_ibp == "2.4"  # installing still reports versions
    # Deleted for an instance whose removal nobody asked is ignored (upstream logs it).
    same, gone = apply_instance_statuses(instances, {"a": STATUSES["deleted"]})
    assert same == instances and gone == []
    instances = mark_deleted(instances, "a")
    assert (instances[0].deleted, instances[0].phase) == (True, "deleting")
    instances, gone = apply_instance_statuses(instances, {"a": STATUSES["deleted"]})
    assert [i.id for i in instances] == ["b"] and gone == ["a"]


def test_rejected_and_errors_are_recorded_and_unknown_or_reserved_ids_change_nothing() -> None:
    instances = [inst("a")]
    out, _ = apply_instance_statuses(
        instances, {"reserved-kafka-standard-1": STATUSES["ready"], "zz": STATUSES["ready"]}
    )
    assert out == instances
    out, _ = apply_instance_statuses(instances, {"a": STATUSES["rejected"]})
    assert out[0].phase == "rejected" and out[0].message == "Cluster has insufficient resources"
    error = InstanceStatusReport.model_validate(
        {"conditions": [{"type": "Ready", "status": "False", "reason": "Error", "message": "boom"}]}
    )
    out, _ = apply_instance_statuses(instances, {"a": error})
    assert (out[0].phase, out[0].message) == ("failed", "boom")


def test_spec_versions_are_the_latest_ready_strimzi_and_its_latest_kafka() -> None:
    report = AgentStatusReport.model_validate(yaml.safe_load((UPSTREAM / "agent_status_with_strimzi.yaml").read_text()))
    assert latest_ready_versions(report.strimzi) == InstanceVersions(
        strimzi="strimzi-cluster-operator.v0.23.0-0", kafka="2.7.0", kafka_ibp="2.7"
    )
    not_ready = [s.model_copy(update={"ready": False}) for s in report.strimzi]
    assert latest_ready_versions(not_ready) is None
    assert latest_ready_versions([*not_ready[:1], report.strimzi[1]]).strimzi == "strimzi-cluster-operator.v0.21.0-0"
