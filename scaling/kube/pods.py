"""Pods as growth sees them, from the API's JSON (camelCase dicts).

Effective requests follow the scheduler: max(sum of app containers + sidecars, each init
container + the sidecars started before it) + spec.overhead. A container with limits but no
requests gets requests = limits (what the API server defaults).

A pod that requests nothing still takes room on a real node, so growth counts at least
MIN_POD_CPU_M and MIN_POD_MEMORY per dimension left at zero, and always one pod slot; without
this, thousands of request-less pods would be planned onto a single node.

The scheduler's resource scores read cpu and memory otherwise (scaling.kube.scheduling.scoring):
the real requests, and the non-zero ones where a container missing a request counts 100m or
200 MiB. `score_requests` gives both; a pod carries them in PodInfo.score_requests.
"""

from __future__ import annotations

import hashlib
from datetime import datetime
from typing import Any

from scaling.kube.affinity import pod_spreads, required_node_affinity, topology_spreads
from scaling.kube.memo import ReprMemo
from scaling.kube.models import PodInfo, Resources, Toleration
from scaling.kube.quantity import cpu_millis, memory_bytes
from scaling.kube.scheduling.scoring import DEFAULT_MEMORY_REQUEST, DEFAULT_MILLI_CPU_REQUEST
from scaling.kube.scheduling.terms import host_ports, pod_affinity_terms, spread_constraints

MIN_POD_CPU_M = 10
MIN_POD_MEMORY = 16 * 1024 * 1024
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})
# What a container missing a cpu or memory request counts in the scheduler's LeastAllocated.
NON_MISSING = {"cpu": DEFAULT_MILLI_CPU_REQUEST, "memory": DEFAULT_MEMORY_REQUEST}


def _container_requests(container: dict[str, Any]) -> dict[str, int]:
    """Every resource the container requests (limits stand in for requests left unset), in
    base units: cpu in millicores, everything else in whole units."""
    resources = container.get("resources") or {}
    requests = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
    return {k: cpu_millis(v) if k == "cpu" else memory_bytes(v) for k, v in requests.items()}


Parsed = tuple[list[dict[str, int]], list[tuple[dict[str, int], bool]], dict[str, int]]


def _parse(spec: dict[str, Any]) -> Parsed:
    """Each app container's requests, each init container's (and whether it is a native sidecar)
    and the pod's overhead, parsed once: pod_info sums them twice (real and non-zero requests),
    and parsing the quantities is most of the cost of reading a pod."""
    overhead = {k: cpu_millis(v) if k == "cpu" else memory_bytes(v) for k, v in (spec.get("overhead") or {}).items()}
    return (
        [_container_requests(c) for c in spec.get("containers") or []],
        [(_container_requests(c), c.get("restartPolicy") == "Always") for c in spec.get("initContainers") or []],
        overhead,
    )


def _sum_requests(parsed: Parsed, non_missing: dict[str, int] | None = None) -> dict[str, int]:
    """Per resource: max(app containers + sidecars, each init container + the sidecars started
    before it) + overhead, as the scheduler's NodeResourcesFit sums them. With `non_missing`,
    each container (init containers too) missing one of its resources counts that amount
    (an explicit 0 is not missing)."""
    containers, inits, overhead = parsed

    def requests(own: dict[str, int]) -> dict[str, int]:
        return {**non_missing, **own} if non_missing else own

    app: dict[str, int] = {}
    for c in containers:
        for k, q in requests(c).items():
            app[k] = app.get(k, 0) + q
    side: dict[str, int] = {}
    init: dict[str, int] = {}
    for c, sidecar in inits:
        req = requests(c)
        if sidecar:  # native sidecar: keeps running beside the app
            for k, q in req.items():
                side[k] = side.get(k, 0) + q
        else:
            for k in req.keys() | side.keys():
                init[k] = max(init.get(k, 0), req.get(k, 0) + side.get(k, 0))
    out = {k: max(app.get(k, 0) + side.get(k, 0), init.get(k, 0)) for k in app.keys() | side.keys() | init.keys()}
    for k, v in overhead.items():
        out[k] = out.get(k, 0) + v
    return out


def _demand(raw: dict[str, int]) -> Resources:
    extended = tuple(sorted((k, q) for k, q in raw.items() if k not in ("cpu", "memory", "pods") and q > 0))
    return Resources(
        cpu_m=raw.get("cpu") or MIN_POD_CPU_M, memory=raw.get("memory") or MIN_POD_MEMORY, pods=1, extended=extended
    )


def pod_demand(pod: dict[str, Any]) -> Resources:
    """The room the pod takes on a node (with the documented minimums and one pod slot)."""
    return _demand(_sum_requests(_parse(pod.get("spec") or {})))


def _score_requests(parsed: Parsed, real: dict[str, int]) -> tuple[int, int, int, int]:
    containers, inits, _ = parsed
    complete = all("cpu" in c and "memory" in c for c in (*containers, *(c for c, _ in inits)))
    non_zero = real if complete else _sum_requests(parsed, NON_MISSING)  # nothing missing: the same sums
    return real.get("cpu", 0), real.get("memory", 0), non_zero.get("cpu", 0), non_zero.get("memory", 0)


