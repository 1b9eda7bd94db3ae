"""Every activity has its limits written down, and the worker's heartbeat interceptor keeps an
activity alive at the server without code of its own, keeps a wait's progress for its retry, and
a wait hands itself back when its worker shuts down.

The interceptor tests run on the dev server: heartbeat timeouts are the server's, in real time."""

from __future__ import annotations

import asyncio
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import pytest
from temporalio import activity, workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ApplicationError, TimeoutType
from temporalio.exceptions import TimeoutError as ActivityTimeout
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

import worker
from activities.heartbeat import WORKER_SHUTDOWN, HeartbeatInterceptor, beat_progress, pause, resumed_deadline
from scaling.components import contracts as components
from scaling.fleet import contracts as fleet
from scaling.nodes import contracts as nodes
from tests.workflows.workers import new_worker
from workflows.activity_options import HEARTBEAT_THROTTLE, ActivityOptions
from workflows.components.activity_options import COMPONENT_ACTIVITIES
from workflows.fleet.activity_options import FLEET_ACTIVITIES
from workflows.nodes.activity_options import NODE_ACTIVITIES

# A decision (a local activity) takes its options where the workflow calls it, not from the table.
TABLES = [
    (NODE_ACTIVITIES, nodes.ACTIVITY_NAMES - nodes.DECISION_NAMES),
    (FLEET_ACTIVITIES, fleet.ACTIVITY_NAMES),
    (COMPONENT_ACTIVITIES, components.ACTIVITY_NAMES),
]


@pytest.mark.parametrize(("table", "names"), TABLES)
def test_every_activity_of_a_loop_has_its_limits(table: dict[str, ActivityOptions], names: set[str]) -> None:
    assert set(table) == names  # a workflow looks its activity up here: a missing one would fail it
    for name, options in table.items():
        # Noticed dead within seconds; the worker's beats (every <= HEARTBEAT_THROTTLE) leave
        # at least one late beat of slack; and one attempt may run for longer than a beat.
        assert options.heartbeat <= timedelta(seconds=10), name
        assert options.heartbeat >= 2 * HEARTBEAT_THROTTLE, name
        assert options.start_to_close > options.heartbeat, name


