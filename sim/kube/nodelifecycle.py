"""The node lifecycle controller's NoSchedule taints (TaintNodesByCondition), on every Node.

This is the simulator's own reading of kubernetes/kubernetes
pkg/controller/nodelifecycle/node_lifecycle_controller.go (doNoScheduleTaintingPass and
nodeConditionToTaintKeyStatusMap) and pkg/controller/util/node (SwapNodeControllerTaint):

- The taints a node should carry follow its conditions, in the order of its conditions:
  Ready False gives node.kubernetes.io/not-ready, Ready Unknown node.kubernetes.io/unreachable,
  MemoryPressure, DiskPressure or PIDPressure True gives memory-pressure, disk-pressure or
  pid-pressure, NetworkUnavailable True network-unavailable; spec.unschedulable adds
  node.kubernetes.io/unschedulable in the same pass. All are NoSchedule.
- They are compared with the node's NoSchedule taints of those keys only, by key and effect:
  a wanted one that is missing is appended with timeAdded set to now, one no longer wanted is
  removed, and every other taint (users', an autoscaler's, NoExecute ones) stays as it was, in
  its place.
- A node with no Ready condition counts as Ready False: a kubelet registers its node NotReady.

The real controller works through a queue of node events, so a node that turned Ready keeps
not-ready until its turn comes. Here a pass takes the nodes changed since the last one; the
control's `node_taint_lag` keeps a Ready node's not-ready (or unreachable) taint that many
seconds after this controller first saw it Ready. Adding a taint has no lag beyond the pass.
"""

from __future__ import annotations

import time

from sim.kube.actor import Actor
from sim.kube.control import FakeControl
from sim.kube.follow import Follower
from sim.kube.store import Obj, Store, now_rfc3339

NO_SCHEDULE = "NoSchedule"
NOT_READY = "node.kubernetes.io/not-ready"
UNREACHABLE = "node.kubernetes.io/unreachable"
UNSCHEDULABLE = "node.kubernetes.io/unschedulable"
# condition type -> condition status -> taint key
CONDITION_TAINTS = {
    "Ready": {"False": NOT_READY, "Unknown": UNREACHABLE},
    "MemoryPressure": {"True": "node.kubernetes.io/memory-pressure"},
    "DiskPressure": {"True": "node.kubernetes.io/disk-pressure"},
    "PIDPressure": {"True": "node.kubernetes.io/pid-pressure"},
    "NetworkUnavailable": {"True": "node.kubernetes.io/network-unavailable"},
}
MANAGED = {key for by_status in CONDITION_TAINTS.values() for key in by_status.values()} | {UNSCHEDULABLE}
READY_TAINTS = (NOT_READY, UNREACHABLE)


def ready_status(node: Obj) -> str | None:
    conditions = (node.get("status") or {}).get("conditions") or []
    return next((c.get("status") for c in conditions if c.get("type") == "Ready"), None)


def wanted_keys(node: Obj) -> list[str]:
    """The keys of the NoSchedule taints the controller keeps on the node, in its order."""
    conditions = (node.get("status") or {}).get("conditions") or []
    keys = [NOT_READY] if ready_status(node) is None else []
    for condition in conditions:
        key = CONDITION_TAINTS.get(condition.get("type", ""), {}).get(condition.get("status", ""))
        if key and key not in keys:
            keys.append(key)
    if (node.get("spec") or {}).get("unschedulable"):
        keys.append(UNSCHEDULABLE)
    return keys


def managed(taint: Obj) -> bool:
    return taint.get("effect") == NO_SCHEDULE and taint.get("key") in MANAGED


def swapped(taints: list[Obj], wanted: list[str], stamp: str) -> list[Obj]:
    """The node's taints with the controller's own made `wanted`: the others untouched and in
    place, a kept one unchanged, a missing one appended with timeAdded."""
    out = [t for t in taints if not managed(t) or t.get("key") in wanted]
    have = {t.get("key") for t in out if managed(t)}
    return out + [{"key": k, "effect": NO_SCHEDULE, "timeAdded": stamp} for k in wanted if k not in have]


class NodeLifecycle(Actor):
    name = "nodelifecycle"

    def __init__(self, store: Store, control: FakeControl, interval: float = 0.05) -> None:
        super().__init__(lambda: interval)
        self.store = store
        self.control = control
        self.queue: dict[str, None] = {}  # node names to look at, in the order their events came
        self.ready_since: dict[str, float] = {}  # name -> when this controller first saw it Ready
        self.held: set[str] = set()  # Ready nodes whose not-ready taint waits for the lag
        self.follower = Follower(store, store.builtin("nodes").gr, self._reset, self._changed)

    def _reset(self, nodes: list[Obj]) -> None:
        self.queue = {}
        live = {n["metadata"]["name"] for n in nodes}
        self.ready_since = {name: t for name, t in self.ready_since.items() if name in live}
        self.held &= live
        for node in nodes:
            self._changed(None, node)

    def _changed(self, old: Obj | None, new: Obj | None) -> None:
        if new is None:
            name = old["metadata"]["name"] if old is not None else ""
            self.queue.pop(name, None)
            self.ready_since.pop(name, None)
            self.held.discard(name)
            return
        name = new["metadata"]["name"]
        if ready_status(new) == "True":
            self.ready_since.setdefault(name, time.monotonic())
        else:
            self.ready_since.pop(name, None)
        self.queue[name] = None

    def step(self) -> None:
        self.follower.catch_up()
        now = time.monotonic()
        lag = self.control.node_taint_lag
        for name in list(self.held):
            if self.ready_since.get(name, now) + lag <= now:
                self.held.discard(name)
                self.queue[name] = None
        names, self.queue = list(self.queue), {}
        nodes = self.store.builtin("nodes")
        for name in names:
            self.store.mutate(nodes, "", name, lambda node: self._pass(node, now, lag))

    def _pass(self, node: Obj, now: float, lag: float) -> Obj | None:
        """doNoScheduleTaintingPass for one node: the node with its taints swapped, or None."""
        name = node["metadata"]["name"]
        spec = node.setdefault("spec", {})
        taints = list(spec.get("taints") or [])
        wanted = wanted_keys(node)
        since = self.ready_since.get(name)
        if since is not None and now < since + lag:
            # Turned Ready within the lag: its not-ready (unreachable) taint waits for its turn.
            kept = [t["key"] for t in taints if managed(t) and t["key"] in READY_TAINTS]
            if kept:
                self.held.add(name)
                wanted = [*wanted, *kept]
        new = swapped(taints, wanted, now_rfc3339())
        if new == taints:
            return None
        spec["taints"] = new
        return node
