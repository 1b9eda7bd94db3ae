"""A node's decision trail over the recorded histories (tests/workflows/histories/nodes_*.json,
the demo's scale-up then scale-down): planned for the burst's pods, Ready, kept while utilized
or too recently added, selected as Empty, and removed by its NodeScaleDown."""

from __future__ import annotations

from pathlib import Path

from scaling.history import bounded
from scaling.nodes.scale_up.requests import split_request_id
from scaling.nodes.trail import node_trail, request_of_node
from starters.history import history_from_file

HISTORIES = Path(__file__).parents[2] / "workflows" / "histories"
# The recording's nodes (names change with every re-recording: tests.workflows.record_history
# records all nodes_*.json from one demo run, so the three histories tell one story).
REMOVED = "demo-kwok-cx22-bdbef635"  # the node of nodes_NodeScaleDown.json (its workflow id)
REQUESTED = "demo-kwok-cx32-2a888f79"  # a node of nodes_NodeRequestBatch.json (in its attempts)


def load(name: str, workflow_id: str = ""):  # noqa: ANN201
    h = history_from_file(str(HISTORIES / f"nodes_{name}.json"))
    if workflow_id:
        h.workflow_id = workflow_id
    return h


def test_a_removed_node_reads_from_plan_to_removal() -> None:
    autoscaler = load("NodeAutoscaler", "nodes/demo")
    trail = node_trail(REMOVED, autoscaler, None, load("NodeScaleDown", f"nodes/demo/scale-down/{REMOVED}"))
    kinds = [e.what for e in trail.entries]
    # In order: planned for pods, Ready, kept, selected, marked, re-checked, deleted, removed.
    order = ["Planned", "AskedBy", "Ready", "Kept", "Selected", "ScaleDownStarted", "Marked", "Rechecked", "Removed"]
    positions = [kinds.index(k) for k in order]
    assert positions == sorted(positions), kinds
    planned = trail.entries[0]
    server_type = REMOVED.split("-")[2]  # demo-kwok-<type>-<hash>: the recording's node may be of any pool
    assert request_of_node(autoscaler, REMOVED) in planned.detail and f"kwok/{server_type}" in planned.detail
    kept = [e for e in trail.entries if e.what == "Kept"]
    assert any("ScaleDownDelayAfterAdd" in e.detail for e in kept)  # why it was kept, in the evaluation's words
    assert "Empty" in next(e for e in trail.entries if e.what == "Selected").detail
    assert "no pods to move" in next(e for e in trail.entries if e.what == "Removed").detail
    assert [e.at for e in trail.entries] == sorted(e.at for e in trail.entries)
    assert any("own history was not read" in n for n in trail.notes)


def test_a_requests_own_history_gives_its_attempts() -> None:
    """The node's request is a batch member (`<batch id>#<index>`): the batch's history gives
    that member's attempts."""
    autoscaler = load("NodeAutoscaler", "nodes/demo")
    request_id = request_of_node(autoscaler, REQUESTED)
    batch_id, index = split_request_id(request_id)
    assert index is not None
    trail = node_trail(REQUESTED, autoscaler, load("NodeRequestBatch", batch_id))
    attempts = [e for e in trail.entries if e.what == "Attempt"]
    assert len(attempts) == 1 and "created, node " + REQUESTED in attempts[0].detail
    assert "became Ready" in next(e for e in trail.entries if e.what == "Ready").detail
    assert request_id in trail.entries[0].detail  # planned as the member it is
    assert batch_id in trail.sources and not trail.notes


def test_repeats_fold_and_the_trail_is_bounded() -> None:
    autoscaler = load("NodeAutoscaler", "nodes/demo")
    trail = node_trail(REMOVED, autoscaler)
    # Evaluations that said the same again fold into one entry (which ones depends on the recording).
    folded = [e for e in trail.entries if e.repeated >= 2]
    assert folded and all(e.until is not None for e in folded)
    pairs = zip(trail.entries, trail.entries[1:])
    assert not any((a.what, a.detail) == (b.what, b.detail) for a, b in pairs)
    cut = bounded(trail.model_copy(deep=True), 4)
    assert len(cut.entries) == 4 and "left out" in cut.truncated
    assert cut.entries[0] == trail.entries[0] and cut.entries[-1] == trail.entries[-1]
    assert node_trail("no-such-node", autoscaler).entries == []