def test_a_rolling_update_waits_for_the_graceful_shutdown() -> None:
    from tests.test_deploy_files import DEPLOY, find

    (deploy,) = find("Deployment", DEPLOY / "base" / "worker.yaml")
    grace = deploy["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
    assert grace >= worker.GRACEFUL_SHUTDOWN.total_seconds() + 10  # + the last tasks and the exit
    assert deploy["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"] == 0  # a new one polls first


# -- the interceptor, on the dev server ----------------------------------------------------------

HEARTBEAT_S = 2.0
EXECUTOR = ThreadPoolExecutor(max_workers=4)


@activity.defn(name="silent")
async def silent(seconds: float) -> str:
    """Runs longer than its heartbeat timeout and never beats itself."""
    await asyncio.sleep(seconds)
    return "done"


@activity.defn(name="silent_thread")
def silent_thread(seconds: float) -> str:
    """The same in a worker thread, as most of growth's Kubernetes activities run."""
    time.sleep(seconds)
    return "done"


@activity.defn(name="resuming")
async def resuming(_: None) -> float:
    """First attempt: records a deadline, outlives a few background beats, fails. The retry
    reads the deadline back (the background beats repeated it rather than clearing it)."""
    if activity.info().attempt == 1:
        beat_progress(123.0)
        await asyncio.sleep(HEARTBEAT_S * 1.5)
        raise ApplicationError("first attempt fails")
    return resumed_deadline(999.0)


@activity.defn(name="waiting")
async def waiting(_: None) -> str:
    """A long wait: hands back on worker shutdown; the retry reports which worker it ran on."""
    if activity.info().attempt == 1:
        while True:
            await pause(0.2)
    return "handed back"


@workflow.defn(sandboxed=False)
class RunOne:
    @workflow.run
    async def run(self, name: str, arg: float | None, attempts: int = 2) -> object:
        return await workflow.execute_activity(
            name,
            arg,
            start_to_close_timeout=timedelta(seconds=60),
            heartbeat_timeout=timedelta(seconds=HEARTBEAT_S),
            retry_policy=RetryPolicy(initial_interval=timedelta(milliseconds=100), maximum_attempts=attempts),
        )


def make_worker(env: WorkflowEnvironment, tq: str, interceptors: list) -> Worker:
    return new_worker(
        env.client,
        tq,
        workflows=[RunOne],
        activities=[silent, silent_thread, resuming, waiting],
        activity_executor=EXECUTOR,
        interceptors=interceptors,
        max_heartbeat_throttle_interval=timedelta(seconds=0.5),
        default_heartbeat_throttle_interval=timedelta(seconds=0.5),
        graceful_shutdown_timeout=timedelta(seconds=30),
    )


async def run_one(env: WorkflowEnvironment, tq: str, name: str, arg: float | None, attempts: int = 2) -> object:
    return await env.client.execute_workflow(
        RunOne.run, args=[name, arg, attempts], id=f"{name}-{uuid.uuid4()}", task_queue=tq
    )


@pytest.mark.parametrize("name", ["silent", "silent_thread"])
async def test_an_activity_that_never_beats_stays_alive_past_its_heartbeat_timeout(
    dev_env: WorkflowEnvironment, name: str
) -> None:
    async def with_interceptor() -> object:
        tq = f"hb-{uuid.uuid4()}"
        async with make_worker(dev_env, tq, [HeartbeatInterceptor()]):
            return await run_one(dev_env, tq, name, HEARTBEAT_S * 2.5)

    async def without() -> BaseException:
        # Without the interceptor the server gives up on it: the check on the other run can fail.
        # One attempt: a retry would only time out the same way.
        tq = f"hb-{uuid.uuid4()}"
        async with make_worker(dev_env, tq, []):
            with pytest.raises(Exception) as err:
                await run_one(dev_env, tq, name, HEARTBEAT_S * 2.5, attempts=1)
        return err.value

    # Side by side, on task queues of their own: each waits out the server's clock, not the CPU.
    done, failed = await asyncio.gather(with_interceptor(), without())
    assert done == "done"
    timeout = failed.__cause__.__cause__
    assert isinstance(timeout, ActivityTimeout) and timeout.type == TimeoutType.HEARTBEAT


async def test_background_beats_keep_a_waits_progress_for_its_retry(dev_env: WorkflowEnvironment) -> None:
    tq = f"hb-{uuid.uuid4()}"
    async with make_worker(dev_env, tq, [HeartbeatInterceptor()]):
        assert await run_one(dev_env, tq, "resuming", None) == 123.0


async def test_a_wait_hands_itself_back_when_its_worker_shuts_down(dev_env: WorkflowEnvironment) -> None:
    tq = f"hb-{uuid.uuid4()}"
    first = make_worker(dev_env, tq, [HeartbeatInterceptor()])
    async with first:
        handle = await dev_env.client.start_workflow(
            RunOne.run, args=["waiting", None], id=f"waiting-{uuid.uuid4()}", task_queue=tq
        )

        async def started() -> bool:
            desc = await handle.describe()
            return bool(desc.raw_description.pending_activities)

        while not await started():
            await asyncio.sleep(0.1)
    # `first` shut down (its graceful limit is 30 s) without waiting for the wait to end: the
    # wait failed itself as WorkerShutdown (retryable), and a second worker finishes it.
    (pending,) = (await handle.describe()).raw_description.pending_activities
    assert pending.last_failure.application_failure_info.type == WORKER_SHUTDOWN
    async with make_worker(dev_env, tq, [HeartbeatInterceptor()]):
        assert await asyncio.wait_for(handle.result(), timeout=60) == "handed back"
