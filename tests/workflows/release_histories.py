"""The histories kept per release (tests/workflows/histories/<release>/<loop>_<Type>[_case].json):
runs started by that release, which the next release's worker must replay (docs/development.md,
"How a patch retires"). Saved trimmed at a workflow task's end, so each stays small and replays."""

from __future__ import annotations

import base64
import json
from pathlib import Path

from temporalio.client import WorkflowHistory

from tests.workflows.replayer import new_replayer
from workflows.all import WORKFLOWS

HISTORIES = Path(__file__).parent / "histories"
COMPLETED = "EVENT_TYPE_WORKFLOW_TASK_COMPLETED"


def kept(pattern: str) -> list[Path]:
    """Every release's histories whose file name matches `pattern` (e.g. "fleet_*.json")."""
    return sorted(p for p in HISTORIES.glob(f"[0-9]*/{pattern}"))


def trimmed(raw: dict, max_bytes: int) -> dict:
    """The whole history if it is under `max_bytes`, else up to the last completed workflow task
    that keeps it so."""
    events, size, cut = raw["events"], 20, 0
    for k, e in enumerate(events):
        size += len(json.dumps(e, separators=(",", ":"))) + 1
        if size > max_bytes:
            return {**raw, "events": events[:cut] if cut else events}
        if e["eventType"] == COMPLETED:
            cut = k + 1
    return raw


def save(history: WorkflowHistory, path: Path, max_bytes: int = 150_000) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(trimmed(history.to_json_dict(), max_bytes), separators=(",", ":")))


def load(path: Path) -> WorkflowHistory:
    """The history under its workflow's id: a FleetAutoscaler's from its index shards' ids (their
    ids derive from it), else the file's name."""
    history = WorkflowHistory.from_json(path.stem, json.loads(path.read_text()))
    children = [
        e.start_child_workflow_execution_initiated_event_attributes.workflow_id
        for e in history.events
        if e.HasField("start_child_workflow_execution_initiated_event_attributes")
    ]
    region = next((c.rsplit("/instances/", 1)[0] for c in children if "/instances/" in c), None)
    return WorkflowHistory(region, history.events) if region else history


def scheduled(path: Path) -> list[str]:
    """The activities a kept history scheduled, by name, in order."""
    return [
        e["activityTaskScheduledEventAttributes"]["activityType"]["name"]
        for e in json.loads(path.read_text())["events"]
        if "activityTaskScheduledEventAttributes" in e
    ]


def local_activities(path: Path) -> list[str]:
    """The local activities a kept history recorded, by name, in order."""
    out = []
    for e in json.loads(path.read_text())["events"]:
        marker = e.get("markerRecordedEventAttributes")
        if marker and marker["markerName"] == "core_local_activity":
            out.append(json.loads(base64.b64decode(marker["details"]["data"]["payloads"][0]["data"]))["activity_type"])
    return out


async def replays(path: Path) -> None:
    """Fails unless the kept history at `path` replays on the current code (every workflow type)."""
    history = load(path)
    assert len(history.events) > 10  # a history of just the start would replay against anything
    result = await new_replayer(WORKFLOWS).replay_workflow(history, raise_on_replay_failure=False)
    assert result.replay_failure is None, f"{path.name}: {result.replay_failure}"


def patches(path: Path) -> set[str]:
    """The patch ids whose markers a kept history carries (deprecated ones too)."""
    out = set()
    for e in json.loads(path.read_text())["events"]:
        marker = e.get("markerRecordedEventAttributes")
        if marker and marker["markerName"] == "core_patch":
            for payload in marker["details"]["patch-data"]["payloads"]:
                out.add(json.loads(base64.b64decode(payload["data"]))["id"])
    return out
