"""Issue 20: the scale-out interval runs from when a change's write landed, not from its round's
start. A write retried after a killed worker lands late; the next change must still wait a whole
interval after it (`make chaos` counted one violation when the loop measured from the round).

Time moves only through skip (the write's retries wait on server-side backoff timers)."""

from __future__ import annotations

from datetime import timedelta

from temporalio.testing import WorkflowEnvironment

from bench.components_scale import recorded_changes
from tests.workflows.components.stubs import ComponentsWorld
from tests.workflows.components.test_autoscaler import autoscaler, report, skip_until, tikv_spec

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
