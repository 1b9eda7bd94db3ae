"""Server-side printing: the meta.k8s.io Table kubectl asks for (`Accept: ...;as=Table;...`).

kubectl does not format objects itself: it asks the apiserver for a Table and prints its
cells. The columns here are the ones `kubectl get` shows on a real cluster for the kinds the
demo has (nodes, pods, deployments, replicasets, events, namespaces, PDBs, CRDs); custom
resources get their CRD's additionalPrinterColumns; anything else gets NAME and AGE.
Columns with priority 1 appear only with `-o wide`.
"""

from __future__ import annotations

import calendar
import json
import re
import time
from collections.abc import Callable
from typing import Any

Obj = dict[str, Any]
Column = tuple[str, str, int, str]  # (name, type, priority, format)
TABLE_VERSIONS = ("v1", "v1beta1")
_NONE = "<none>"


def table_version(accept: str | None) -> str | None:
    """The meta.k8s.io Table version the Accept header asks for, or None for plain JSON.

    Media ranges are tried in order, as a client lists its preferences."""
    for media in (accept or "").split(","):
        params = dict(p.strip().split("=", 1) for p in media.split(";")[1:] if "=" in p)
        if params.get("as") == "Table" and params.get("g") == "meta.k8s.io" and params.get("v") in TABLE_VERSIONS:
            return params["v"]
    return None


# ---- cells -------------------------------------------------------------------------------
def _parse_time(stamp: str | None) -> float | None:
    if not stamp:
        return None
    try:
        return calendar.timegm(time.strptime(stamp[:19], "%Y-%m-%dT%H:%M:%S"))
    except ValueError:
        return None


def human_duration(seconds: float) -> str:
    """Age the way kubectl shows it: 45s, 5m30s, 15m, 3h20m, 20h, 3d4h, 30d, 2y10d."""
    s = int(seconds)
    if s < -1:
        return "<invalid>"
    if s < 0:
        return "0s"
    if s < 120:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        return f"{minutes}m{s % 60}s" if s % 60 else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    hours = minutes // 60
    if hours < 8:
        return f"{hours}h{minutes % 60}m" if minutes % 60 else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    days = hours // 24
    if hours < 24 * 8:
        return f"{days}d{hours % 24}h" if hours % 24 else f"{days}d"
    if days < 365 * 2:
        return f"{days}d"
    years = days // 365
    if days < 365 * 8:
        return f"{years}y{days % 365}d" if days % 365 else f"{years}y"
    return f"{years}y"


def age(stamp: str | None, now: float) -> str:
    then = _parse_time(stamp)
    return "<unknown>" if then is None else human_duration(now - then)


def _meta(obj: Obj) -> Obj:
    return obj.get("metadata") or {}


def _status(obj: Obj) -> Obj:
    return obj.get("status") or {}


def _spec(obj: Obj) -> Obj:
    return obj.get("spec") or {}


# ---- per-kind rows -----------------------------------------------------------------------
NAME: Column = ("Name", "string", 0, "name")
AGE: Column = ("Age", "string", 0, "")


def _node_row(node: Obj, now: float) -> list[Any]:
    status, meta = _status(node), _meta(node)
    ready = next((c.get("status") for c in status.get("conditions") or [] if c.get("type") == "Ready"), None)
    state = {"True": "Ready", "False": "NotReady"}.get(ready or "", "Unknown")
    if _spec(node).get("unschedulable"):
        state += ",SchedulingDisabled"
    labels = meta.get("labels") or {}
    roles = sorted(
        {k.split("/", 1)[1] for k in labels if k.startswith("node-role.kubernetes.io/") and "/" in k}
        | ({labels["kubernetes.io/role"]} if labels.get("kubernetes.io/role") else set())
    )
    info = status.get("nodeInfo") or {}
    addresses = {a.get("type"): a.get("address") for a in status.get("addresses") or []}
    return [
        meta.get("name"),
        state,
        ",".join(r for r in roles if r) or _NONE,
        age(meta.get("creationTimestamp"), now),
        info.get("kubeletVersion", ""),
        addresses.get("InternalIP") or _NONE,
        addresses.get("ExternalIP") or _NONE,
        info.get("osImage") or "<unknown>",
        info.get("kernelVersion") or "<unknown>",
        info.get("containerRuntimeVersion") or "<unknown>",
    ]


