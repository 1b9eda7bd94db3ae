"""Scripted load for the simulated TiDB clusters: CPU demand and storage use, and the view of
every running tikv/tidb instance that the fake Prometheus and the fake PD both answer from.

A *family* is a base TidbCluster plus the heterogeneous clusters that join its PD (their
spec.cluster names it). Load is set per family and component, or pinned per pod:

- `demand[(ns, base, component)] = cores`: shared by the family's running instances of that
  component in proportion to their CPU quota, none above its quota (water-filling), so adding
  instances lowers everyone's usage, as with a real balanced workload;
- `pod_cpu[(ns, pod)] = cores`: a pinned usage (a hot instance), taken out of the sharing;
- `storage[(ns, base)] = bytes`: the family's TiKV data, spread in proportion to capacity;
- `pod_storage[(ns, pod)] = bytes`: a pinned store size.

An instance is running once its pod is Running and Ready. CPU quota is the container's cpu
limit, else its request, else 1 core; store capacity is spec.tikv.requests.storage of its
TidbCluster, else `default_capacity`. Usage never exceeds quota or capacity.

Faults (`set_fault`) make the next `times` answers of a target ("prometheus", "pd",
"external") fail: mode "error" (HTTP 5xx), "empty" (Prometheus: an empty result; PD: `null`,
as released PD answers when it cannot read metrics), "delay" (answer after `seconds`) or
"drop" (the request is read and served, the connection closed before the answer: a lost
response).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

from sim.kube import quantity
from sim.kube.store import Obj, Store
from sim.tidb.operator import STORE_STATE_ANNOTATION, base_of, cluster_of, component_of, tidb_clusters

DEFAULT_CAPACITY = 100 * 2**30
METRIC_COMPONENTS = ("tikv", "tidb")
FAULT_TARGETS = ("prometheus", "pd", "external")
FAULT_MODES = ("error", "empty", "delay", "drop")


@dataclass
class Instance:
    namespace: str  # the pod's
    pod: str
    uid: str
    cluster: str  # the TidbCluster that made the pod
    base_namespace: str
    base: str  # the family's base cluster
    component: str
    quota: float  # cores
    cpu: float = 0.0  # cores in use now
    capacity: int = 0  # bytes (tikv)
    used: int = 0  # bytes (tikv)
    cpu_seconds: float = 0.0  # the counter: cumulative CPU seconds since the sim first saw it
    store_state: str = "Up"  # TiKV: Offline while the operator removes it


@dataclass
class Fault:
    mode: str
    times: int | None = None  # None: until cleared
    seconds: float = 0.0
    status: int = 503


def _running(pod: Obj) -> bool:
    status = pod.get("status") or {}
    return status.get("phase") == "Running" and any(
        c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or []
    )


def _cores(pod: Obj) -> float:
    for key in ("limits", "requests"):
        total = 0
        for c in pod["spec"].get("containers") or []:
            value = ((c.get("resources") or {}).get(key) or {}).get("cpu")
            if value is not None:
                total += quantity.millis(value)
        if total:
            return total / 1000
    return 1.0


def _share(total: float, caps: list[float]) -> list[float]:
    """Split `total` in proportion to caps, none above its cap (the excess goes to the others)."""
    out = [0.0] * len(caps)
    open_ = [i for i, c in enumerate(caps) if c > 0]
    left = max(0.0, total)
    while open_ and left > 1e-12:
        weight = sum(caps[i] - out[i] for i in open_) or 1.0
        portion = {i: left * (caps[i] - out[i]) / weight for i in open_}
        left = 0.0
        still = []
        for i in open_:
            room = caps[i] - out[i]
            if portion[i] >= room:
                out[i] = caps[i]
                left += portion[i] - room
            else:
                out[i] += portion[i]
                still.append(i)
        if len(still) == len(open_):
            break
        open_ = still
    return out


def _assign(
    members: list[Instance], pinned: dict[tuple[str, str], Any], total: float, cap: str
) -> list[tuple[Instance, float]]:
    """Each member's share: its pinned value, or a part of `total` in proportion to its cap
    (`quota` or `capacity`), never above the cap."""
    out, shared = [], []
    for inst in members:
        value = pinned.get((inst.namespace, inst.pod))
        if value is None:
            shared.append(inst)
        else:
            out.append((inst, min(max(0.0, float(value)), float(getattr(inst, cap)))))
    caps = [float(getattr(i, cap)) for i in shared]
    return out + list(zip(shared, _share(float(total), caps), strict=True))


@dataclass
class LoadModel:
    default_capacity: int = DEFAULT_CAPACITY
    demand: dict[tuple[str, str, str], float] = field(default_factory=dict)
    pod_cpu: dict[tuple[str, str], float] = field(default_factory=dict)
    storage: dict[tuple[str, str], int] = field(default_factory=dict)
    pod_storage: dict[tuple[str, str], int] = field(default_factory=dict)
    external: dict[tuple[str, str, str], int] = field(default_factory=dict)
    faults: dict[str, Fault] = field(default_factory=dict)
    lock: threading.RLock = field(default_factory=threading.RLock)

    def __post_init__(self) -> None:
        self._counters: dict[str, tuple[float, float, float]] = {}  # uid -> (seconds, cpu, at)

    # ---- scripting ---------------------------------------------------------------------
    def set_demand(self, namespace: str, cluster: str, component: str, cores: float | None) -> None:
        with self.lock:
            _put(self.demand, (namespace, cluster, component), cores)

    def set_pod_cpu(self, namespace: str, pod: str, cores: float | None) -> None:
        with self.lock:
            _put(self.pod_cpu, (namespace, pod), cores)

    def set_storage(self, namespace: str, cluster: str, used: int | str | None) -> None:
        with self.lock:
            _put(self.storage, (namespace, cluster), None if used is None else quantity.units(used))

    def set_pod_storage(self, namespace: str, pod: str, used: int | str | None) -> None:
        with self.lock:
            _put(self.pod_storage, (namespace, pod), None if used is None else quantity.units(used))

    def set_external(self, namespace: str, cluster: str, component: str, replicas: int | None) -> None:
        with self.lock:
            _put(self.external, (namespace, cluster, component), replicas)

    def set_fault(self, target: str, fault: Fault | None) -> None:
        if target not in FAULT_TARGETS:
            raise ValueError(f"fault target must be one of {FAULT_TARGETS}")
        if fault is not None and fault.mode not in FAULT_MODES:
            raise ValueError(f"fault mode must be one of {FAULT_MODES}")
        with self.lock:
            _put(self.faults, target, fault)

    def take_fault(self, target: str) -> Fault | None:
        """The fault to apply to this answer (counting it down), or None."""
        with self.lock:
            fault = self.faults.get(target)
            if fault is None:
                return None
            if fault.times is not None:
                fault.times -= 1
                if fault.times <= 0:
                    del self.faults[target]
            return fault

    def apply(self, body: dict[str, Any], replace: bool = False) -> None:
        """The control endpoint's document; keys "ns/cluster/component", "ns/pod", "ns/cluster";
        a null value removes an entry; replace=True clears everything first."""
        sections = {
            "demand": (self.set_demand, 3, float),
            "pods": (self.set_pod_cpu, 2, float),
            "storage": (self.set_storage, 2, None),
            "pod_storage": (self.set_pod_storage, 2, None),
            "external": (self.set_external, 3, int),
        }
        unknown = set(body) - set(sections)
        if unknown:
            raise ValueError(f"unknown load sections {sorted(unknown)}; known: {sorted(sections)}")
        with self.lock:
            if replace:
                for table in (self.demand, self.pod_cpu, self.storage, self.pod_storage, self.external):
                    table.clear()
            for section, entries in body.items():
                setter, parts, cast = sections[section]
                if not isinstance(entries, dict):
                    raise ValueError(f"{section} must be an object keyed by {'/'.join(['…'] * parts)}")
                for key, value in entries.items():
                    names = str(key).split("/")
                    if len(names) != parts or not all(names):
                        raise ValueError(f"{section}: key {key!r} must have {parts} parts separated by /")
                    if value is not None and cast is not None:
                        value = cast(value)
                    setter(*names, value)

    def describe(self) -> dict[str, Any]:
        with self.lock:
            return {
                "demand": {"/".join(k): v for k, v in self.demand.items()},
                "pods": {"/".join(k): v for k, v in self.pod_cpu.items()},
                "storage": {"/".join(k): v for k, v in self.storage.items()},
                "pod_storage": {"/".join(k): v for k, v in self.pod_storage.items()},
                "external": {"/".join(k): v for k, v in self.external.items()},
                "faults": {t: vars(f) for t, f in self.faults.items()},
            }

    # ---- the world as measured -----------------------------------------------------------
    def instances(self, store: Store, now: float | None = None) -> list[Instance]:
        """Every running tikv/tidb instance with its current usage, counters advanced to now."""
        now = time.monotonic() if now is None else now
        clusters = {(tc["metadata"]["namespace"], tc["metadata"]["name"]): tc for tc in tidb_clusters(store)}
        found: list[Instance] = []
        for pod in store.all(store.builtin("pods")):
            name, component = cluster_of(pod), component_of(pod)
            ns = pod["metadata"]["namespace"]
            tc = clusters.get((ns, name or ""))
            if tc is None or component not in METRIC_COMPONENTS or not _running(pod):
                continue
            base_ns, base = base_of(tc)
            capacity = self.default_capacity
            storage = ((((tc.get("spec") or {}).get("tikv") or {}).get("requests")) or {}).get("storage")
            if storage is not None:
                try:
                    capacity = quantity.units(storage)
                except ValueError:
                    pass
            found.append(
                Instance(
                    namespace=ns,
                    pod=pod["metadata"]["name"],
                    uid=pod["metadata"]["uid"],
                    cluster=name or "",
                    base_namespace=base_ns,
                    base=base,
                    component=component or "",
                    quota=_cores(pod),
                    capacity=capacity if component == "tikv" else 0,
                    store_state=(pod["metadata"].get("annotations") or {}).get(STORE_STATE_ANNOTATION, "Up"),
                )
            )
        with self.lock:
            self._distribute(found)
            self._advance_counters(found, now)
        return sorted(found, key=lambda i: (i.base_namespace, i.base, i.component, i.namespace, i.pod))

    def _distribute(self, found: list[Instance]) -> None:
        families: dict[tuple[str, str, str], list[Instance]] = {}
        for inst in found:
            families.setdefault((inst.base_namespace, inst.base, inst.component), []).append(inst)
        for key, members in families.items():
            for inst, cpu in _assign(members, self.pod_cpu, self.demand.get(key, 0.0), "quota"):
                inst.cpu = cpu
            if key[2] == "tikv":
                for inst, used in _assign(members, self.pod_storage, self.storage.get(key[:2], 0), "capacity"):
                    inst.used = int(used)

    def _advance_counters(self, found: list[Instance], now: float) -> None:
        live = set()
        for inst in found:
            live.add(inst.uid)
            seconds, cpu, at = self._counters.get(inst.uid, (0.0, inst.cpu, now))
            seconds += cpu * max(0.0, now - at)
            # Callers read the clock before the lock: a later reading may already be stored, and
            # going back to an earlier one would count that stretch twice.
            self._counters[inst.uid] = (seconds, inst.cpu, max(now, at))
            inst.cpu_seconds = seconds
        for uid in [u for u in self._counters if u not in live]:
            del self._counters[uid]


def _put(table: dict[Any, Any], key: Any, value: Any) -> None:
    if value is None:
        table.pop(key, None)
    else:
        table[key] = value
