"""Issue 20: the scale-out interval runs from when a change's write landed, not from its round's
start. A write retried after a killed worker lands late; the next change must still wait a whole
interval after it (`make chaos` counted one violation when the loop measured from the round).

Time moves only through skip (the write's retries wait on server-side backoff timers)."""

from __future__ import annotations

from datetime import UTC, timedelta

from temporalio.api.enums.v1 import EventType
from temporalio.testing import WorkflowEnvironment

from bench.components_scale import recorded_changes
from scaling.components import contracts
from tests.polling import until
from tests.workflows.components.stubs import ComponentsWorld
from tests.workflows.components.test_autoscaler import autoscaler, report, skip_until, tikv_spec
from tests.workflows.task_times import task_started_after

OUT_S = 60
# Four failed attempts under the loop's write retry policy (1 + 2 + 4 + 8 s of backoff): the
# write lands 15 s after its round began.
FAILED_ATTEMPTS = 4


async def test_next_change_waits_a_whole_interval_after_a_slow_write(env: WorkflowEnvironment) -> None:
    world = ComponentsWorld(
        spec=tikv_spec(scaleOutIntervalSeconds=OUT_S), load={"tikv": 5.4}, failing_patches=FAILED_ATTEMPTS
    )
    async with autoscaler(env, world) as handle:
        await skip_until(env, lambda: len(world.patch_times) == 1, 120)
        first_written, cluster, replicas = world.patch_times[0]
        assert (cluster, replicas) == ("db", 6) and world.failing_patches == 0
        world.load["tikv"] = 11.5  # still over max at 6 instances: the loop wants more at once
        await skip_until(env, lambda: len(world.patch_times) == 2, 300)
        second_written = world.patch_times[1][0]
        # Without the fix the second write came 60 s after the first round began, 45 s after the
        # first write landed.
        assert second_written - first_written >= timedelta(seconds=OUT_S), (first_written, second_written)
        # The same holds between the ScaledOut Events, which is what the chaos bench counts.
        # (From the history: the Events are local activities, whose times under the
        # time-skipping server are the markers', not the worker's clock.)
        history = await handle.fetch_history()
        outs = [at for at, _, reason in recorded_changes(list(history.events)) if reason == "ScaledOut"]
        assert len(outs) == 2 and outs[1] - outs[0] >= timedelta(seconds=OUT_S)
        # Each Event carries a name of its own from the workflow, so a write made again is one Event.
        keys = [ev.key for ev in world.events]
        assert len(set(keys)) == len(keys) and all(len(k) == 16 for k in keys), keys
        # The loop's record of the change is the write's time (or later, never the round's start).
        rep = await report(handle)
        stamped = rep.components["tikv"].timing.last_change_at
        assert stamped is not None and stamped >= second_written
        assert rep.components["tikv"].timing.groups["db"] >= second_written


async def test_a_change_is_timed_when_its_write_landed_not_after_its_events(env: WorkflowEnvironment) -> None:
    """The time kept for a change is the workflow task its write's answer started, the same on
    replay. Not the workflow's time after the change's Events: local activities, after which a
    replay may see another time than the first run (_written_at in the workflow)."""
    world = ComponentsWorld(spec=tikv_spec(), load={"tikv": 5.4}, event_s=0.5)
    async with autoscaler(env, world) as handle:
        await until(lambda: bool(world.statuses) and world.patches == [("db", "tikv", 6)])
        rep = await report(handle)
        history = (await handle.fetch_history()).events
    done = next(
        e.event_id
        for e in history
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED
        and history[
            e.activity_task_completed_event_attributes.scheduled_event_id - 1
        ].activity_task_scheduled_event_attributes.activity_type.name
        == contracts.PATCH_REPLICAS
    )
    landed = task_started_after(history, done)
    (out,) = [at for at, _, reason in recorded_changes(list(history)) if reason == "ScaledOut"]
    assert out <= landed
    stamped = rep.components["tikv"].timing.last_change_at
    assert stamped is not None and abs(stamped - landed) < timedelta(milliseconds=1), (stamped, landed)
    # The ScaledOut Event took half a second after that: its marker is that much later.
    reported = [e for e in history if e.event_type == EventType.EVENT_TYPE_MARKER_RECORDED][-2:]
    assert all(e.event_time.ToDatetime(tzinfo=UTC) >= landed + timedelta(seconds=0.5) for e in reported)
