"""Minimal workload controllers: Deployment -> ReplicaSet -> Pods, and DaemonSets.

Deliberately small: a Deployment keeps one ReplicaSet per pod-template hash and scales the
others to zero at once (a Recreate-style rollout, no surge accounting). A ReplicaSet keeps
`replicas` live pods and, scaling down, deletes unscheduled before scheduled, not-ready
before ready, and newest first among equals (the real controller's ranking, simplified).
DaemonSet pods tolerate every taint and are created with spec.nodeName set, bypassing the
scheduler; nodeSelector and required node affinity of the template are honoured.
"""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from typing import Any

from sim.kube.actor import Actor
from sim.kube.errors import ApiError
from sim.kube.scheduler import affinity_matches
from sim.kube.store import Obj, ResourceType, Store, clone

TEMPLATE_HASH = "pod-template-hash"


def _controller_uid(obj: Obj) -> str | None:
    for ref in obj["metadata"].get("ownerReferences") or []:
        if ref.get("controller"):
            return ref.get("uid")
    return None


def _owner_ref(owner: Obj, kind: str) -> Obj:
    return {
        "apiVersion": "apps/v1",
        "kind": kind,
        "name": owner["metadata"]["name"],
        "uid": owner["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def _active(pod: Obj) -> bool:
    return (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed") and not pod["metadata"].get(
        "deletionTimestamp"
    )


def _ready(pod: Obj) -> bool:
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in (pod.get("status") or {}).get("conditions") or []
    )


def template_hash(template: Obj) -> str:
    digest = hashlib.sha256(json.dumps(template, sort_keys=True).encode()).hexdigest()
    return "".join(c for c in digest if c in "bcdfghjklmnpqrstvwxz2456789")[:10] or digest[:10]


class Controllers(Actor):
    name = "controllers"

    def __init__(self, store: Store, interval: float = 0.1) -> None:
        super().__init__(lambda: interval)
        self.store = store
        self._last_rv = -1
        self.pods = store.builtin("pods")
        self.nodes = store.builtin("nodes")
        self.deployments = store.builtin("deployments", "apps")
        self.replicasets = store.builtin("replicasets", "apps")
        self.daemonsets = store.builtin("daemonsets", "apps")

    def step(self) -> None:
        if self.store.rv == self._last_rv:
            return
        self._last_rv = self.store.rv
        self.sync_deployments()
        owned = self._pods_by_owner()
        self.sync_replicasets(owned)
        self.sync_daemonsets(owned)

    def _pods_by_owner(self) -> dict[str, list[Obj]]:
        owned: dict[str, list[Obj]] = defaultdict(list)
        for pod in self.store.all(self.pods):
            uid = _controller_uid(pod)
            if uid:
                owned[uid].append(pod)
        return owned

    def _set_status(self, rt: ResourceType, obj: Obj, status: Obj) -> None:
        def update(current: Obj) -> Obj:
            current["status"] = {**(current.get("status") or {}), **status}
            return current

        self.store.mutate(rt, obj["metadata"]["namespace"], obj["metadata"]["name"], update, "status")

    def _create(self, rt: ResourceType, ns: str, body: Obj) -> None:
        try:
            self.store.create(rt, ns, body)
        except ApiError:
            pass  # namespace going away or a name race: the next pass retries

    def _delete(self, rt: ResourceType, obj: Obj) -> None:
        try:
            self.store.delete(rt, obj["metadata"]["namespace"], obj["metadata"]["name"])
        except ApiError:
            pass

    # ---- deployments ----------------------------------------------------------------------
    def sync_deployments(self) -> None:
        by_owner: dict[str, list[Obj]] = defaultdict(list)
        for rs in self.store.all(self.replicasets):
            uid = _controller_uid(rs)
            if uid:
                by_owner[uid].append(rs)
        for deploy in self.store.all(self.deployments):
            meta, spec = deploy["metadata"], deploy.get("spec") or {}
            ns, name = meta["namespace"], meta["name"]
            template = clone(spec.get("template") or {})
            desired = int(spec.get("replicas", 1))
            pod_hash = template_hash(template)
            rs_name = f"{name}-{pod_hash}"
            owned = by_owner.get(meta["uid"], [])
            current = next((rs for rs in owned if rs["metadata"]["name"] == rs_name), None)
            if current is None:
                template.setdefault("metadata", {}).setdefault("labels", {})[TEMPLATE_HASH] = pod_hash
                selector = clone(spec.get("selector") or {})
                selector.setdefault("matchLabels", {})[TEMPLATE_HASH] = pod_hash
                self._create(
                    self.replicasets,
                    ns,
                    {
                        "metadata": {
                            "name": rs_name,
                            "namespace": ns,
                            "labels": template["metadata"]["labels"],
                            "ownerReferences": [_owner_ref(deploy, "Deployment")],
                        },
                        "spec": {"replicas": desired, "selector": selector, "template": template},
                    },
                )
            for rs in owned:
                want = desired if rs["metadata"]["name"] == rs_name else 0
                if int((rs.get("spec") or {}).get("replicas", 1)) != want:

                    def scale(obj: Obj, want: int = want) -> Obj:
                        obj["spec"]["replicas"] = want
                        return obj

                    self.store.mutate(self.replicasets, ns, rs["metadata"]["name"], scale)
            statuses = [rs.get("status") or {} for rs in owned]
            new_status = (current or {}).get("status") or {}
            self._set_status(
                self.deployments,
                deploy,
                {
                    "observedGeneration": meta.get("generation", 1),
                    "replicas": sum(s.get("replicas", 0) for s in statuses),
                    "readyReplicas": sum(s.get("readyReplicas", 0) for s in statuses),
                    "availableReplicas": sum(s.get("availableReplicas", 0) for s in statuses),
                    "updatedReplicas": new_status.get("replicas", 0),
                    "unavailableReplicas": max(0, desired - sum(s.get("availableReplicas", 0) for s in statuses)),
                },
            )

    # ---- replicasets ----------------------------------------------------------------------
    def sync_replicasets(self, owned: dict[str, list[Obj]]) -> None:
        for rs in self.store.all(self.replicasets):
            meta, spec = rs["metadata"], rs.get("spec") or {}
            desired = int(spec.get("replicas", 1))
            pods = [p for p in owned.get(meta["uid"], []) if _active(p)]
            if len(pods) < desired:
                template = spec.get("template") or {}
                for _ in range(desired - len(pods)):
                    tmeta = template.get("metadata") or {}
                    self._create(
                        self.pods,
                        meta["namespace"],
                        {
                            "metadata": {
                                "generateName": f"{meta['name']}-",
                                "namespace": meta["namespace"],
                                "labels": clone(tmeta.get("labels") or {}),
                                "annotations": clone(tmeta.get("annotations") or {}),
                                "ownerReferences": [_owner_ref(rs, "ReplicaSet")],
                            },
                            "spec": clone(template.get("spec") or {}),
                        },
                    )
            elif len(pods) > desired:
                ranked = sorted(
                    pods,
                    key=lambda p: (
                        bool(p["spec"].get("nodeName")),
                        p["status"].get("phase") == "Running",
                        _ready(p),
                        -self.store.order(p),
                    ),
                )
                for pod in ranked[: len(pods) - desired]:
                    self._delete(self.pods, pod)
                pods = ranked[len(pods) - desired :]
            ready = sum(1 for p in pods if _ready(p))
            self._set_status(
                self.replicasets,
                rs,
                {
                    "replicas": len(pods),
                    "fullyLabeledReplicas": len(pods),
                    "readyReplicas": ready,
                    "availableReplicas": ready,
                    "observedGeneration": meta.get("generation", 1),
                },
            )

    # ---- daemonsets -----------------------------------------------------------------------
    def sync_daemonsets(self, owned: dict[str, list[Obj]]) -> None:
        nodes = self.store.all(self.nodes)
        for ds in self.store.all(self.daemonsets):
            meta, spec = ds["metadata"], ds.get("spec") or {}
            template = spec.get("template") or {}
            eligible = {n["metadata"]["name"] for n in nodes if affinity_matches(template, n)}
            by_node: dict[str, list[Obj]] = defaultdict(list)
            for pod in owned.get(meta["uid"], []):
                if not _active(pod) or pod["spec"].get("nodeName") not in eligible:
                    self._delete(self.pods, pod)
                else:
                    by_node[pod["spec"]["nodeName"]].append(pod)
            for node_name in sorted(eligible):
                pods = sorted(by_node.get(node_name, []), key=self.store.order)
                for extra in pods[1:]:
                    self._delete(self.pods, extra)
                if pods:
                    continue
                pod_spec: dict[str, Any] = clone(template.get("spec") or {})
                pod_spec["nodeName"] = node_name
                pod_spec["tolerations"] = list(pod_spec.get("tolerations") or []) + [{"operator": "Exists"}]
                tmeta = template.get("metadata") or {}
                self._create(
                    self.pods,
                    meta["namespace"],
                    {
                        "metadata": {
                            "generateName": f"{meta['name']}-",
                            "namespace": meta["namespace"],
                            "labels": clone(tmeta.get("labels") or {}),
                            "annotations": clone(tmeta.get("annotations") or {}),
                            "ownerReferences": [_owner_ref(ds, "DaemonSet")],
                        },
                        "spec": pod_spec,
                    },
                )
            scheduled = [ps[0] for n, ps in by_node.items() if ps]
            ready = sum(1 for p in scheduled if _ready(p))
            self._set_status(
                self.daemonsets,
                ds,
                {
                    "desiredNumberScheduled": len(eligible),
                    "currentNumberScheduled": len(scheduled),
                    "numberMisscheduled": 0,
                    "numberReady": ready,
                    "numberAvailable": ready,
                    "numberUnavailable": len(eligible) - ready,
                    "updatedNumberScheduled": len(scheduled),
                    "observedGeneration": meta.get("generation", 1),
                },
            )
