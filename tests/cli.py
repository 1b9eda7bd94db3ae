"""Running the `growth` command as an operator would: a subprocess, its exit code and output."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(sys.executable).parent / "growth"


async def growth(*argv: str, expect: int = 0, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """`growth ARGV...`; fails the test unless it exits with `expect`."""
    cmd = [str(SCRIPT)] if SCRIPT.exists() else [sys.executable, "-m", "starters.cli"]
    proc = await asyncio.to_thread(
        subprocess.run, [*cmd, *argv], capture_output=True, text=True, timeout=60, env={**os.environ, **(env or {})}
    )
    assert proc.returncode == expect, f"{argv}: rc={proc.returncode}\nstdout: {proc.stdout}\nstderr: {proc.stderr}"
    return proc
