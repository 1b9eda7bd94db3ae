"""Start and stop the local default's processes: Temporal dev server, simulated cluster, worker.

Used by the demo and by the end-to-end tests, so both run exactly the same processes. Every
process is started in its own session; `stop()` ends those and only those.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from temporalio.client import Client

from workflows.search import ALL as SEARCH_KEYS

BIN = Path(sys.executable).parent
# Every search attribute growth's workflows may set, registered on the dev server at start.
SEARCH_ATTRIBUTES = tuple(key.name for key in SEARCH_KEYS)
CONNECT_TRY_S = 2.0  # one connect to a starting dev server; it answers a local client in ms


async def _wait_serving(port: int, proc: Proc, deadline: float) -> None:
    """Until a client connects to the dev server `proc` on `port`; RuntimeError if it exits."""
    while True:
        try:
            # Bounded: a port another process holds may take the connection and never answer.
            await asyncio.wait_for(Client.connect(f"127.0.0.1:{port}"), CONNECT_TRY_S)
            return
        except (RuntimeError, TimeoutError):
            if not proc.alive():
                raise RuntimeError(f"temporal dev server exited; see {proc.log_path}") from None
            if time.monotonic() > deadline:
                raise TimeoutError(f"temporal dev server not serving on {port}; see {proc.log_path}") from None
            await asyncio.sleep(0.1)


# Ports we hand to a server to bind come from below the kernel's ephemeral range. A port bind(0)
# gave us is free again once we let go of it, and the next bind(0), in any process, may be handed it
# before our server binds it: the dev server picks its own history, matching and worker ports so, and
# once took a test's frontend port for its worker service (a panic minutes into the suite, every later
# test of that pytest worker refused). bind(0) never hands out a port below the range.
_PICKED_SPAN = 12000
_pick = random.SystemRandom()  # not the random module's: a test plugin may seed it alike in every worker
_handed: collections.deque[int] = collections.deque(maxlen=256)  # ports this process handed out lately


def ephemeral_low(path: Path = Path("/proc/sys/net/ipv4/ip_local_port_range")) -> int:
    """The first port of the kernel's ephemeral range (Linux's default when unreadable)."""
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def picking_span(low: int, high: int, env: Mapping[str, str] = os.environ) -> tuple[int, int]:
    """This process's share of [low, high): each pytest-xdist worker its own slice. Two workers once
    picked the same port for their time-skipping servers; the second server could not bind, the
    SDK's start found the first one answering there, and the test failed when the other worker's
    test stopped its server ("tcp connect error")."""
    worker, count = env.get("PYTEST_XDIST_WORKER", ""), env.get("PYTEST_XDIST_WORKER_COUNT", "")
    if not (worker.startswith("gw") and worker[2:].isdigit() and count.isdigit() and int(count) > 1):
        return low, high
    width = (high - low) // int(count)
    start = low + int(worker[2:]) % int(count) * width
    return start, start + width


def free_port(tries: int = 200) -> int:
    """A port nothing is bound to now, below the ephemeral range (above 1024), from this process's
    share of it and not one it handed out lately (a server may not have bound it yet); bind(0)'s
    when every one tried there is taken."""
    high = ephemeral_low()
    low, high = picking_span(max(1025, high - _PICKED_SPAN), high)
    for _ in range(tries if high > low else 0):
        port = _pick.randrange(low, high)
        if port in _handed:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        _handed.append(port)
        return port
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def port_open(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket() as s:
        s.settimeout(0.2)
        return s.connect_ex((host, port)) == 0


def fresh_sim_data_dir(workdir: Path) -> Path:
    """The simulated cluster's data directory in a demo's workdir, emptied: every run starts fresh."""
    path = workdir / "sim-cluster"
    shutil.rmtree(path, ignore_errors=True)
    return path


@dataclass
class Proc:
    name: str
    popen: subprocess.Popen
    log_path: Path
    lines: list[str] = field(default_factory=list)

    def wait_for_line(self, pattern: str, timeout: float) -> re.Match[str]:
        rx = re.compile(pattern)
        deadline = time.monotonic() + timeout
        seen = 0
        while time.monotonic() < deadline:
            while seen < len(self.lines):
                m = rx.search(self.lines[seen])
                seen += 1
                if m:
                    return m
            if self.popen.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self.popen.returncode}; see {self.log_path}")
            time.sleep(0.05)
        raise TimeoutError(f"{self.name} did not print {pattern!r} within {timeout}s; see {self.log_path}")

    def alive(self) -> bool:
        return self.popen.poll() is None

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 10.0) -> None:
        if self.popen.poll() is not None:
            return
        try:
            os.killpg(self.popen.pid, sig)
        except ProcessLookupError:
            return
        try:
            self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.popen.pid, signal.SIGKILL)
            self.popen.wait(5)

    def kill(self) -> None:
        """SIGKILL: the crash case (no clean shutdown)."""
        self.stop(signal.SIGKILL)

    def pause(self) -> None:
        """SIGSTOP: the process hangs (connections stay open, nothing answers) until resume()."""
        os.killpg(self.popen.pid, signal.SIGSTOP)

    def resume(self) -> None:
        os.killpg(self.popen.pid, signal.SIGCONT)


def say(msg: str) -> None:
    """A demo's progress line, with the time."""
    print(f"{time.strftime('%H:%M:%S')}  {msg}", flush=True)


