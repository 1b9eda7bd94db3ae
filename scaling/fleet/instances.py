"""Instances on a data-plane cluster as its agent reports them (PUT .../kafkas/status), and the
versions their ManagedKafka objects ask for. Pure rules, read from kas-fleet-manager's
services/data_plane_kafka.go and services/kafka.go.

- The status of one report is its Ready condition read in upstream's order: reason Suspended,
  status True (ready), status Unknown, then the reasons Installing, Deleted, Error, Rejected;
  no Ready condition = installing.
- ready moves a placed instance to ready; Deleted removes an instance whose removal was asked
  (spec.deleted) and is ignored otherwise; Error fails it; Rejected marks it rejected. Reports
  for reserved instances (`reserved-` ids) and for ids not on the cluster change nothing, as
  upstream only counts or logs them. Non-empty versions are stored as the instance's actual ones.
- spec.versions: the latest ready Strimzi version the agent reported, with that version's
  latest Kafka and IBP versions (upstream's choice for reserved instances).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from scaling.fleet.contracts import InstanceStatusReport, StrimziVersion
from scaling.fleet.models import InstanceVersions, ManagedInstance

RESERVED_PREFIX = "reserved-"
MAX_DELETED_KEPT = 50  # the ids of recently deleted instances the cluster's status lists


def reported_status(report: InstanceStatusReport) -> str:
    """installing, ready, suspended, unknown, deleted, error, rejected or rejectedClusterFull."""
    for cond in report.conditions:
        if cond.type.lower() != "ready":
            continue
        reason = cond.reason.lower()
        if reason == "suspended":
            return "suspended"
        if cond.status.lower() == "true":
            return "ready"
        if cond.status.lower() == "unknown":
            return "unknown"
        for known in ("installing", "deleted", "error"):
            if reason == known:
                return known
        if reason == "rejected":
            return "rejectedClusterFull" if cond.message.lower() == "cluster has insufficient resources" else "rejected"
    return "installing"


def _ready_message(report: InstanceStatusReport) -> str:
    return next((c.message or c.reason for c in report.conditions if c.type.lower() == "ready"), "")


def apply_instance_statuses(
    instances: list[ManagedInstance], reports: Mapping[str, InstanceStatusReport]
) -> tuple[list[ManagedInstance], list[str]]:
    """The cluster's instances after the reports, and the ids the agent reported deleted."""
    by_id = {r_id: r for r_id, r in reports.items() if not r_id.startswith(RESERVED_PREFIX)}
    kept: list[ManagedInstance] = []
    deleted: list[str] = []
    for inst in instances:
        report = by_id.get(inst.id)
        if report is None:
            kept.append(inst)
            continue
        status = reported_status(report)
        if status == "deleted" and inst.deleted:
            deleted.append(inst.id)
            continue
        update: dict[str, object] = {}
        if status == "ready" and inst.phase == "placed":
            update["phase"] = "ready"
        elif status == "error" and not inst.deleted:
            update.update(phase="failed", message=_ready_message(report))
        elif status in ("rejected", "rejectedClusterFull") and not inst.deleted:
            update.update(phase="rejected", message=_ready_message(report))
        versions = {k: v for k, v in report.versions.model_dump().items() if v}
        if versions:
            update["versions"] = inst.versions.model_copy(update=versions)
        kept.append(inst.model_copy(update=update) if update else inst)
    return kept, deleted


def mark_deleted(instances: list[ManagedInstance], instance_id: str) -> list[ManagedInstance]:
    """Removal asked: the instance stays, with spec.deleted, until its agent reports it gone."""
    return [
        i.model_copy(update={"deleted": True, "phase": "deleting"}) if i.id == instance_id else i for i in instances
    ]


def _version_key(version: str) -> tuple[int, ...]:
    # "strimzi-cluster-operator.v0.23.0-0" -> (0, 23, 0, 0); "2.7.0" -> (2, 7, 0)
    return tuple(int(n) for n in re.findall(r"\d+", version))


def latest_ready_versions(strimzi: list[StrimziVersion]) -> InstanceVersions | None:
    """The latest ready Strimzi version with its latest Kafka and IBP versions; None when no
    ready version lists both."""
    ready = [s for s in strimzi if s.ready and s.version and s.kafka_versions and s.kafka_ibp_versions]
    if not ready:
        return None
    latest = max(ready, key=lambda s: _version_key(s.version))
    return InstanceVersions(
        strimzi=latest.version,
        kafka=max(latest.kafka_versions, key=_version_key),
        kafka_ibp=max(latest.kafka_ibp_versions, key=_version_key),
    )
