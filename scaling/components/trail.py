"""The decision trail of one ComponentAutoscaler (`growth components trail NS/NAME`), from its
recorded history: every change it made (replicas patched, heterogeneous groups created or
deleted, with the reasons its Events gave), what it refused or could not read (warnings), and
the operator's overrides (pause, pin, scale-in blocks). Pure; repeats fold and the trail is
bounded (scaling/history.py).
"""

from __future__ import annotations

from scaling.components import contracts
from scaling.history import RecordedEvent, RecordedHistory, Trail, TrailEntry, bounded, first_input, fold_repeats

MAX_ENTRIES = 200
WRITES = {
    contracts.PATCH_REPLICAS: "Patched",
    contracts.CREATE_AUTO_CLUSTER: "GroupCreate",
    contracts.DELETE_AUTO_CLUSTER: "GroupDelete",
}


def event_said(e: RecordedEvent) -> dict | None:
    """What one of the loop's Event writes said (its reason and message), else None. Written as an
    activity, its input says it; as a local activity (patch round-reports-local), the answer its
    marker keeps."""
    if e.name != contracts.EMIT_AUTOSCALER_EVENT:
        return None
    said = first_input(e) if e.kind == "activity" else e.result if e.kind == "local_activity" else None
    return said if isinstance(said, dict) else None


def component_trail(autoscaler: RecordedHistory, component: str = "", max_entries: int = MAX_ENTRIES) -> Trail:
    """`component` ("tikv", "tidb"; "" = all) keeps the entries that name it."""
    wf = autoscaler.workflow_id
    entries: list[TrailEntry] = []
    for e in autoscaler.events:
        inp = first_input(e)
        said = event_said(e)
        if said is not None:
            what = str(said.get("reason", "Event"))
            entries.append(TrailEntry(at=e.at, what=what, detail=str(said.get("message", "")), workflow_id=wf))
        elif e.kind == "activity" and e.name in WRITES and isinstance(inp, dict):
            target = inp.get("name") or inp.get("cluster") or "?"
            comp = inp.get("component", "")
            replicas = f" to {inp['replicas']} replica(s)" if "replicas" in inp else ""
            outcome = f"failed: {e.failed}" if e.failed else ("done" if e.completed_event_id else "not finished")
            detail = f"{comp} {target}{replicas}: {outcome}"
            entries.append(TrailEntry(at=e.at, what=WRITES[e.name], detail=detail, workflow_id=wf))
        elif e.kind in ("update", "signal") and e.name not in ("",):
            arg = f" {inp}" if inp not in (None, "") else ""
            entries.append(TrailEntry(at=e.at, what="Operator", detail=f"{e.name}{arg}", workflow_id=wf))
    if component:
        entries = [x for x in entries if component in x.detail or x.what == "Operator"]
    trail = Trail(subject=wf.removeprefix("components/"), sources=[wf], truncated=autoscaler.truncated)
    trail.entries = fold_repeats(entries)
    return bounded(trail, max_entries)