def _pod_row(pod: Obj, now: float) -> list[Any]:
    status, meta, spec = _status(pod), _meta(pod), _spec(pod)
    containers = spec.get("containers") or []
    statuses = status.get("containerStatuses") or []
    reason = status.get("reason") or status.get("phase") or "Pending"
    for cs in statuses:
        state = cs.get("state") or {}
        waiting, terminated = state.get("waiting") or {}, state.get("terminated") or {}
        if waiting.get("reason"):
            reason = waiting["reason"]
        elif terminated.get("reason"):
            reason = terminated["reason"]
    if status.get("phase") == "Succeeded" and not status.get("reason"):
        reason = "Completed"
    if meta.get("deletionTimestamp"):
        reason = "Unknown" if status.get("reason") == "NodeLost" else "Terminating"
    ready = sum(1 for cs in statuses if cs.get("ready"))
    restarts = sum(int(cs.get("restartCount") or 0) for cs in statuses)
    gates = spec.get("readinessGates") or []
    gate_status = {c.get("type"): c.get("status") for c in status.get("conditions") or []}
    gates_cell = (
        f"{sum(1 for g in gates if gate_status.get(g.get('conditionType')) == 'True')}/{len(gates)}" if gates else _NONE
    )
    return [
        meta.get("name"),
        f"{ready}/{len(containers)}",
        reason,
        restarts,
        age(meta.get("creationTimestamp"), now),
        status.get("podIP") or _NONE,
        spec.get("nodeName") or _NONE,
        status.get("nominatedNodeName") or _NONE,
        gates_cell,
    ]


def _containers(spec: Obj) -> tuple[str, str]:
    containers = ((spec.get("template") or {}).get("spec") or {}).get("containers") or []
    return (",".join(c.get("name", "") for c in containers), ",".join(c.get("image", "") for c in containers))


def _selector(spec: Obj) -> str:
    selector = spec.get("selector") or {}
    parts = [f"{k}={v}" for k, v in sorted((selector.get("matchLabels") or {}).items())]
    for expr in selector.get("matchExpressions") or []:
        values = ",".join(expr.get("values") or [])
        op = expr.get("operator", "")
        parts.append(
            expr.get("key", "")
            if op == "Exists"
            else f"!{expr.get('key', '')}"
            if op == "DoesNotExist"
            else f"{expr.get('key', '')} {op.lower()} ({values})"
        )
    return ",".join(parts) or _NONE


def _deployment_row(obj: Obj, now: float) -> list[Any]:
    spec, status, meta = _spec(obj), _status(obj), _meta(obj)
    names, images = _containers(spec)
    return [
        meta.get("name"),
        f"{int(status.get('readyReplicas') or 0)}/{int(spec.get('replicas', 1))}",
        int(status.get("updatedReplicas") or 0),
        int(status.get("availableReplicas") or 0),
        age(meta.get("creationTimestamp"), now),
        names,
        images,
        _selector(spec),
    ]


def _replicaset_row(obj: Obj, now: float) -> list[Any]:
    spec, status, meta = _spec(obj), _status(obj), _meta(obj)
    names, images = _containers(spec)
    return [
        meta.get("name"),
        int(spec.get("replicas", 1)),
        int(status.get("replicas") or 0),
        int(status.get("readyReplicas") or 0),
        age(meta.get("creationTimestamp"), now),
        names,
        images,
        _selector(spec),
    ]


