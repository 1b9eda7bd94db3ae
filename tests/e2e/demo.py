"""The demo as a test runs it: headless, free ports, its own workdir (its Temporal database
stays there for a test to read the histories back)."""

from __future__ import annotations

import concurrent.futures
import json
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from starters.processes import Processes
from tests.cli import in_process


def run_headless_demo(workdir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`growth demo --headless` run in this process (tests.cli), on a thread of its own: the demo
    starts its dev server, sims and worker as processes, as it does for a user; only its own
    imports are shared (a process of its own cost ~3 CPU-s of them). The interactive demo's
    test keeps a process (Ctrl-C)."""
    argv = ["demo", "--headless", "--temporal-port", "0", "--ui-port", "0"]
    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="demo") as pool:
        proc = pool.submit(in_process, [*argv, "--workdir", str(workdir), "--timeout", "150", *args], {}).result()
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc


def demo_summary(workdir: Path, *args: str) -> dict:
    """A headless demo's summary: the JSON its last line prints."""
    return json.loads(run_headless_demo(workdir, *args).stdout.strip().splitlines()[-1])


@contextmanager
def demo_database(workdir: Path, scratch: Path) -> Iterator[int]:
    """A dev server on the demo's database (its histories, to read back), stopped on leaving:
    its port. `scratch` holds the server's own files."""
    procs = Processes(scratch)
    try:
        port, _ = procs.temporal(workdir / "temporal.db", ui=False)
        yield port
    finally:
        procs.stop_all()
