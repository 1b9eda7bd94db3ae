"""In-memory object store with apiserver semantics: one global resourceVersion, watch log.

Every write goes through `Store` under one lock and appends one watch event, so the HTTP
layer, KWOK, the scheduler and the controllers all see the same history a real cluster's
watchers would. Stored objects are never mutated after they are committed: writers build a
new dict, which lets readers serialize them outside the lock.

With a data directory the store is kept on disk (sim/kube/journal.py) and a new Store on the
same directory is the same cluster: objects, uids and resourceVersions continue. Its watch
window then starts at the restored resourceVersion, as a restarted kube-apiserver's watch
cache starts at its initial list: a watch from an older resourceVersion gets 410 Gone.

Simplifications (documented, deliberate): deletion is immediate unless the object carries
finalizers (no graceful pod termination); garbage collection of owned objects and of pods on
a deleted node runs synchronously inside the delete; a namespace's contents go with it at once.
"""

from __future__ import annotations

import json
import random
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sim.kube import disruption
from sim.kube.errors import ApiError, already_exists, bad_request, conflict, invalid, not_found
from sim.kube.journal import COMPACT, Journal
from sim.kube.patch import PatchError, json_patch, merge_patch, strategic_merge_patch
from sim.kube.selectors import FieldRequirement, Requirement, fields_match, labels_match

Obj = dict[str, Any]
GroupResource = tuple[str, str]  # (group, plural): the storage identity of a resource
NOT_READY_TAINT = "node.kubernetes.io/not-ready"  # v1.TaintNodeNotReady


@dataclass(frozen=True)
class ResourceType:
    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool
    status_subresource: bool = True
    singular: str = ""
    short_names: tuple[str, ...] = ()
    builtin: bool = True

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def list_kind(self) -> str:
        return f"{self.kind}List"

    @property
    def gr(self) -> GroupResource:
        return (self.group, self.plural)


BUILTIN_TYPES: list[ResourceType] = [
    ResourceType("", "v1", "namespaces", "Namespace", False, short_names=("ns",)),
    ResourceType("", "v1", "nodes", "Node", False, short_names=("no",)),
    ResourceType("", "v1", "pods", "Pod", True, short_names=("po",)),
    ResourceType("", "v1", "events", "Event", True, status_subresource=False, short_names=("ev",)),
    ResourceType("", "v1", "secrets", "Secret", True, status_subresource=False),
    ResourceType("", "v1", "configmaps", "ConfigMap", True, status_subresource=False, short_names=("cm",)),
    ResourceType("", "v1", "services", "Service", True, short_names=("svc",)),
    ResourceType("", "v1", "serviceaccounts", "ServiceAccount", True, status_subresource=False, short_names=("sa",)),
    # Volume topology: the scheduler's VolumeZone/VolumeBinding read these.
    ResourceType("", "v1", "persistentvolumes", "PersistentVolume", False, short_names=("pv",)),
    ResourceType("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", True, short_names=("pvc",)),
    ResourceType(
        "storage.k8s.io", "v1", "storageclasses", "StorageClass", False, status_subresource=False, short_names=("sc",)
    ),
    ResourceType("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", True, short_names=("pdb",)),
    ResourceType("apps", "v1", "deployments", "Deployment", True, short_names=("deploy",)),
    ResourceType("apps", "v1", "replicasets", "ReplicaSet", True, short_names=("rs",)),
    ResourceType("apps", "v1", "daemonsets", "DaemonSet", True, short_names=("ds",)),
    ResourceType("apps", "v1", "statefulsets", "StatefulSet", True, short_names=("sts",)),
    ResourceType("coordination.k8s.io", "v1", "leases", "Lease", True, status_subresource=False),
    ResourceType("events.k8s.io", "v1", "events", "Event", True, status_subresource=False, short_names=("ev",)),
    ResourceType(
        "apiextensions.k8s.io",
        "v1",
        "customresourcedefinitions",
        "CustomResourceDefinition",
        False,
        short_names=("crd", "crds"),
    ),
]
# `kubectl get all` lists the resources in the "all" category, as on a real cluster.
ALL_CATEGORY = {
    ("", "pods"),
    ("", "services"),
    ("apps", "deployments"),
    ("apps", "replicasets"),
    ("apps", "daemonsets"),
    ("apps", "statefulsets"),
}
DEFAULT_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")

_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_NAME_CHARS = "bcdfghjklmnpqrstvwxz2456789"  # the apiserver's generateName alphabet
# Pod spec fields an update may change (everything else is immutable on a real apiserver).
_POD_MUTABLE_SPEC = ("tolerations", "activeDeadlineSeconds", "terminationGracePeriodSeconds", "schedulingGates")


