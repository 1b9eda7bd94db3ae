"""The demo as a test runs it: headless, free ports, its own workdir (its Temporal database
stays there for a test to read the histories back)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

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
