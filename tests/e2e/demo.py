"""The demo as a test runs it: headless, free ports, its own workdir (its Temporal database
stays there for a test to read the histories back)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from starters.processes import Processes

ROOT = Path(__file__).resolve().parents[2]


def run_headless_demo(workdir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "starters.demo", "--headless", "--temporal-port", "0", "--ui-port", "0"]
    proc = subprocess.run(
        [*argv, "--workdir", str(workdir), "--timeout", "150", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc


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