def _body_of(obj: Obj) -> Obj:
    """The part of an object whose change bumps metadata.generation: all but metadata and status."""
    return {k: v for k, v in obj.items() if k not in ("metadata", "status", "apiVersion", "kind")}


def now_rfc3339() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def clone(obj: Any) -> Any:
    """Deep copy of JSON data; faster than copy.deepcopy for these trees."""
    return json.loads(json.dumps(obj))


@dataclass
class WatchEvent:
    rv: int
    gr: GroupResource
    type: str  # ADDED, MODIFIED, DELETED
    obj: Obj
    old: Obj | None  # previous state, so selector watches can turn MODIFIED into ADDED/DELETED
    raw: str | None = None  # obj as JSON, encoded once for the journal and every watcher

    def encoded(self) -> str:
        if self.raw is None:  # two watchers racing here encode the same text: harmless
            self.raw = COMPACT.encode(self.obj)
        return self.raw


@dataclass
class Store:
    event_log_size: int = 50_000
    lock: threading.RLock = field(default_factory=threading.RLock)
    rv: int = 1
    data_dir: Path | None = None  # None: memory only
    fsync: bool = True
    compact_after: int = 100_000  # journal records before a snapshot replaces them

    def __post_init__(self) -> None:
        self.cond = threading.Condition(self.lock)
        self.types: dict[tuple[str, str, str], ResourceType] = {}
        self.storage: dict[GroupResource, dict[tuple[str, str], Obj]] = {}
        self.events: list[WatchEvent] = []
        self.uids: dict[str, tuple[GroupResource, str, str]] = {}
        self.children: dict[str, set[tuple[GroupResource, str, str]]] = {}
        self.created_seq: dict[str, int] = {}
        self.write_listeners: list[Callable[[], None]] = []
        self._dry = threading.local()  # dryRun=All for the request on this thread
        # The JSON of each stored object as committed (when the journal encoded it), so a list of
        # 30,000 pods joins their texts instead of encoding every pod again.
        self.encoded: dict[GroupResource, dict[tuple[str, str], tuple[Obj, str]]] = {}
        for rt in BUILTIN_TYPES:
            self.register(rt)
        self.journal: Journal | None = None
        if self.data_dir is not None:
            self.journal = Journal(Path(self.data_dir), self.fsync, self.compact_after)
            snapshot, records = self.journal.load()
            self.journal.open()
            if snapshot is not None or records:
                self._restore(snapshot, records)
                return
        for ns in DEFAULT_NAMESPACES:
            self.create(self.builtin("namespaces"), "", {"metadata": {"name": ns}})

    # ---- persistence ----------------------------------------------------------------------
    def _restore(self, snapshot: Obj | None, records: list[Obj]) -> None:
        """Rebuild storage and its indexes from the snapshot and the commits after it."""
        if snapshot is not None:
            self.rv = snapshot["rv"]
            for item in snapshot["objects"]:
                self.storage.setdefault((item["g"], item["p"]), {})[(item["ns"], item["n"])] = item["o"]
                self.created_seq[item["o"]["metadata"]["uid"]] = item["seq"]
        for rec in records:
            bucket = self.storage.setdefault((rec["g"], rec["p"]), {})
            if rec["t"] == "DELETED":
                gone = bucket.pop((rec["ns"], rec["n"]), None)
                if gone is not None:
                    self.created_seq.pop(gone["metadata"]["uid"], None)
            else:
                bucket[(rec["ns"], rec["n"])] = rec["o"]
                if rec["t"] == "ADDED":
                    self.created_seq[rec["o"]["metadata"]["uid"]] = rec["rv"]
            self.rv = rec["rv"]
        for gr, bucket in self.storage.items():
            for (ns, name), obj in bucket.items():
                meta = obj["metadata"]
                self.uids[meta["uid"]] = (gr, ns, name)
                for ref in meta.get("ownerReferences") or []:
                    if ref.get("uid"):
                        self.children.setdefault(ref["uid"], set()).add((gr, ns, name))
        crds = self.builtin("customresourcedefinitions", "apiextensions.k8s.io")
        for crd in list(self.storage[crds.gr].values()):
            self._serve_crd(crd)

    def _snapshot(self) -> Obj:
        return {
            "rv": self.rv,
            "objects": [
                {"g": gr[0], "p": gr[1], "ns": ns, "n": name, "o": obj, "seq": self.order(obj)}
                for gr, bucket in self.storage.items()
                for (ns, name), obj in bucket.items()
            ],
        }

    def sync(self) -> None:
        """Durable up to here (the API server calls it before acknowledging a write)."""
        if self.journal is not None:
            self.journal.sync()

    def close(self) -> None:
        if self.journal is not None:
            with self.lock:
                self.journal.close()

    # ---- resource types -------------------------------------------------------------------
    def register(self, rt: ResourceType) -> None:
        with self.lock:
            self.types[(rt.group, rt.version, rt.plural)] = rt
            self.storage.setdefault(rt.gr, {})

    def builtin(self, plural: str, group: str = "") -> ResourceType:
        for rt in BUILTIN_TYPES:
            if rt.plural == plural and rt.group == group:
                return rt
        raise KeyError(plural)

    def lookup(self, group: str, version: str, plural: str) -> ResourceType | None:
        return self.types.get((group, version, plural))

    # ---- reads ----------------------------------------------------------------------------
    def get(self, rt: ResourceType, ns: str, name: str) -> Obj:
        """The stored object; callers must treat it as read-only."""
        with self.lock:
            obj = self.storage[rt.gr].get((ns, name))
            if obj is None:
                raise not_found(rt.plural, name, rt.group)
            return self._decorate(rt, obj)

    def find(self, rt: ResourceType, ns: str, name: str) -> Obj | None:
        with self.lock:
            return self.storage[rt.gr].get((ns, name))

    def list(
        self,
        rt: ResourceType,
        ns: str | None = None,
        labels: list[Requirement] | None = None,
        fields: list[FieldRequirement] | None = None,
    ) -> tuple[list[Obj], int]:
        with self.lock:
            items = [
                self._decorate(rt, obj)
                for (ons, _), obj in sorted(self.storage[rt.gr].items())
                if (ns is None or ons == ns)
                and (not labels or labels_match(labels, obj))
                and (not fields or fields_match(fields, obj))
            ]
            return items, self.rv

    def encode_items(self, rt: ResourceType, items: list[Obj]) -> str:
        """The JSON array of `items` (as listed: stored objects), reusing their commits' text."""
        encoded = self.encoded.get(rt.gr, {})
        texts = []
        for item in items:
            meta = item["metadata"]
            known = encoded.get((meta.get("namespace", ""), meta["name"]))
            texts.append(known[1] if known is not None and known[0] is item else COMPACT.encode(item))
        return "[" + ",".join(texts) + "]"

    def all(self, rt: ResourceType) -> list[Obj]:
        """Every stored object of a type, unsorted; cheap, for the in-process controllers."""
        with self.lock:
            return list(self.storage[rt.gr].values())

    def order(self, obj: Obj) -> int:
        """Creation order (finer than creationTimestamp's one-second resolution)."""
        return self.created_seq.get(obj["metadata"].get("uid", ""), 0)

    def _decorate(self, rt: ResourceType, obj: Obj) -> Obj:
        # PDB status is computed from the pods when read, as if the disruption controller
        # had just run; it is never stale for the reader.
        if rt.gr == ("policy", "poddisruptionbudgets"):
            pods = [p for (ons, _), p in self.storage[("", "pods")].items() if ons == obj["metadata"].get("namespace")]
            return {**obj, "status": disruption.pdb_status(obj, pods, self._scale_of)}
        return obj

    def _scale_of(self, uid: str) -> int | None:
        found = self.uids.get(uid)
        owner = self.storage.get(found[0], {}).get(found[1:]) if found else None
        if owner is None:
            return None
        if found[0] == ("apps", "daemonsets"):
            return int((owner.get("status") or {}).get("desiredNumberScheduled", 0))
        if found[0] in (("apps", "replicasets"), ("apps", "statefulsets")):
            return int((owner.get("spec") or {}).get("replicas", 1))
        return None

    # ---- writes ---------------------------------------------------------------------------
    @contextmanager
    def dry_run(self, on: bool = True) -> Iterator[None]:
        """Writes inside are validated, defaulted and answered, and nothing is stored, indexed or
        watched (the apiserver's dryRun=All)."""
        self._dry.on = on
        try:
            yield
        finally:
            self._dry.on = False

    @property
    def dry(self) -> bool:
        return getattr(self._dry, "on", False)

    def _commit(self, rt: ResourceType, ns: str, name: str, obj: Obj, kind: str, old: Obj | None) -> Obj:
        if self.dry:
            # the apiserver answers a dry-run write with the object as it would be stored, its
            # resourceVersion unchanged (a create's has none)
            if old is not None:
                obj["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"]
            return obj
        self.rv += 1
        obj["metadata"]["resourceVersion"] = str(self.rv)
        bucket = self.storage[rt.gr]
        if kind == "DELETED":
            bucket.pop((ns, name), None)
        else:
            bucket[(ns, name)] = obj
        event = WatchEvent(self.rv, rt.gr, kind, obj, old)
        encoded = self.encoded.setdefault(rt.gr, {})
        encoded.pop((ns, name), None)
        if self.journal is not None:
            # Logged before anyone can see it: what a reader saw survives a kill.
            record = {"rv": self.rv, "g": rt.gr[0], "p": rt.gr[1], "t": kind, "ns": ns, "n": name}
            if kind == "DELETED":
                self.journal.append(record)
            else:
                self.journal.append(record, event.encoded())
                encoded[(ns, name)] = (obj, event.encoded())
            if self.journal.due():
                self.journal.compact(self._snapshot())
        self.events.append(event)
        if len(self.events) > 2 * self.event_log_size:
            del self.events[: len(self.events) - self.event_log_size]
        self.cond.notify_all()
        for listener in self.write_listeners:
            listener()
        return obj

    def _validate_name(self, rt: ResourceType, name: str) -> None:
        if rt.builtin:
            pattern, limit = (_DNS_LABEL, 63) if rt.plural == "namespaces" else (_DNS_SUBDOMAIN, 253)
            ok = len(name) <= limit and bool(pattern.match(name))
        else:
            ok = name not in (".", "..") and "/" not in name and "%" not in name
        if not ok:
            raise invalid(
                rt.kind,
                name,
                "metadata.name",
                f'Invalid value: "{name}": a lowercase RFC 1123 name must consist of lower '
                "case alphanumeric characters, '-' or '.', and must start and end with an "
                "alphanumeric character",
            )

    def create(self, rt: ResourceType, ns: str, body: Obj) -> Obj:
        if not isinstance(body, dict):
            raise bad_request("the request body must be a JSON object")
        obj = body
        meta = obj.setdefault("metadata", {})
        if not isinstance(meta, dict):
            raise bad_request("metadata must be an object")
        with self.lock:
            if rt.namespaced:
                if meta.get("namespace") not in (None, "", ns):
                    raise bad_request(
                        "the namespace of the provided object does not match the namespace sent on the request"
                    )
                if ("", ns) not in self.storage[("", "namespaces")]:
                    raise not_found("namespaces", ns)
                meta["namespace"] = ns
            else:
                meta.pop("namespace", None)
            name = meta.get("name") or ""
            if not name:
                prefix = meta.get("generateName")
                if not prefix:
                    raise invalid(rt.kind, "", "metadata.name", "Required value: name or generateName is required")
                for _ in range(16):
                    name = prefix + "".join(random.choice(_NAME_CHARS) for _ in range(5))
                    if (ns, name) not in self.storage[rt.gr]:
                        break
            self._validate_name(rt, name)
            key = (ns if rt.namespaced else "", name)
            if key in self.storage[rt.gr]:
                raise already_exists(rt.plural, name, rt.group)
            obj["apiVersion"] = obj.get("apiVersion") or rt.api_version
            obj["kind"] = rt.kind
            meta["name"] = name
            meta["uid"] = str(uuid.uuid4())
            meta["creationTimestamp"] = now_rfc3339()
            meta["generation"] = 1
            for transient in ("deletionTimestamp", "deletionGracePeriodSeconds", "resourceVersion", "selfLink"):
                meta.pop(transient, None)
            self._prepare_for_create(rt, obj)
            if self.dry:
                return self._decorate(rt, self._commit(rt, key[0], name, obj, "ADDED", None))
            self.created_seq[meta["uid"]] = self.rv + 1
            self.uids[meta["uid"]] = (rt.gr, key[0], name)
            for ref in meta.get("ownerReferences") or []:
                if ref.get("uid"):
                    self.children.setdefault(ref["uid"], set()).add((rt.gr, key[0], name))
            committed = self._commit(rt, key[0], name, obj, "ADDED", None)
            self._after_create(rt, committed)
            return self._decorate(rt, committed)

    def _prepare_for_create(self, rt: ResourceType, obj: Obj) -> None:
        if rt.gr == ("", "pods"):
            spec = obj.setdefault("spec", {})
            if not spec.get("containers"):
                raise invalid("Pod", obj["metadata"]["name"], "spec.containers", "Required value")
            spec.setdefault("schedulerName", "default-scheduler")
            spec.setdefault("restartPolicy", "Always")
            spec.setdefault("dnsPolicy", "ClusterFirst")
            spec.setdefault("terminationGracePeriodSeconds", 30)
            spec.setdefault("priority", 0)
            obj["status"] = {"phase": "Pending"}
        elif rt.gr == ("", "namespaces"):
            obj["status"] = {"phase": "Active"}
            obj.setdefault("spec", {"finalizers": ["kubernetes"]})
            obj["metadata"].setdefault("labels", {})["kubernetes.io/metadata.name"] = obj["metadata"]["name"]
        elif rt.gr == ("apiextensions.k8s.io", "customresourcedefinitions"):
            self._validate_crd(obj)
        elif rt.gr == ("", "nodes"):
            # Nodes may carry status on create (kubelet and KWOK register that way). The
            # TaintNodesByCondition admission plugin (plugin/pkg/admission/nodetaint) taints every
            # new Node not-ready:NoSchedule unless a taint of that key and effect is there: else a
            # pod could bind to a node not Ready yet before the node lifecycle controller's first
            # pass. One created Ready loses it on that pass, in milliseconds; here it is left
            # untainted, which differs only in those milliseconds.
            spec = obj.setdefault("spec", {})
            taints = spec.get("taints") or []
            conditions = (obj.get("status") or {}).get("conditions") or []
            ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
            if not ready and not any(
                t.get("key") == NOT_READY_TAINT and t.get("effect") == "NoSchedule" for t in taints
            ):
                spec["taints"] = [*taints, {"key": NOT_READY_TAINT, "effect": "NoSchedule"}]
        elif rt.status_subresource:
            obj.pop("status", None)

    def _after_create(self, rt: ResourceType, obj: Obj) -> None:
        if rt.gr == ("apiextensions.k8s.io", "customresourcedefinitions"):
            self._serve_crd(obj)

    def replace(self, rt: ResourceType, ns: str, name: str, body: Obj, subresource: str | None = None) -> Obj:
        """PUT: a stale metadata.resourceVersion is refused with 409 Conflict."""
        if not isinstance(body, dict):
            raise bad_request("the request body must be a JSON object")
        with self.lock:
            current = self.storage[rt.gr].get((ns, name))
            if current is None:
                raise not_found(rt.plural, name, rt.group)
            given = (body.get("metadata") or {}).get("resourceVersion")
            if given and given != current["metadata"]["resourceVersion"]:
                raise conflict(rt.plural, name, rt.group)
            if (body.get("metadata") or {}).get("name") not in (None, name):
                raise bad_request("the name of the object does not match the name on the URL")
            return self._write(rt, ns, name, current, clone(body), subresource)

    def patch(
        self, rt: ResourceType, ns: str, name: str, content_type: str, body: Any, subresource: str | None = None
    ) -> Obj:
        with self.lock:
            current = self.storage[rt.gr].get((ns, name))
            if current is None:
                raise not_found(rt.plural, name, rt.group)
            base = clone(current)
            try:
                if content_type == "application/json-patch+json":
                    new = json_patch(base, body)
                elif content_type == "application/merge-patch+json":
                    new = merge_patch(base, body)
                elif content_type == "application/strategic-merge-patch+json":
                    if not rt.builtin:
                        raise ApiError(
                            415, "UnsupportedMediaType", "strategic merge patch is not supported for custom resources"
                        )
                    new = strategic_merge_patch(base, body)
                else:
                    raise ApiError(
                        415,
                        "UnsupportedMediaType",
                        "the body of the request was in an unknown format - accepted "
                        "media types include: application/json-patch+json, "
                        "application/merge-patch+json, "
                        "application/strategic-merge-patch+json",
                    )
            except PatchError as exc:
                raise ApiError(422, "Invalid", str(exc)) from None
            if not isinstance(new, dict):
                raise bad_request("patch did not produce an object")
            # A resourceVersion in the patch is a precondition, as on the real apiserver.
            given = (new.get("metadata") or {}).get("resourceVersion")
            if given and given != current["metadata"]["resourceVersion"]:
                raise conflict(rt.plural, name, rt.group)
            return self._write(rt, ns, name, current, new, subresource)

    def mutate(
        self, rt: ResourceType, ns: str, name: str, fn: Callable[[Obj], Obj | None], subresource: str | None = None
    ) -> Obj | None:
        """Read-modify-write for the in-process actors: fn gets a private copy; None = no-op.
        For the status subresource only the status is copied (fn may change nothing else)."""
        with self.lock:
            current = self.storage[rt.gr].get((ns, name))
            if current is None:
                return None
            if subresource == "status":
                draft = {**current, "metadata": dict(current["metadata"])}
                if "status" in current:
                    draft["status"] = clone(current["status"])
                new = fn(draft)
            else:
                new = fn(clone(current))
            if new is None or new == current:
                return None
            return self._write(rt, ns, name, current, new, subresource)

    def _write(self, rt: ResourceType, ns: str, name: str, current: Obj, new: Obj, subresource: str | None) -> Obj:
        meta = new.setdefault("metadata", {})
        old_meta = current["metadata"]
        if subresource == "status":
            # The status endpoint changes status only (plus nothing else of the object). The
            # rest is shared with the stored version: committed objects are never changed.
            merged = {**current, "metadata": dict(old_meta)}
            merged["status"] = new.get("status", {})
            new = merged
        else:
            for keep in (
                "uid",
                "creationTimestamp",
                "namespace",
                "name",
                "deletionTimestamp",
                "deletionGracePeriodSeconds",
                "generation",
            ):
                if keep in old_meta:
                    meta[keep] = old_meta[keep]
                else:
                    meta.pop(keep, None)
            new["apiVersion"] = current.get("apiVersion", rt.api_version)
            new["kind"] = rt.kind
            if rt.status_subresource and "status" in current:
                new["status"] = current["status"]
            elif rt.status_subresource:
                new.pop("status", None)
            if rt.gr == ("", "pods"):
                self._check_pod_update(current, new)
            if _body_of(new) != _body_of(current):
                meta["generation"] = int(old_meta.get("generation", 1)) + 1
            if rt.gr == ("apiextensions.k8s.io", "customresourcedefinitions"):
                self._validate_crd(new)
        meta["resourceVersion"] = old_meta["resourceVersion"]
        if new == current:
            return self._decorate(rt, current)  # no-op writes do not bump resourceVersion
        if self.dry:
            return self._decorate(rt, self._commit(rt, ns, name, new, "MODIFIED", current))
        if subresource != "status":  # the status endpoint keeps the metadata, owners included
            self._reindex_owners(rt, ns, name, current, new)
        committed = self._commit(rt, ns, name, new, "MODIFIED", current)
        if committed["metadata"].get("deletionTimestamp") and not committed["metadata"].get("finalizers"):
            return self._remove(rt, ns, name, "Background")
        if rt.gr == ("apiextensions.k8s.io", "customresourcedefinitions"):
            self._serve_crd(committed)
        return self._decorate(rt, committed)

    def _check_pod_update(self, current: Obj, new: Obj) -> None:
        def frozen(spec: Obj) -> Obj:
            spec = {k: v for k, v in spec.items() if k not in _POD_MUTABLE_SPEC}
            spec["containers"] = [{k: v for k, v in c.items() if k != "image"} for c in spec.get("containers") or []]
            return spec

        if frozen(new.get("spec") or {}) != frozen(current.get("spec") or {}):
            raise invalid(
                "Pod",
                current["metadata"]["name"],
                "spec",
                "Forbidden: pod updates may not change fields other than "
                "`spec.containers[*].image`, `spec.activeDeadlineSeconds`, "
                "`spec.tolerations` (only additions to existing tolerations), "
                "`spec.terminationGracePeriodSeconds`",
            )

    def _reindex_owners(self, rt: ResourceType, ns: str, name: str, old: Obj, new: Obj) -> None:
        key = (rt.gr, ns, name)
        for ref in old["metadata"].get("ownerReferences") or []:
            self.children.get(ref.get("uid", ""), set()).discard(key)
        for ref in new["metadata"].get("ownerReferences") or []:
            if ref.get("uid"):
                self.children.setdefault(ref["uid"], set()).add(key)

    def bind(self, ns: str, name: str, node: str) -> Obj:
        """The pods/binding subresource: set spec.nodeName once and mark PodScheduled."""
        pods = self.builtin("pods")
        with self.lock:
            current = self.storage[pods.gr].get((ns, name))
            if current is None:
                raise not_found("pods", name)
            if current["spec"].get("nodeName"):
                raise ApiError(
                    409,
                    "Conflict",
                    f'Operation cannot be fulfilled on pods/binding "{name}": '
                    f'pod {name} is already assigned to node "{current["spec"]["nodeName"]}"',
                    name=name,
                    kind="pods/binding",
                )
            conditions = [c for c in current["status"].get("conditions") or [] if c.get("type") != "PodScheduled"]
            conditions.append(
                {"type": "PodScheduled", "status": "True", "lastProbeTime": None, "lastTransitionTime": now_rfc3339()}
            )
            # A new version sharing what did not change with the stored one (never changed in place).
            new = {
                **current,
                "metadata": dict(current["metadata"]),
                "spec": {**current["spec"], "nodeName": node},
                "status": {**current["status"], "conditions": conditions},
            }
            return self._commit(pods, ns, name, new, "MODIFIED", current)

    def delete(self, rt: ResourceType, ns: str, name: str, options: Obj | None = None) -> tuple[Obj, bool]:
        """Returns (object, deleted_now); finalizers defer removal (the caller answers 202)."""
        options = options or {}
        with self.lock:
            current = self.storage[rt.gr].get((ns, name))
            if current is None:
                raise not_found(rt.plural, name, rt.group)
            pre = options.get("preconditions") or {}
            if pre.get("uid") and pre["uid"] != current["metadata"]["uid"]:
                raise ApiError(
                    409,
                    "Conflict",
                    f"Precondition failed: UID in precondition: {pre['uid']}, "
                    f"UID in object meta: {current['metadata']['uid']}",
                    name=name,
                    kind=rt.plural,
                )
            if pre.get("resourceVersion") and pre["resourceVersion"] != current["metadata"]["resourceVersion"]:
                raise conflict(rt.plural, name, rt.group)
            propagation = options.get("propagationPolicy") or (
                "Orphan" if options.get("orphanDependents") else "Background"
            )
            if self.dry:
                return self._decorate(rt, clone(current)), not current["metadata"].get("finalizers")
            if current["metadata"].get("finalizers"):
                if current["metadata"].get("deletionTimestamp"):
                    return self._decorate(rt, current), False
                new = clone(current)
                new["metadata"]["deletionTimestamp"] = now_rfc3339()
                new["metadata"]["deletionGracePeriodSeconds"] = 0
                return self._decorate(rt, self._commit(rt, ns, name, new, "MODIFIED", current)), False
            return self._remove(rt, ns, name, propagation), True

    def _remove(self, rt: ResourceType, ns: str, name: str, propagation: str) -> Obj:
        current = self.storage[rt.gr][(ns, name)]
        gone = clone(current)
        decorated = self._decorate(rt, gone)
        self._commit(rt, ns, name, gone, "DELETED", current)
        uid = current["metadata"]["uid"]
        self.uids.pop(uid, None)
        self.created_seq.pop(uid, None)
        for ref in current["metadata"].get("ownerReferences") or []:
            self.children.get(ref.get("uid", ""), set()).discard((rt.gr, ns, name))
        dependents = self.children.pop(uid, set())
        if propagation != "Orphan":
            for gr, cns, cname in sorted(dependents):
                child = self.storage.get(gr, {}).get((cns, cname))
                if child is None:
                    continue
                owners = [r.get("uid") for r in child["metadata"].get("ownerReferences") or []]
                if any(o in self.uids for o in owners if o != uid):
                    continue  # another owner still exists: the garbage collector keeps it
                self._delete_internal(gr, cns, cname)
        self._after_delete(rt, current)
        return decorated

    def _delete_internal(self, gr: GroupResource, ns: str, name: str) -> None:
        rt = next(t for t in self.types.values() if t.gr == gr)
        if (ns, name) in self.storage[gr]:
            self.delete(rt, ns, name)

    def _after_delete(self, rt: ResourceType, obj: Obj) -> None:
        name = obj["metadata"]["name"]
        if rt.gr == ("", "nodes"):
            # The pod garbage collector removes pods bound to a node that no longer exists.
            for (pns, pname), pod in list(self.storage[("", "pods")].items()):
                if pod["spec"].get("nodeName") == name:
                    self._delete_internal(("", "pods"), pns, pname)
        elif rt.gr == ("", "namespaces"):
            for gr, bucket in list(self.storage.items()):
                for ons, oname in [k for k in bucket if k[0] == name and gr != ("", "namespaces")]:
                    self._delete_internal(gr, ons, oname)
        elif rt.gr == ("apiextensions.k8s.io", "customresourcedefinitions"):
            spec = obj.get("spec") or {}
            gr = (spec.get("group", ""), (spec.get("names") or {}).get("plural", ""))
            for ons, oname in list(self.storage.get(gr, {})):
                self._delete_internal(gr, ons, oname)
            for key in [k for k, t in self.types.items() if t.gr == gr and not t.builtin]:
                del self.types[key]
            self.storage.pop(gr, None)

    # ---- custom resource definitions ------------------------------------------------------
    def _validate_crd(self, obj: Obj) -> None:
        spec = obj.get("spec") or {}
        names = spec.get("names") or {}
        name = obj["metadata"]["name"]
        if not spec.get("group") or not names.get("plural") or not names.get("kind"):
            raise invalid(
                "CustomResourceDefinition",
                name,
                "spec",
                "Required value: group, names.plural and names.kind are required",
            )
        if name != f"{names['plural']}.{spec['group']}":
            raise invalid(
                "CustomResourceDefinition",
                name,
                "metadata.name",
                f'Invalid value: "{name}": must be spec.names.plural+"."+spec.group',
            )
        if spec.get("scope") not in ("Namespaced", "Cluster"):
            raise invalid(
                "CustomResourceDefinition", name, "spec.scope", 'Unsupported value: must be "Namespaced" or "Cluster"'
            )
        if not spec.get("versions"):
            raise invalid("CustomResourceDefinition", name, "spec.versions", "Required value")

    def _serve_crd(self, crd: Obj) -> None:
        spec = crd["spec"]
        names = spec["names"]
        for version in spec.get("versions") or []:
            if not version.get("served", True):
                continue
            self.register(
                ResourceType(
                    spec["group"],
                    version["name"],
                    names["plural"],
                    names["kind"],
                    spec["scope"] == "Namespaced",
                    status_subresource="status" in (version.get("subresources") or {}),
                    singular=names.get("singular", names["kind"].lower()),
                    short_names=tuple(names.get("shortNames") or ()),
                    builtin=False,
                )
            )
        if crd.get("status", {}).get("acceptedNames"):
            return
        stamp = now_rfc3339()
        status = {
            "acceptedNames": {
                "plural": names["plural"],
                "kind": names["kind"],
                "singular": names.get("singular", names["kind"].lower()),
                "listKind": names.get("listKind", names["kind"] + "List"),
            },
            "conditions": [
                {
                    "type": "NamesAccepted",
                    "status": "True",
                    "reason": "NoConflicts",
                    "message": "no conflicts found",
                    "lastTransitionTime": stamp,
                },
                {
                    "type": "Established",
                    "status": "True",
                    "reason": "InitialNamesAccepted",
                    "message": "the initial names have been accepted",
                    "lastTransitionTime": stamp,
                },
            ],
            "storedVersions": [v["name"] for v in spec["versions"] if v.get("storage")]
            or [spec["versions"][0]["name"]],
        }
        crds = self.builtin("customresourcedefinitions", "apiextensions.k8s.io")
        current = self.storage[crds.gr][("", crd["metadata"]["name"])]
        new = clone(current)
        new["status"] = status
        self._commit(crds, "", crd["metadata"]["name"], new, "MODIFIED", current)

    # ---- watch ----------------------------------------------------------------------------
    def oldest_rv(self) -> int:
        """The oldest resourceVersion a watch can start from (the apiserver's "oldest-1")."""
        with self.lock:
            return self.events[0].rv - 1 if self.events else self.rv

    def events_after(self, rv: int) -> tuple[list[WatchEvent], bool]:
        """Events with resourceVersion > rv; False when rv is older than the kept log (410)."""
        with self.lock:
            if rv < self.oldest_rv():
                return [], False
            if not self.events:
                return [], True
            start = max(0, rv - self.events[0].rv + 1)
            return self.events[start:], True

    # ---- eviction -------------------------------------------------------------------------
    def evict(self, ns: str, name: str) -> None:
        pods = self.builtin("pods")
        with self.lock:
            pod = self.storage[pods.gr].get((ns, name))
            if pod is None:
                raise not_found("pods", name)
            pdbs = [
                p
                for (pns, _), p in self.storage[("policy", "poddisruptionbudgets")].items()
                if pns == ns and disruption.selects(p, pod)
            ]
            if len(pdbs) > 1:
                raise ApiError(
                    500,
                    "InternalError",
                    "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
                )
            if pdbs and not disruption.can_ignore_budget(pod):
                ns_pods = [p for (pns, _), p in self.storage[pods.gr].items() if pns == ns]
                status = disruption.pdb_status(pdbs[0], ns_pods, self._scale_of)
                healthy = disruption.is_healthy(pod)
                allowed = (
                    status["disruptionsAllowed"] > 0
                    if healthy
                    else status["currentHealthy"] >= status["desiredHealthy"]
                )
                if not allowed:
                    raise ApiError(
                        429,
                        "TooManyRequests",
                        "Cannot evict pod as it would violate the pod's disruption budget.",
                        causes=[
                            {
                                "reason": "DisruptionBudget",
                                "message": f"The disruption budget {pdbs[0]['metadata']['name']} needs "
                                f"{status['desiredHealthy']} healthy pods and has "
                                f"{status['currentHealthy']} currently",
                            }
                        ],
                    )
            self.delete(pods, ns, name)
