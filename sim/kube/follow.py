"""Following one resource type's changes in the store, as a controller's informer does: each
actor step takes the events since the last one instead of walking every object. A follower
that fell behind the store's event log (or has not started) takes every object again."""

from __future__ import annotations

from collections.abc import Callable

from sim.kube.store import GroupResource, Obj, Store


class Follower:
    def __init__(
        self,
        store: Store,
        gr: GroupResource,
        reset: Callable[[list[Obj]], None],
        changed: Callable[[Obj | None, Obj | None], None],
    ) -> None:
        """`reset(objects)` takes the whole state; `changed(old, new)` one change (new is None
        for a deletion, old for a creation)."""
        self.store, self.gr = store, gr
        self.reset, self.changed = reset, changed
        self.rv = -1

    def catch_up(self) -> None:
        events, kept = self.store.events_after(self.rv) if self.rv >= 0 else ([], False)
        if not kept:
            with self.store.lock:
                objects, self.rv = list(self.store.storage[self.gr].values()), self.store.rv
            self.reset(objects)
            return
        for ev in events:
            if ev.gr == self.gr:
                self.changed(ev.old, None if ev.type == "DELETED" else ev.obj)
            self.rv = ev.rv
