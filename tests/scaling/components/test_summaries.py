"""The Web UI's text for a ComponentAutoscaler."""

from __future__ import annotations

from scaling.components.state import (
    AutoscalerReport,
    ComponentAutoscalerSettings,
    ComponentState,
    GroupRecord,
    SpecError,
)
from scaling.components.summaries import components_details, components_summary


def test_components_text() -> None:
    settings = ComponentAutoscalerSettings(namespace="tidb", name="auto", planner="pd", scan_interval_s=15)
    assert components_summary(settings) == "ComponentAutoscaler tidb/auto (pd planner), every 15 s"
    tikv = ComponentState(homogeneous_replicas=3, groups={"g": GroupRecord(name="auto-1", replicas=2)})
    report = AutoscalerReport.model_construct(
        rounds=5,
        runs=1,
        base_cluster="db",
        components={"tikv": tikv, "tidb": ComponentState(homogeneous_replicas=2)},
        errors=[SpecError(field="spec.tidb.rules.cpu.min_threshold", message="must be below max_threshold")],
    )
    assert components_details(report, "invalid").splitlines() == [
        "invalid: round 5, run 1, TidbCluster db",
        "tidb: 2 replicas",
        "tikv: 3 replicas + 2 in 1 heterogeneous groups",
        "invalid spec.tidb.rules.cpu.min_threshold: must be below max_threshold",
    ]
