"""A bench's `asyncio.run` with the Temporal SDK's runtime shut down before the interpreter exits.

Why: a result comes back from the SDK's Rust core on one of its Tokio threads, which takes the GIL
and hands the value to the event loop (`call_soon_threadsafe`). The loop's self-pipe write there
releases the GIL, so the main thread resumes, finishes and reaches interpreter finalization while
that thread is still inside Python. When the thread asks for the GIL back, CPython ends it
(`pthread_exit`), and unwinding through pyo3's GIL guard releases a thread state that is not
current: "Fatal Python error: PyGILState_Release ... finalizing", SIGABRT (or SIGSEGV), after the
bench printed its figures. Measured: bench.fleet_scale at 5 clusters died so in 4 runs of 10 (0 of
10 through `run` below); its last call, the dev server's shutdown, answers under 1 ms before the
exit (upstream: temporalio/sdk-python issue 300).

The SDK's default runtime lives in a module global until finalization, so nothing shuts it down.
Here the run gets a runtime of its own as the default. Afterwards the main thread waits, the GIL
released, until no SDK thread runs Python, then forgets the runtime and collects the cycles that
still reach it: its drop shuts Tokio down with the GIL released and joins its threads, all while
the interpreter still runs. Both are waited for, not assumed: a thread still inside Python can
keep the runtime reachable (a failed call's traceback holds the frames that hold it).
"""

from __future__ import annotations

import asyncio
import gc
import signal
import sys
import threading
import time
import weakref
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from temporalio.runtime import Runtime, TelemetryConfig

T = TypeVar("T")

# Bound on the wait for the last SDK thread to leave Python: it needs the GIL for microseconds,
# seconds only on a machine whose cores are all busy.
SHUT_DOWN_S = 10.0


def run(main: Coroutine[Any, Any, T]) -> T:
    """`asyncio.run(main)` on a Temporal runtime of its own (the default for every client in the
    process), shut down once `main` has ended, whatever its outcome. SIGTERM ends it as Ctrl-C does."""
    runtime = Runtime(telemetry=TelemetryConfig())
    Runtime.set_default(runtime)
    alive = weakref.ref(runtime)
    del runtime
    # The stack's processes run in sessions of their own (starters.processes): only the cleanup that
    # Ctrl-C runs stops them. SIGTERM's default action (a `timeout`, a CI job cancelled) left the dev
    # server, the sim, Prometheus and the worker running, taking the cores of whatever ran next.
    # asyncio.run cancels the main task on SIGINT only over Python's own handler, which a shell's
    # background job or a pytest-xdist worker does not have (SIGINT ignored): it is put back for the run.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler), signal.signal(signal.SIGTERM, _as_ctrl_c)
    try:
        return asyncio.run(main)
    finally:
        signal.signal(signal.SIGINT, previous[0])
        signal.signal(signal.SIGTERM, previous[1])
        shut_down(alive)


def _as_ctrl_c(signum: int, frame: object) -> None:
    signal.raise_signal(signal.SIGINT)  # asyncio.run's handler: the main task is cancelled at its next await


def shut_down(alive: weakref.ref[Runtime]) -> None:
    """Wait until no SDK thread is inside Python, then forget the default runtime and wait until
    nothing holds it (its drop joins its threads)."""
    deadline = time.monotonic() + SHUT_DOWN_S
    left = _until(lambda: not sdk_threads_in_python(), deadline)
    # None puts the SDK back to "no default yet"; there is no public call that drops it.
    Runtime.set_default(None, error_if_already_set=False)  # type: ignore[arg-type]

    def released() -> bool:
        gc.collect()  # the cycles that still reach it (finished tasks, the clients' configs)
        return alive() is None

    dropped = _until(released, deadline)
    if not (left and dropped):
        print(
            f"bench: {SHUT_DOWN_S:.0f} s after the run an SDK thread still runs Python or the Temporal runtime "
            "is still held (a client or worker outlived the run); the interpreter's exit may abort",
            file=sys.stderr,
            flush=True,
        )


def _until(check: Callable[[], bool], deadline: float) -> bool:
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)  # the GIL released: an SDK thread still inside Python takes it and finishes
    return True


def sdk_threads_in_python() -> bool:
    """Whether a thread Python did not start (the SDK's, which take the GIL to hand back results)
    is running Python code now. `threading` lists such a thread only as a dummy, if at all."""
    ours = {t.ident for t in threading.enumerate() if not isinstance(t, threading._DummyThread)}
    return any(ident not in ours for ident in sys._current_frames())