def _event_row(ev: Obj, now: float) -> list[Any]:
    meta = _meta(ev)
    # core/v1 and events.k8s.io/v1 name the same facts differently.
    regarding = ev.get("involvedObject") or ev.get("regarding") or {}
    last = (
        ev.get("lastTimestamp")
        or ev.get("deprecatedLastTimestamp")
        or ev.get("eventTime")
        or ev.get("firstTimestamp")
        or meta.get("creationTimestamp")
    )
    first = ev.get("firstTimestamp") or ev.get("deprecatedFirstTimestamp") or ev.get("eventTime") or last
    source = ev.get("source") or ev.get("deprecatedSource") or {}
    component = source.get("component") or ev.get("reportingController") or ev.get("reportingComponent") or ""
    count = int(ev.get("count") or ev.get("deprecatedCount") or (ev.get("series") or {}).get("count") or 1)
    kind = str(regarding.get("kind") or "").lower()
    return [
        age(last, now),
        ev.get("type") or "",
        ev.get("reason") or "",
        f"{kind}/{regarding.get('name', '')}" if kind else regarding.get("name", ""),
        ev.get("message") or ev.get("note") or "",
        regarding.get("fieldPath") or "",
        ",".join(x for x in (component, source.get("host")) if x),
        age(first, now),
        count,
        meta.get("name"),
    ]


def _namespace_row(obj: Obj, now: float) -> list[Any]:
    return [_meta(obj).get("name"), _status(obj).get("phase", "Active"), age(_meta(obj).get("creationTimestamp"), now)]


def _pdb_row(obj: Obj, now: float) -> list[Any]:
    spec, status, meta = _spec(obj), _status(obj), _meta(obj)
    return [
        meta.get("name"),
        str(spec["minAvailable"]) if "minAvailable" in spec else "N/A",
        str(spec["maxUnavailable"]) if "maxUnavailable" in spec else "N/A",
        int(status.get("disruptionsAllowed") or 0),
        age(meta.get("creationTimestamp"), now),
    ]


def _crd_row(obj: Obj, now: float) -> list[Any]:
    return [_meta(obj).get("name"), _meta(obj).get("creationTimestamp", "")]


def _default_row(obj: Obj, now: float) -> list[Any]:
    return [_meta(obj).get("name"), age(_meta(obj).get("creationTimestamp"), now)]


Printer = tuple[list[Column], Callable[[Obj, float], list[Any]]]
BUILTIN_PRINTERS: dict[tuple[str, str], Printer] = {
    ("", "nodes"): (
        [
            NAME,
            ("Status", "string", 0, ""),
            ("Roles", "string", 0, ""),
            AGE,
            ("Version", "string", 0, ""),
            ("Internal-IP", "string", 1, ""),
            ("External-IP", "string", 1, ""),
            ("OS-Image", "string", 1, ""),
            ("Kernel-Version", "string", 1, ""),
            ("Container-Runtime", "string", 1, ""),
        ],
        _node_row,
    ),
    ("", "pods"): (
        [
            NAME,
            ("Ready", "string", 0, ""),
            ("Status", "string", 0, ""),
            ("Restarts", "string", 0, ""),
            AGE,
            ("IP", "string", 1, ""),
            ("Node", "string", 1, ""),
            ("Nominated Node", "string", 1, ""),
            ("Readiness Gates", "string", 1, ""),
        ],
        _pod_row,
    ),
    ("apps", "deployments"): (
        [
            NAME,
            ("Ready", "string", 0, ""),
            ("Up-to-date", "integer", 0, ""),
            ("Available", "integer", 0, ""),
            AGE,
            ("Containers", "string", 1, ""),
            ("Images", "string", 1, ""),
            ("Selector", "string", 1, ""),
        ],
        _deployment_row,
    ),
    ("apps", "replicasets"): (
        [
            NAME,
            ("Desired", "integer", 0, ""),
            ("Current", "integer", 0, ""),
            ("Ready", "integer", 0, ""),
            AGE,
            ("Containers", "string", 1, ""),
            ("Images", "string", 1, ""),
            ("Selector", "string", 1, ""),
        ],
        _replicaset_row,
    ),
    ("", "events"): (
        [
            ("Last Seen", "string", 0, ""),
            ("Type", "string", 0, ""),
            ("Reason", "string", 0, ""),
            ("Object", "string", 0, ""),
            ("Message", "string", 0, ""),
            ("Subobject", "string", 1, ""),
            ("Source", "string", 1, ""),
            ("First Seen", "string", 1, ""),
            ("Count", "integer", 1, ""),
            ("Name", "string", 1, "name"),
        ],
        _event_row,
    ),
    ("", "namespaces"): ([NAME, ("Status", "string", 0, ""), AGE], _namespace_row),
    ("policy", "poddisruptionbudgets"): (
        [
            NAME,
            ("Min Available", "string", 0, ""),
            ("Max Unavailable", "string", 0, ""),
            ("Allowed Disruptions", "integer", 0, ""),
            AGE,
        ],
        _pdb_row,
    ),
    ("apiextensions.k8s.io", "customresourcedefinitions"): ([NAME, ("Created At", "date", 0, "")], _crd_row),
}
BUILTIN_PRINTERS[("events.k8s.io", "events")] = BUILTIN_PRINTERS[("", "events")]
DEFAULT_PRINTER: Printer = ([NAME, AGE], _default_row)