def test_a_waiting_node_reads_soft_marked_then_tainted() -> None:
    """A NodeScaleDown with a wait marks twice: soft for the wait, hard before its re-check
    (activities' inputs as the workflow records them)."""
    from datetime import datetime, timedelta

    from scaling.history import RecordedEvent, RecordedHistory
    from scaling.nodes import contracts

    t0 = datetime(2026, 11, 30)  # the recordings are read naive
    mark = {"cluster": "c", "node": REMOVED, "scale_down_at": "2026-11-30T00:10:00Z"}
    events = [
        RecordedEvent(
            run_id="r",
            event_id=5,
            at=t0,
            kind="activity",
            name=contracts.MARK_NODE_FOR_SCALE_DOWN,
            input=[{**mark, "candidate": True}],
            result=True,
        ),  # fmt: skip
        RecordedEvent(
            run_id="r",
            event_id=20,
            at=t0 + timedelta(minutes=10),
            kind="activity",
            name=contracts.MARK_NODE_FOR_SCALE_DOWN,
            input=[{**mark, "candidate": False}],
            result=True,
        ),  # fmt: skip
    ]
    wf = f"nodes/demo/scale-down/{REMOVED}"
    trail = node_trail(
        REMOVED, load("NodeAutoscaler", "nodes/demo"), None, RecordedHistory(workflow_id=wf, events=events)
    )
    marks = [(e.what, e.detail) for e in trail.entries if e.workflow_id == wf]
    assert marks == [
        (
            "Marked",
            "soft-tainted DeletionCandidateOfClusterAutoscaler:PreferNoSchedule, ScaleDownAt 2026-11-30T00:10:00Z",
        ),
        ("Tainted", "tainted ToBeDeletedByClusterAutoscaler:NoSchedule, the wait over"),
    ]
    # The recording's removal (0.2.0) marked once, hard, for the whole wait.
    recorded = node_trail(REMOVED, load("NodeAutoscaler", "nodes/demo"), None, load("NodeScaleDown", wf))
    assert [e.detail.split(",")[0] for e in recorded.entries if e.what in ("Marked", "Tainted")] == ["tainted"]


def test_the_loops_soft_taints_on_a_node_read_in_its_trail() -> None:
    """The loop's soft taint on an unneeded node, and its lift once the node is needed again, from the
    loop's own history (its update_soft_deletion_taints calls); another node's changes are not this
    node's, and a failed call says so."""
    from datetime import datetime, timedelta

    from scaling.history import RecordedEvent
    from scaling.nodes import contracts

    t0 = datetime(2026, 11, 30)
    autoscaler = load("NodeAutoscaler", "nodes/demo")
    last = max(e.event_id for e in autoscaler.events)

    def call(n: int, failed: str = "", **lists: list[str]) -> RecordedEvent:
        return RecordedEvent(
            run_id="r",
            event_id=last + n,
            at=t0 + timedelta(minutes=n),
            kind="activity",
            name=contracts.UPDATE_SOFT_TAINTS,
            input=[{"cluster": "c", **lists}],
            failed=failed,
        )

    autoscaler.events += [
        call(1, taint=[REMOVED, "other"]),
        call(2, untaint=["other"]),
        call(3, untaint=[REMOVED], failed="apiserver said 503"),
    ]
    trail = node_trail(REMOVED, autoscaler)
    soft = [(e.what, e.detail) for e in trail.entries if e.what.startswith("Soft")]
    assert soft == [
        ("SoftTainted", "unneeded: DeletionCandidateOfClusterAutoscaler:PreferNoSchedule, new pods go elsewhere first"),
        ("SoftUntainted", "needed again: DeletionCandidateOfClusterAutoscaler lifted (failed: apiserver said 503)"),
    ]
