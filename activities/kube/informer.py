"""A small informer: one resource kind of one cluster kept in memory by a list, then a watch
from the list's resourceVersion, as client-go's reflector does.

- the watch asks for bookmarks (`allowWatchBookmarks`), so the informer's resourceVersion moves
  on even when nothing of its kind changes;
- a watch that ends cleanly (its `timeoutSeconds`) or whose connection is refused is resumed
  from the last resourceVersion; 410 Gone (the version fell out of the server's window) or a
  connection dropped mid-stream relists, so an event lost in the break cannot stay lost;
- a kind the server does not serve (404: a CRD not installed) is `absent` (readers see no
  objects, and can tell) and is listed again every ABSENT_RETRY_S (ABSENT_SLOW_RETRY_S after a minute).

Watch events are decoded as plain JSON dicts (kubernetes.watch.Watch without model
deserialisation: the model classes cost several times the decoding on big clusters).
"""

from __future__ import annotations

import itertools
import json
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import urllib3
from kubernetes import watch
from kubernetes.client.rest import ApiException

log = logging.getLogger(__name__)

Obj = dict[str, Any]
# The server ends each watch after this long (the apiserver picks 5-10 min; client-go asks for a
# random time in [5, 10) min): a quiet watch is renewed, and a dead connection noticed.
WATCH_TIMEOUT_S = 300
# Read timeout beyond the watch's own end: a connection that went silent (no events, no
# bookmark) for this long is dead.
READ_SLACK_S = 90
# How soon a kind the server did not serve (404: its CRD not installed) is tried again: a CRD
# installed after the worker started is seen within this, or within ABSENT_SLOW_RETRY_S once the
# kind has been absent for ABSENT_FAST_S (a cluster without Longhorn: its four kinds' lists were
# the largest part of an idle worker's CPU once its loops stopped planning).
ABSENT_RETRY_S = 2.0
ABSENT_FAST_S = 60.0
ABSENT_SLOW_RETRY_S = 15.0
BACKOFF_S = (0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0)
_SERIALS = itertools.count(1)


def object_key(obj: Obj) -> str:
    meta = obj.get("metadata") or {}
    ns = meta.get("namespace")
    return f"{ns}/{meta.get('name')}" if ns else str(meta.get("name"))


def parse_rv(rv: str | None) -> int | None:
    """resourceVersions are etcd revisions: decimal and growing. Anything else cannot be
    compared, and a reader that needs an order then lists instead."""
    try:
        return int(rv) if rv else None
    except ValueError:
        return None


class RawWatch(watch.Watch):
    """kubernetes.watch.Watch yielding the wire's dicts: no model deserialisation."""

    def get_return_type(self, func: Callable[..., Any]) -> None:  # noqa: ARG002 - the base's signature
        return None


class Index:
    """Derived views kept beside an informer's items, updated under its lock."""

    def reset(self, items: dict[str, Obj]) -> None: ...

    def changed(self, key: str, old: Obj | None, new: Obj | None) -> None: ...


