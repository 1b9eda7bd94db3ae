"""The store on disk, as etcd keeps a cluster: a snapshot plus an append-only log of commits.

Every commit is written to `wal.jsonl` with one os.write() before any reader or watcher can
see it, so a SIGKILLed server loses nothing it showed anyone: the bytes are the kernel's once
write() returns. `sync()` fsyncs what was written (group commit: one fsync covers every
write before it); the API server calls it before answering a write, as etcd answers only
after its WAL fsync, so an acknowledged write survives an OS crash too when fsync is on.
A torn last line (killed mid-write) was never acknowledged and is dropped on load.

When the log grows past `compact_after` records, the whole store is written to
`snapshot.json` (temporary file, fsync, rename) and the log starts again empty.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

SNAPSHOT = "snapshot.json"
WAL = "wal.jsonl"
# One compact encoder for the commits' JSON (json.dumps builds a new encoder per call when given
# separators): the same text as json.dumps(value, separators=(",", ":")).
COMPACT = json.JSONEncoder(separators=(",", ":"))


def write_atomically(path: Path, data: bytes, mode: int = 0o644) -> None:
    """Replace `path` with `data` so a crash leaves either the old or the new file, never half."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


class Journal:
    def __init__(self, data_dir: Path, fsync: bool = True, compact_after: int = 100_000) -> None:
        self.dir = data_dir
        self.dir.mkdir(parents=True, exist_ok=True)
        self.fsync = fsync
        self.compact_after = compact_after
        self._fd = -1
        self.records = 0  # lines in the current log
        self.written = 0  # commits written since start; `synced` trails it until sync()
        self.synced = 0
        self._sync_lock = threading.Lock()

    def load(self) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
        """The last snapshot (None before the first) and the commits logged after it."""
        snap_path = self.dir / SNAPSHOT
        snapshot = json.loads(snap_path.read_bytes()) if snap_path.exists() else None
        records: list[dict[str, Any]] = []
        wal = self.dir / WAL
        if wal.exists():
            raw = wal.read_bytes()
            lines = raw.split(b"\n")
            for line in lines:
                if not line:
                    continue
                try:
                    records.append(json.loads(line))
                except ValueError:
                    break  # a torn tail: written by a process killed mid-write, never acknowledged
            good = sum(len(line) + 1 for line in lines[: len(records)])
            if good < len(raw):
                with open(wal, "r+b") as f:  # cut the torn tail so new records follow whole lines
                    f.truncate(good)
        self.records = len(records)
        return snapshot, records

    def open(self) -> None:
        self._fd = os.open(self.dir / WAL, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)

    def append(self, record: dict[str, Any], obj_json: str | None = None) -> None:
        """Called under the store's lock, before the commit is visible. `obj_json`: the object,
        already encoded (for the watchers too), logged as the record's last key "o"."""
        line = COMPACT.encode(record)
        if obj_json is not None:
            line = f'{line[:-1]},"o":{obj_json}}}'
        os.write(self._fd, line.encode() + b"\n")
        self.records += 1
        self.written += 1

    def sync(self) -> None:
        """Make every write so far durable (no-op without fsync, or when a peer's fsync covered it)."""
        if not self.fsync or self._fd < 0:
            return
        target = self.written
        with self._sync_lock:
            if self.synced >= target:
                return
            upto = self.written
            os.fsync(self._fd)
            self.synced = upto

    def due(self) -> bool:
        return self.records >= self.compact_after

    def compact(self, snapshot: dict[str, Any]) -> None:
        """Under the store's lock: the snapshot holds every commit, so the log restarts empty."""
        write_atomically(self.dir / SNAPSHOT, json.dumps(snapshot, separators=(",", ":")).encode(), 0o600)
        os.ftruncate(self._fd, 0)
        self.records = 0
        self.synced = self.written

    def close(self) -> None:
        if self._fd >= 0:
            self.sync()
            os.close(self._fd)
            self._fd = -1