def score_requests(spec: dict[str, Any]) -> tuple[int, int, int, int]:
    """cpu millicores and memory bytes as the scheduler's resource scores read them: the real
    requests (BalancedAllocation), then the non-zero ones (LeastAllocated)."""
    parsed = _parse(spec)
    return _score_requests(parsed, _sum_requests(parsed))


def implied_score_requests(requests: Resources) -> tuple[int, int, int, int]:
    """score_requests for a pod known only by its pod_demand: a request at growth's minimum or
    below stands for a container without one."""
    cpu = 0 if requests.cpu_m <= MIN_POD_CPU_M else requests.cpu_m
    memory = 0 if requests.memory <= MIN_POD_MEMORY else requests.memory
    return cpu, memory, cpu or DEFAULT_MILLI_CPU_REQUEST, memory or DEFAULT_MEMORY_REQUEST


def controller_kind(pod: dict[str, Any]) -> str | None:
    for ref in (pod.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("controller"):
            return ref.get("kind")
    return None


def controller_uid(pod: dict[str, Any]) -> str | None:
    """The uid of the pod's managing controller (its ownerReference with controller: true)."""
    for ref in (pod.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("controller"):
            return ref.get("uid")
    return None


def controlled_pods(pods: list[dict[str, Any]], uid: str, but: str = "") -> tuple[int, int]:
    """How many live pods (not deleting, not finished) controller ``uid`` has, other than ``but``
    (a pod's uid: a StatefulSet's new pod has the old one's name): those bound to a node and those
    waiting for one."""
    bound = waiting = 0
    for p in pods:
        meta = p.get("metadata") or {}
        if meta.get("uid") == but or meta.get("deletionTimestamp") or controller_uid(p) != uid:
            continue
        if (p.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            continue
        if (p.get("spec") or {}).get("nodeName"):
            bound += 1
        else:
            waiting += 1
    return bound, waiting


def is_daemonset_pod(pod: dict[str, Any]) -> bool:
    return controller_kind(pod) == "DaemonSet"


def is_mirror_pod(pod: dict[str, Any]) -> bool:
    return MIRROR_ANNOTATION in ((pod.get("metadata") or {}).get("annotations") or {})


def follows_node(pod: PodInfo) -> bool:
    """DaemonSet pods follow nodes and mirror pods are static: neither asks for a new node nor
    moves off a leaving one. The one place this is decided (planner, observation, drain)."""
    return pod.is_daemonset or pod.is_mirror


def counts_as_demand(pod: PodInfo) -> bool:
    return not follows_node(pod)


def _unschedulable_condition(pod: dict[str, Any]) -> dict[str, Any] | None:
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if (
            cond.get("type") == "PodScheduled"
            and cond.get("status") == "False"
            and cond.get("reason") == "Unschedulable"
        ):
            return cond
    return None


def is_unschedulable(pod: dict[str, Any]) -> bool:
    """Pending, not bound, and the scheduler said Unschedulable."""
    if (pod.get("status") or {}).get("phase") != "Pending":
        return False
    if (pod.get("spec") or {}).get("nodeName"):
        return False
    if (pod.get("metadata") or {}).get("deletionTimestamp"):
        return False
    return _unschedulable_condition(pod) is not None


def unschedulable_since(pod: dict[str, Any]) -> datetime | None:
    cond = _unschedulable_condition(pod)
    stamp = cond.get("lastTransitionTime") if cond else None
    if not stamp:
        return None
    if isinstance(stamp, datetime):
        return stamp
    return datetime.fromisoformat(str(stamp).replace("Z", "+00:00"))


def _is_local_volume(v: dict[str, Any]) -> bool:
    """hostPath, or an emptyDir on the node's disk: an emptyDir with medium Memory is tmpfs,
    gone with the pod wherever it runs, so it holds nothing a drain would lose (as Cluster
    Autoscaler's drain rules count it)."""
    if "hostPath" in v:
        return True
    if "emptyDir" in v:
        return ((v.get("emptyDir") or {}).get("medium") or "") != "Memory"
    return False


def local_volumes(pod: dict[str, Any]) -> list[str]:
    """Names of the pod's local-storage volumes (the safe-to-evict-local-volumes annotation
    names them; scaling.kube.drain decides whether they block)."""
    return [v.get("name") or "" for v in (pod.get("spec") or {}).get("volumes") or [] if _is_local_volume(v)]


def has_local_storage(pod: dict[str, Any]) -> bool:
    return bool(local_volumes(pod))


def _deletion_timestamp(pod: dict[str, Any]) -> datetime | None:
    stamp = (pod.get("metadata") or {}).get("deletionTimestamp")
    if not stamp:
        return None
    if isinstance(stamp, datetime):
        return stamp
    return datetime.fromisoformat(str(stamp).replace("Z", "+00:00"))


def _grace_period_s(pod: dict[str, Any]) -> int | None:
    v = (pod.get("spec") or {}).get("terminationGracePeriodSeconds")
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def pvc_names(pod: dict[str, Any]) -> list[str]:
    return [
        v["persistentVolumeClaim"]["claimName"]
        for v in (pod.get("spec") or {}).get("volumes") or []
        if (v.get("persistentVolumeClaim") or {}).get("claimName")
    ]


def _toleration(t: dict[str, Any]) -> Toleration:
    operator = t.get("operator") or "Equal"  # the API's default
    return Toleration(
        key=t.get("key") or "",
        operator=operator,
        value=t.get("value") or "",
        effect=t.get("effect") or "",
    )


def terms_key(spec: dict[str, Any], namespace: str, labels: dict[str, str]) -> str:
    """A digest of the pod (anti-)affinity and spread constraints as written ("" without any)."""
    affinity = spec.get("affinity") or {}
    raw = (affinity.get("podAffinity"), affinity.get("podAntiAffinity"), spec.get("topologySpreadConstraints"))
    if not any(raw):
        return ""
    parts = (raw, namespace, labels)
    return _TERMS_KEYS.get(parts, lambda: hashlib.sha256(repr(parts).encode()).hexdigest()[:16])


_TERMS_KEYS: ReprMemo[str] = ReprMemo(1024)


DEFAULT_SCHEDULER = "default-scheduler"  # the API server's default for spec.schedulerName


def _other_scheduler(spec: dict[str, Any]) -> str | None:
    name = spec.get("schedulerName")
    return name if name and name != DEFAULT_SCHEDULER else None


def pod_info(pod: dict[str, Any]) -> PodInfo:
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    namespace = meta.get("namespace") or "default"
    labels = dict(meta.get("labels") or {})
    parsed = _parse(spec)
    raw = _sum_requests(parsed)
    return PodInfo(
        namespace=namespace,
        name=meta.get("name") or "",
        uid=meta.get("uid") or f"{namespace}/{meta.get('name') or ''}",
        labels=labels,
        annotations=dict(meta.get("annotations") or {}),
        node_selector=dict(spec.get("nodeSelector") or {}),
        tolerations=[_toleration(t) for t in spec.get("tolerations") or []],
        node_affinity=required_node_affinity(spec),
        spreads=pod_spreads(meta, spec),
        topology_spreads=topology_spreads(meta, spec),
        requests=_demand(raw),
        score_requests=_score_requests(parsed, raw),
        node_name=spec.get("nodeName") or None,
        phase=status.get("phase") or "Pending",
        controller_kind=controller_kind(pod),
        is_daemonset=is_daemonset_pod(pod),
        is_mirror=is_mirror_pod(pod),
        unschedulable=is_unschedulable(pod),
        unschedulable_since=unschedulable_since(pod),
        has_local_storage=has_local_storage(pod),
        local_volumes=local_volumes(pod),
        pvc_names=pvc_names(pod),
        host_ports=list(host_ports(spec)),
        pod_affinity=list(pod_affinity_terms(spec, namespace, labels, "podAffinity")),
        pod_anti_affinity=list(pod_affinity_terms(spec, namespace, labels, "podAntiAffinity")),
        spread_constraints=list(spread_constraints(spec, labels)),
        terms_key=terms_key(spec, namespace, labels),
        unmodelled=["DynamicResources"] if spec.get("resourceClaims") else [],
        deletion_timestamp=_deletion_timestamp(pod),
        termination_grace_period_s=_grace_period_s(pod),
        scheduler_name=_other_scheduler(spec),
    )


# What pod_info reads of a pod's metadata. Its spec it reads whole; of its status, the phase and
# the PodScheduled condition.
_METADATA_READ = ("name", "namespace", "uid", "labels", "annotations", "ownerReferences", "deletionTimestamp")


def _same_but_node_name(old: dict[str, Any], new: dict[str, Any]) -> bool:
    if len(old) - ("nodeName" in old) != len(new) - ("nodeName" in new):
        return False
    return all(k == "nodeName" or (k in old and old[k] == v) for k, v in new.items())


def pod_info_rebound(info: PodInfo, old: dict[str, Any], new: dict[str, Any]) -> PodInfo | None:
    """pod_info(new) from ``info``, old's, when the pod changed only in spec.nodeName and status:
    most of a burst's changes (marked unschedulable, bound, running), which then need no new
    PodInfo of their spec. None when anything else pod_info reads changed."""
    old_meta, new_meta = old.get("metadata") or {}, new.get("metadata") or {}
    if any(old_meta.get(k) != new_meta.get(k) for k in _METADATA_READ):
        return None
    new_spec = new.get("spec") or {}
    if not _same_but_node_name(old.get("spec") or {}, new_spec):
        return None
    return info.model_copy(
        update={
            "node_name": new_spec.get("nodeName") or None,
            "phase": (new.get("status") or {}).get("phase") or "Pending",
            "unschedulable": is_unschedulable(new),
            "unschedulable_since": unschedulable_since(new),
        }
    )
