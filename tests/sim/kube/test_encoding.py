"""The store encodes each committed object once and the journal, the watchers and lists reuse
that text; and new versions share unchanged parts with the stored ones. Neither may change a
byte a client or a restart reads."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sim.kube.journal import WAL
from sim.kube.store import Obj, Store


def compact(value: object) -> str:
    return json.dumps(value, separators=(",", ":"))


def churn(store: Store) -> None:
    """Every kind of write: create, status, bind, update, patch, delete."""
    pods = store.builtin("pods")
    for i in range(4):
        body = {"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}]}
        store.create(pods, "default", {"metadata": {"name": f"p{i}", "labels": {"app": "a"}}, "spec": body})

    def running(obj: Obj) -> Obj:
        obj["status"]["phase"] = "Running"
        return obj

    store.bind("default", "p0", "n1")
    store.mutate(pods, "default", "p0", running, "status")
    store.patch(pods, "default", "p1", "application/merge-patch+json", {"metadata": {"labels": {"app": "b"}}})
    store.replace(pods, "default", "p2", {**store.get(pods, "default", "p2"), "status": {"phase": "Failed"}}, "status")
    store.delete(pods, "default", "p3")


@pytest.mark.parametrize("on_disk", [True, False])
def test_lists_and_watch_events_are_the_bytes_of_encoding_the_objects(tmp_path: Path, on_disk: bool) -> None:
    store = Store(data_dir=tmp_path if on_disk else None, fsync=False)
    churn(store)
    pods = store.builtin("pods")
    items, _ = store.list(pods)
    assert store.encode_items(pods, items) == compact(items)
    assert len(store.events) > 10
    for event in store.events:
        assert event.encoded() == compact(event.obj)
    store.close()


def test_the_journal_lines_are_the_records_as_before(tmp_path: Path) -> None:
    store = Store(data_dir=tmp_path, fsync=False)
    churn(store)
    store.close()
    lines = (tmp_path / WAL).read_bytes().splitlines()
    events = store.events
    assert len(lines) == len(events)
    for line, event in zip(lines, events, strict=True):
        meta = event.obj["metadata"]
        record = {"rv": event.rv, "g": event.gr[0], "p": event.gr[1], "t": event.type}
        record |= {"ns": meta.get("namespace", ""), "n": meta["name"]}
        if event.type != "DELETED":
            record["o"] = event.obj
        assert line.decode() == compact(record)
    again = Store(data_dir=tmp_path)
    assert again.list(store.builtin("pods"))[0] == store.list(store.builtin("pods"))[0]
    again.close()


def test_status_writes_and_binds_leave_the_stored_versions_as_they_were() -> None:
    store = Store()
    churn(store)
    pods = store.builtin("pods")
    before = {e.rv: compact(e.obj) for e in store.events}

    def started(obj: Obj) -> Obj:
        obj["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
        return obj

    store.bind("default", "p1", "n2")
    store.mutate(pods, "default", "p1", started, "status")
    assert {e.rv: compact(e.obj) for e in store.events if e.rv in before} == before
