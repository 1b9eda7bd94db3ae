"""The decision trail of one data-plane cluster (`growth fleet trail CLUSTER`), from recorded
histories: the FleetAutoscaler's (the round that started it and the rule that decided, the
cluster's reports, the instances placed on and released from it, deprovision, re-check,
delete, an operator's approval or block) and the DataPlaneCluster's own (each provisioning
step and its failures, the agent's reports, its end). Pure: the command fetches the histories.
Repeats fold and the trail is bounded (scaling/history.py).
"""

from __future__ import annotations

from datetime import datetime

from scaling.fleet import contracts
from scaling.fleet.evaluation import RegionEvaluation
from scaling.fleet.lifecycle import ClusterReport, DataPlaneClusterInput
from scaling.fleet.models import ManagedInstance
from scaling.fleet.region import ClusterMessages
from scaling.history import RecordedEvent, RecordedHistory, Trail, TrailEntry, bounded, first_input, fold_repeats

MAX_ENTRIES = 200


def _why_started(autoscaler: RecordedHistory, child: RecordedEvent, instance_type: str) -> str:
    """The rule that asked for the cluster: the last evaluation the region recorded before it."""
    evaluation: RegionEvaluation | None = None
    for e in autoscaler.events:
        if e is child:
            break
        if e.kind == "local_activity" and e.name == contracts.EVALUATE_REGION and e.result is not None:
            evaluation = RegionEvaluation.model_validate(e.result)
    for t in evaluation.types if evaluation else []:
        if t.instance_type == instance_type and t.scale_up.needed:
            up = t.scale_up
            return (
                f"rule {up.reason.value}: {up.free_units} free of {up.total_units} units, {up.consumed_units} consumed"
            )
    return "no recorded evaluation before it in the history read (runs before release 0.2.0 recorded none)"


def _autoscaler_entries(autoscaler: RecordedHistory, cluster_id: str) -> list[TrailEntry]:
    wf = autoscaler.workflow_id
    out: list[TrailEntry] = []
    units: dict[str, int] = {}
    for e in autoscaler.events:
        target = e.workflow_id.rsplit("/", 1)[-1] if e.workflow_id else ""
        if e.kind == "child" and e.name == contracts.CLUSTER_WORKFLOW:
            inp = DataPlaneClusterInput.model_validate(first_input(e))
            if inp.cluster_id == cluster_id:
                why = _why_started(autoscaler, e, inp.instance_type)
                detail = f"started for instance type {inp.instance_type} in {inp.provider}/{inp.region}: {why}"
                out.append(TrailEntry(at=e.at, what="Created", detail=detail, workflow_id=wf))
        elif e.kind == "signal" and e.name == contracts.SIGNAL_CLUSTER_CHANGED:
            report = ClusterReport.model_validate(first_input(e))
            if report.cluster_id == cluster_id:
                cap = (
                    f", {report.remaining_units}/{report.max_units} units free" if report.max_units is not None else ""
                )
                msg = f": {report.message}" if report.message else ""
                out.append(
                    TrailEntry(at=e.at, what="Reported", detail=f"{report.phase.value}{cap}{msg}", workflow_id=wf)
                )
        elif e.kind == "signal_out" and target == cluster_id:
            if e.name == contracts.SIGNAL_CLUSTER_MESSAGES:  # the batched outbox (patch batched-outbox)
                for msg in ClusterMessages.model_validate(first_input(e)).messages:
                    arg = msg.instance.model_dump(mode="json") if msg.instance is not None else msg.instance_id
                    out.append(_owed_entry(e.at, wf, msg.signal, arg, units))
            else:
                out.append(_owed_entry(e.at, wf, e.name, first_input(e), units))
        elif e.kind == "update" and first_input(e) == cluster_id:
            if e.name in (contracts.UPDATE_APPROVE_DELETION, contracts.UPDATE_BLOCK_DELETION):
                out.append(TrailEntry(at=e.at, what="Operator", detail=f"operator: {e.name}", workflow_id=wf))
    return out


def _owed_entry(at: datetime, wf: str, signal: str, arg: object, units: dict[str, int]) -> TrailEntry:
    """One message the region sent the cluster."""
    if signal == contracts.SIGNAL_INSTANCE_PLACED:
        inst = ManagedInstance.model_validate(arg)
        units[inst.id] = inst.units
        detail = f"instance {inst.id} placed ({inst.instance_type} {inst.size}, {inst.units} unit(s))"
        return TrailEntry(at=at, what="InstancePlaced", detail=detail, workflow_id=wf)
    if signal == contracts.SIGNAL_INSTANCE_RELEASED:
        # the id, or (patch instance-index) the released instance itself
        released = ManagedInstance.model_validate(arg) if isinstance(arg, dict) else None
        iid = released.id if released else str(arg)
        freed = units.pop(iid, released.units if released else "?")
        detail = f"instance {iid} released ({freed} unit(s))"
        return TrailEntry(at=at, what="InstanceReleased", detail=detail, workflow_id=wf)
    what, detail = {
        contracts.SIGNAL_DEPROVISION: ("Deprovisioning", "empty and not needed: marked deprovisioning"),
        contracts.SIGNAL_RESTORE: ("Restored", "re-check failed (not empty, or capacity needed): ready"),
        contracts.SIGNAL_DELETE: ("DeleteSent", "re-check passed: told to delete itself"),
    }.get(signal, (signal, signal))
    return TrailEntry(at=at, what=what, detail=detail, workflow_id=wf)


def _cluster_entries(cluster: RecordedHistory) -> list[TrailEntry]:
    wf = cluster.workflow_id
    out: list[TrailEntry] = []
    for e in cluster.events:
        if e.kind in ("activity", "local_activity"):
            outcome = f"failed: {e.failed}" if e.failed else ("done" if e.completed_event_id else "not finished")
            out.append(TrailEntry(at=e.at, what="Step", detail=f"{e.name}: {outcome}", workflow_id=wf))
        elif e.kind == "update" and e.name == contracts.UPDATE_AGENT_STATUS:
            report = first_input(e) or {}
            ready = next((c.get("status") for c in report.get("conditions", []) if c.get("type") == "Ready"), "unknown")
            out.append(TrailEntry(at=e.at, what="AgentReport", detail=f"agent status: Ready={ready}", workflow_id=wf))
        elif e.kind == "signal":
            out.append(TrailEntry(at=e.at, what="Signal", detail=f"received {e.name}", workflow_id=wf))
        elif e.kind == "closed":
            out.append(TrailEntry(at=e.at, what="Ended", detail=f"{wf} {e.name.lower()}", workflow_id=wf))
    return out


def cluster_trail(
    cluster_id: str,
    autoscaler: RecordedHistory,
    cluster: RecordedHistory | None = None,
    max_entries: int = MAX_ENTRIES,
) -> Trail:
    trail = Trail(subject=cluster_id, sources=[autoscaler.workflow_id])
    entries = _autoscaler_entries(autoscaler, cluster_id)
    if cluster is not None:
        trail.sources.append(cluster.workflow_id)
        entries += _cluster_entries(cluster)
    else:
        trail.notes.append(f"{contracts.cluster_workflow_id(cluster_id)}'s own history was not read")
    if entries and not any(e.what == "Created" for e in entries):
        trail.notes.append("the round that created it is before the history read")
    trail.entries = fold_repeats(entries)
    trail.truncated = "; ".join(t for t in (autoscaler.truncated, cluster.truncated if cluster else "") if t)
    return bounded(trail, max_entries)
