"""What the Temporal Web UI shows for a ComponentAutoscaler without opening a query: its start's
one-line `static_summary` (the workflow list) and the current details it sets each round."""

from __future__ import annotations

from scaling.components.state import AutoscalerReport, ComponentAutoscalerSettings


def components_summary(settings: ComponentAutoscalerSettings) -> str:
    return (
        f"ComponentAutoscaler {settings.namespace}/{settings.name} ({settings.planner} planner), "
        f"every {settings.scan_interval_s:g} s"
    )


def components_details(report: AutoscalerReport, phase: str) -> str:
    lines = [f"{phase}: round {report.rounds}, run {report.runs}, TidbCluster {report.base_cluster or '?'}"]
    for component, cs in sorted(report.components.items()):
        groups = sum(g.replicas for g in cs.groups.values())
        extra = f" + {groups} in {len(cs.groups)} heterogeneous groups" if cs.groups else ""
        lines.append(f"{component}: {cs.homogeneous_replicas} replicas{extra}")
    lines.extend(f"invalid {e.field}: {e.message}" for e in report.errors[:3])
    return "\n".join(lines)