class Processes:
    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.logs = workdir / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)
        self.procs: list[Proc] = []
        self.sim: Proc | None = None  # the simulated cluster, restartable when it has a data dir
        self._sim_argv: list[str] = []

    def start(self, name: str, argv: list[str], env: dict[str, str] | None = None) -> Proc:
        log_path = self.logs / f"{name}.log"
        log = open(log_path, "a")
        popen = subprocess.Popen(
            argv,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            text=True,
            start_new_session=True,  # Ctrl-C in the terminal reaches us, and we stop them
            env={**os.environ, **(env or {}), "PYTHONUNBUFFERED": "1"},
        )
        proc = Proc(name, popen, log_path)

        def pump() -> None:
            assert popen.stdout is not None
            for line in popen.stdout:
                proc.lines.append(line.rstrip("\n"))
                log.write(line)
                log.flush()
            log.close()

        threading.Thread(target=pump, name=f"pump-{name}", daemon=True).start()
        self.procs.append(proc)
        return proc

    def temporal(
        self,
        db_file: Path | None,
        port: int | None = None,
        ui_port: int | None = None,
        ui: bool = True,
        extra_args: Sequence[str] = (),
    ) -> tuple[int, int | None]:
        """Start the dev server; returns its (port, Web UI port or None when headless).
        `extra_args` go to `temporal server start-dev` as they are.

        Ports left None are picked free here, and picked again if the server exits at start:
        between our probe and its bind another process (a parallel test) may take the port."""
        tries = 3 if port is None or (ui and ui_port is None) else 1
        for attempt in range(1, tries + 1):
            p = port or free_port()
            u = (ui_port or free_port()) if ui else None
            try:
                self._start_temporal(p, u, db_file, extra_args)
                return p, u
            except RuntimeError:
                if attempt == tries:
                    raise
        raise AssertionError("unreachable")

    def demo_temporal(self, workdir: Path, port: int | None, ui_port: int | None) -> tuple[int, str]:
        """A demo's dev server, on a fresh database (every demo run is a fresh scenario): its port
        and its Web UI's URL."""
        db = workdir / "temporal.db"
        db.unlink(missing_ok=True)
        say("starting the Temporal dev server")
        port, ui = self.temporal(db, port, ui_port)
        url = f"http://127.0.0.1:{ui}"
        say(f"Temporal dev server on 127.0.0.1:{port} (Web UI {url})")
        return port, url

    def _start_temporal(
        self, port: int, ui_port: int | None, db_file: Path | None, extra_args: Sequence[str] = ()
    ) -> Proc:
        argv = [
            str(BIN / "temporal"),
            "server",
            "start-dev",
            "--ip",
            "127.0.0.1",
            "--port",
            str(port),
            "--log-level",
            "warn",
            # One partition per task queue: with the server's four, a task lands in a partition
            # with no poll waiting and waits to be forwarded to one that has. Measured on the
            # bench's bursts: a request's first workflow task waited 3.1 s (p99) instead of
            # 6.5 s at 10,000 pods and 13.1 s instead of 20.1 s at 30,000 (docs/nodes-benchmarks.md).
            "--dynamic-config-value",
            "matching.numTaskqueueReadPartitions=1",
            "--dynamic-config-value",
            "matching.numTaskqueueWritePartitions=1",
        ]
        # WAL without a sync per commit: a burst's child starts are many small transactions.
        # An application crash loses nothing; only an OS crash could lose the last commits.
        argv += (
            [
                "--db-filename",
                str(db_file),
                "--sqlite-pragma",
                "journal_mode=wal",
                "--sqlite-pragma",
                "synchronous=normal",
            ]
            if db_file
            else []
        )
        argv += (
            ["--ui-port", str(ui_port), "--ui-ip", "127.0.0.1", "--ui-disable-news-fetch"]
            if ui_port
            else ["--headless"]
        )
        for attr in SEARCH_ATTRIBUTES:
            argv += ["--search-attribute", f"{attr}=Keyword"]
        proc = self.start("temporal", [*argv, *extra_args])
        # Wait until a client connects, not only until the port listens: on a database with
        # history the frontend answers "not healthy yet" for a while after the bind.
        with concurrent.futures.ThreadPoolExecutor(1) as pool:  # callers may be inside a loop
            pool.submit(asyncio.run, _wait_serving(port, proc, time.monotonic() + 60)).result()
        return proc

    def sim_cluster(
        self, kubeconfig: Path, extra: list[str] | None = None, data_dir: Path | None = None
    ) -> tuple[Proc, str]:
        """Start the simulated cluster; with `data_dir` it keeps its store, CA, token and port
        there, so restart_sim_cluster() brings back the same cluster at the same URL."""
        argv = [sys.executable, "-m", "sim.cluster", "--port", "0", "--kubeconfig", str(kubeconfig), *(extra or [])]
        if data_dir is not None:
            argv += ["--data-dir", str(data_dir)]
        self._sim_argv = argv
        return self._start_sim()

    def _start_sim(self) -> tuple[Proc, str]:
        proc = self.start("sim-cluster", self._sim_argv)
        url = proc.wait_for_line(r"sim cluster ready: (\S+)", 30).group(1)
        self.sim = proc
        return proc, url

    def restart_sim_cluster(self, sig: int = signal.SIGKILL) -> tuple[Proc, str]:
        """End the simulated cluster with `sig` (SIGKILL: a crash) and start it again on its data
        directory: same objects, uids, resourceVersions, CA, token and URL; open watches drop."""
        if self.sim is None or "--data-dir" not in self._sim_argv:
            raise ValueError("restart_sim_cluster needs a cluster started with sim_cluster(data_dir=...)")
        self.sim.stop(sig)
        self.procs.remove(self.sim)
        return self._start_sim()

    def worker(self, config: Path, name: str = "worker") -> Proc:
        proc = self.start(
            name, [sys.executable, str(Path(__file__).resolve().parent.parent / "worker.py"), "--config", str(config)]
        )
        proc.wait_for_line(r"growth worker ready", 60)
        return proc

    def stop_all(self) -> None:
        for proc in reversed(self.procs):
            proc.stop()
