"""bench/runtime.py: a bench exits 0 after its run, even when the SDK thread that answered the last
call is still inside Python as the main thread finishes (the race that made `make bench-fleet`
abort with "PyGILState_Release" after printing its figures, 4 runs in 10 at 5 clusters). The
race is forced, not waited for: that thread stays in the loop's self-pipe write, after waking
the loop, until the interpreter finalizes (at most a second)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = """
import asyncio, socket, sys, threading, time
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment
from bench import runtime

how, call, server = sys.argv[1:]
last_call = False
write = asyncio.selector_events.BaseSelectorEventLoop._write_to_self

def write_then_linger(self):
    write(self)
    if last_call and threading.get_ident() != threading.main_thread().ident:
        until = time.monotonic() + 1.0
        while not sys.is_finalizing() and time.monotonic() < until:
            time.sleep(0.001)  # the GIL released, as in the socket send

asyncio.selector_events.BaseSelectorEventLoop._write_to_self = write_then_linger

async def refused():
    global last_call
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    last_call = True
    try:
        await Client.connect(f"127.0.0.1:{port}")
    except RuntimeError:
        return "refused"

async def served():
    global last_call
    async with await WorkflowEnvironment.start_time_skipping(test_server_existing_path=server):
        last_call = True  # the server's shutdown, as bench.fleet_scale ends
    return "served"

main = {"refused": refused, "served": served}[call]()
print(runtime.run(main) if how == "bench" else asyncio.run(main), flush=True)
"""


def run(how: str, call: str, server: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", SCRIPT, how, call, server], cwd=ROOT, capture_output=True, text=True, timeout=120
    )


# refused: the last call fails, and its traceback keeps the runtime reachable until the thread ends;
# served: the last call is a server's shutdown.
@pytest.mark.parametrize("call", ["refused", "served"])
def test_a_run_exits_0_while_the_sdk_thread_is_still_in_python(call: str, temporal_test_server_path: str) -> None:
    done = run("bench", call, temporal_test_server_path)
    assert (done.returncode, done.stdout.strip()) == (0, call), done.stderr
    assert "may abort" not in done.stderr


def test_without_it_the_same_run_dies_at_exit(temporal_test_server_path: str) -> None:
    # The SDK's own behaviour (SIGABRT, or SIGSEGV as the unwinding thread frees objects): if this
    # fails, the SDK shuts its threads down itself and bench/runtime.py can go.
    done = run("asyncio", "served", temporal_test_server_path)
    assert done.stdout.strip() == "served"
    assert done.returncode < 0, (done.returncode, done.stderr)


STACK = """
import asyncio, signal, subprocess, sys
from bench import runtime

# Ignored as a shell starts a background job (`make bench-components &`) and pytest-xdist its workers.
signal.signal(signal.SIGINT, signal.SIG_IGN if sys.argv[1] == "ignored" else signal.default_int_handler)

async def main():
    # A stack's process, in a session of its own as starters.processes starts them.
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], start_new_session=True)
    print(child.pid, flush=True)
    try:
        await asyncio.sleep(120)
    finally:
        child.kill()
        child.wait()

runtime.run(main())
"""


@pytest.mark.parametrize("sigint", ["default", "ignored"])
def test_sigterm_stops_a_bench_as_ctrl_c_does_so_its_stack_does_not_outlive_it(sigint: str) -> None:
    """`timeout 600 make bench-components` killed the bench and left its dev server, sim, Prometheus
    and worker running (SIGTERM's default action skips the cleanup)."""
    bench = subprocess.Popen([sys.executable, "-c", STACK, sigint], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    assert bench.stdout is not None
    child = int(bench.stdout.readline())
    try:
        bench.send_signal(signal.SIGTERM)
        assert bench.wait(timeout=60) != 0  # interrupted, as by Ctrl-C
        with pytest.raises(ProcessLookupError):  # killed and reaped by the bench's cleanup
            os.kill(child, 0)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(child, signal.SIGKILL)