class Informer:
    """One kind: `items` by `namespace/name` (or name), and `rv`, the resourceVersion up to which
    the items are known to be complete."""

    def __init__(self, kind: str, list_call: Callable[..., Any], index: Index | None = None) -> None:
        self.kind = kind
        self.list_call = list_call
        self.index = index or Index()
        self.items: dict[str, Obj] = {}
        self.rv: int | None = None
        self.rv_text = ""
        self.cond = threading.Condition()
        self.synced = False
        self.absent = False
        self.lists = 0  # how many times the informer listed (1 + relists)
        self.watches = 0  # watch requests made
        self.events = 0
        # Moves on with every change of `items` (an event, a relist, the kind going absent), not
        # with bookmarks: a reader that remembers it can tell that nothing changed since.
        self.generation = 0
        self.serial = next(_SERIALS)  # this informer among the process's (ids may be reused)
        self._stop = threading.Event()
        self._watch: RawWatch | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ------------------------------------------------------------------------
    def start(self) -> Informer:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name=f"informer-{self.kind}", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        w = self._watch
        if w is not None:
            w.stop()
        with self.cond:
            self.cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout=5)

    # -- reading --------------------------------------------------------------------------
    def wait_synced(self, timeout_s: float) -> bool:
        """True once the first list is in, or the kind is absent (readers then list directly)."""
        with self.cond:
            return self.cond.wait_for(lambda: self.synced or self.absent or self._stop.is_set(), timeout_s)

    def wait_for(self, rv: int, timeout_s: float) -> bool:
        """True once the items are complete up to `rv` (an event or a bookmark at or past it)."""
        with self.cond:
            return self.cond.wait_for(lambda: self.rv is not None and self.rv >= rv, timeout_s)

    def relist(self) -> None:
        """List now, in the caller's thread, and take the answer as the state (the fallback of a
        reader that cannot wait for the watch). The watch goes on from wherever it is: events
        older than the list are ignored by version."""
        items, rv_text = self._list()
        self._replace(items, rv_text)

    # -- the loop -------------------------------------------------------------------------
    def _run(self) -> None:
        failures = 0
        need_list = True
        absent_since: float | None = None
        while not self._stop.is_set():
            try:
                if need_list:
                    items, rv_text = self._list()
                    self._replace(items, rv_text)
                    need_list, absent_since = False, None
                self._watch_once()
                failures = 0
            except ApiException as e:
                if e.status == 404:
                    self._mark_absent()
                    need_list = True
                    absent_since = absent_since or time.monotonic()
                    slow = time.monotonic() - absent_since >= ABSENT_FAST_S
                    self._stop.wait(ABSENT_SLOW_RETRY_S if slow else ABSENT_RETRY_S)
                    continue
                elif e.status == 410:
                    log.info("informer %s: resourceVersion %s expired (410 Gone): relisting", self.kind, self.rv_text)
                    need_list = True
                    continue  # relist at once: the server said where it stands
                else:
                    log.warning("informer %s: %s %s", self.kind, e.status, e.reason)
                    need_list = True
                failures += 1
            except urllib3.exceptions.MaxRetryError as e:
                # Connection refused (the server restarts): resume the watch from where it was.
                log.info("informer %s: cannot reach the API server: %s", self.kind, e.reason)
                failures += 1
            except (urllib3.exceptions.HTTPError, OSError, ValueError) as e:
                # Dropped mid-stream: what was in flight may be lost, so list again.
                log.info("informer %s: watch dropped (%s): relisting", self.kind, type(e).__name__)
                need_list = True
                failures += 1
            if failures:
                self._stop.wait(BACKOFF_S[min(failures, len(BACKOFF_S)) - 1])

    def _list(self) -> tuple[list[Obj], str]:
        resp = self.list_call(_preload_content=False)
        body = json.loads(resp.data)
        self.lists += 1
        return list(body.get("items") or []), str((body.get("metadata") or {}).get("resourceVersion") or "")

    def _replace(self, items: list[Obj], rv_text: str) -> None:
        rv = parse_rv(rv_text)
        with self.cond:
            if rv is not None and self.rv is not None and rv < self.rv:
                return  # the watch is already past this list
            self.items = {object_key(o): o for o in items}
            self.index.reset(self.items)
            self.generation += 1
            self.rv, self.rv_text = rv, rv_text
            self.synced, self.absent = True, False
            self.cond.notify_all()

    def _mark_absent(self) -> None:
        with self.cond:
            if not self.absent:  # still absent at each retry: nothing changed
                self.generation += 1
            self.absent = True
            self.synced = False
            self.items = {}
            self.index.reset(self.items)
            self.cond.notify_all()

    def _watch_once(self) -> None:
        self._watch = w = RawWatch()
        self.watches += 1
        try:
            for event in w.stream(
                self.list_call,
                resource_version=self.rv_text,
                allow_watch_bookmarks=True,
                timeout_seconds=WATCH_TIMEOUT_S,
                _request_timeout=(10, WATCH_TIMEOUT_S + READ_SLACK_S),
            ):
                if self._stop.is_set():
                    break
                self._apply(event["type"], event["raw_object"])
        finally:
            self._watch = None

    def _apply(self, kind: str, obj: Obj) -> None:
        rv_text = str((obj.get("metadata") or {}).get("resourceVersion") or "")
        rv = parse_rv(rv_text)
        with self.cond:
            self.events += 1
            if rv is not None and self.rv is not None and rv <= self.rv:
                return  # older than a relist done meanwhile
            if kind != "BOOKMARK":
                key = object_key(obj)
                old = self.items.get(key)
                if kind == "DELETED":
                    self.items.pop(key, None)
                    self.index.changed(key, old, None)
                else:
                    self.items[key] = obj
                    self.index.changed(key, old, obj)
                self.generation += 1
            self.rv, self.rv_text = rv, rv_text
            self.cond.notify_all()


def wait_fresh(informer: Informer, min_rv: str | None, wait_s: float) -> str:
    """Make `informer` at least as new as `min_rv`: wait for its watch up to `wait_s`, else list.
    Returns how: "cache", "waited" or "listed"."""
    want = parse_rv(min_rv)
    if not min_rv:
        return "cache"
    if want is not None:
        with informer.cond:
            if informer.rv is not None and informer.rv >= want:
                return "cache"
        if informer.wait_for(want, wait_s):
            return "waited"
    informer.relist()
    return "listed"