# ---- CRD additionalPrinterColumns --------------------------------------------------------
_STEP = re.compile(r"\.((?:\\\.|[^.\[])+)|\[(\*|-?\d+)\]")


def json_path(obj: Any, path: str) -> list[Any]:
    """The values a simple JSONPath (`.a.b`, `.a[0].b`, `.a[*].b`, `{.a}`) selects."""
    path = path.strip()
    if path.startswith("{") and path.endswith("}"):
        path = path[1:-1]
    values = [obj]
    pos = 0
    while pos < len(path):
        match = _STEP.match(path, pos)
        if match is None:
            return []
        pos = match.end()
        key, index = match.group(1), match.group(2)
        nxt: list[Any] = []
        for value in values:
            if key is not None and isinstance(value, dict) and key.replace("\\.", ".") in value:
                nxt.append(value[key.replace("\\.", ".")])
            elif index == "*" and isinstance(value, list):
                nxt.extend(value)
            elif index not in (None, "*") and isinstance(value, list) and -len(value) <= int(index) < len(value):
                nxt.append(value[int(index)])
        values = nxt
    return values


def crd_printer(version: Obj) -> Printer:
    """Columns from a CRD version's additionalPrinterColumns (NAME, AGE when it has none)."""
    specs = version.get("additionalPrinterColumns") or []
    if not specs:
        return DEFAULT_PRINTER
    columns: list[Column] = [NAME] + [
        (c.get("name", ""), c.get("type", "string"), int(c.get("priority") or 0), c.get("format", "")) for c in specs
    ]

    def row(obj: Obj, now: float) -> list[Any]:
        cells: list[Any] = [_meta(obj).get("name")]
        for spec in specs:
            found = json_path(obj, spec.get("jsonPath", ""))
            if not found:
                cells.append(None)  # kubectl prints <none>
            elif spec.get("type") == "date":
                cells.append(age(found[0], now) if isinstance(found[0], str) else None)
            elif len(found) == 1 and not isinstance(found[0], (dict, list)):
                cells.append(found[0])
            else:
                cells.append(",".join(v if isinstance(v, str) else json.dumps(v, separators=(",", ":")) for v in found))
        return cells

    return columns, row


# ---- the Table ---------------------------------------------------------------------------
def _row_object(obj: Obj, include: str, api_version: str) -> Obj | None:
    if include == "None":
        return None
    if include == "Object":
        return obj
    meta = {k: v for k, v in _meta(obj).items() if k != "managedFields"}
    return {"kind": "PartialObjectMetadata", "apiVersion": api_version, "metadata": meta}


def column_definitions(columns: list[Column]) -> list[Obj]:
    return [
        {"name": name, "type": kind, "format": fmt, "description": "", "priority": priority}
        for name, kind, priority, fmt in columns
    ]


def table(
    printer: Printer,
    objects: list[Obj],
    *,
    version: str = "v1",
    include: str = "Metadata",
    list_meta: Obj | None = None,
    headers: bool = True,
    now: float | None = None,
) -> Obj:
    """A Table of `objects`; headers=False leaves out the columns (watch events after the first)."""
    columns, row = printer
    now = time.time() if now is None else now
    api_version = f"meta.k8s.io/{version}"
    rows = []
    for obj in objects:
        entry: Obj = {"cells": row(obj, now)}
        ref = _row_object(obj, include, api_version)
        if ref is not None:
            entry["object"] = ref
        rows.append(entry)
    return {
        "kind": "Table",
        "apiVersion": api_version,
        "metadata": list_meta or {},
        "columnDefinitions": column_definitions(columns) if headers else [],
        "rows": rows,
    }
