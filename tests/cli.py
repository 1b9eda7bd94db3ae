"""Running the `growth` command as an operator would: its exit code and output.

`growth(...)` runs the command's own entry (starters.cli.run_cli, what the console script calls)
in this process, on a thread of its own with its own event loop, as click's CliRunner would. A
subprocess per call cost ~1.7 CPU-seconds of imports (about 50 calls in the suite, on 2 cores);
`process=True` keeps the real console script for what only a process shows (the installed entry
point, the worker and demo behind it, the old script names)."""

from __future__ import annotations

import asyncio
import contextlib
import io
import os
import subprocess
import sys
import threading
from pathlib import Path
from unittest import mock

SCRIPT = Path(sys.executable).parent / "growth"

# Output is redirected process-wide (sys.stdout), so one in-process call at a time.
_ONE_AT_A_TIME = threading.Lock()


def in_process(argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    from starters import cli

    # Text streams over bytes, as click's CliRunner gives: click writes bytes where it can.
    out, err = (io.TextIOWrapper(io.BytesIO(), encoding="utf-8", write_through=True) for _ in range(2))
    with (
        _ONE_AT_A_TIME,
        mock.patch.dict(os.environ, env),
        contextlib.redirect_stdout(out),
        contextlib.redirect_stderr(err),
    ):
        try:
            if os.environ.get("_GROWTH_COMPLETE"):  # as cli.main: completion answers first
                cli.growth.main(argv, prog_name="growth")
                code = 0
            else:
                code = cli.run_cli(argv)
        except SystemExit as exit_:
            code = exit_.code if isinstance(exit_.code, int) else int(exit_.code is not None)
    return subprocess.CompletedProcess(argv, code, *(s.buffer.getvalue().decode() for s in (out, err)))


def _process(argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    cmd = [str(SCRIPT)] if SCRIPT.exists() else [sys.executable, "-m", "starters.cli"]
    return subprocess.run([*cmd, *argv], capture_output=True, text=True, timeout=60, env={**os.environ, **env})


async def growth(
    *argv: str, expect: int = 0, env: dict[str, str] | None = None, process: bool = False
) -> subprocess.CompletedProcess[str]:
    """`growth ARGV...`; fails the test unless it exits with `expect`."""
    run = _process if process else in_process
    proc = await asyncio.to_thread(run, list(argv), env or {})
    assert proc.returncode == expect, f"{argv}: rc={proc.returncode}\nstdout: {proc.stdout}\nstderr: {proc.stderr}"
    return proc
