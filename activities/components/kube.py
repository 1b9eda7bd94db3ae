"""TidbClusterAutoScaler and TidbCluster objects through the official client's CustomObjectsApi.

Plain dicts in and out (camelCase, as the API sends them); what they mean is decided in
scaling/. Writes are idempotent: creating a cluster that exists answers the existing one,
deleting one that is gone is done, and a status write retries on a stale resourceVersion.

tidb-operator's released CRDs declare no status subresource (the operator writes status with
the object), while CRDs generated with one route status writes to /status. Status writes try
the subresource and fall back to the object when the API server has no such route.
"""

from __future__ import annotations

from typing import Any

from kubernetes import client
from kubernetes.client.rest import ApiException

from activities.kube.client import create_event, raw_list

GROUP = "pingcap.com"
VERSION = "v1alpha1"
TC_PLURAL = "tidbclusters"
TAC_PLURAL = "tidbclusterautoscalers"
TAC_KIND = "TidbClusterAutoScaler"
STATUS_RETRIES = 5

Obj = dict[str, Any]


class TidbKube:
    def __init__(self, api: client.ApiClient, component: str = "growth") -> None:
        self.custom = client.CustomObjectsApi(api)
        self.core = client.CoreV1Api(api)
        self.component = component

    # ---- reads ---------------------------------------------------------------------------
    def list_autoscalers(self, namespace: str | None = None) -> list[Obj]:
        """Every TidbClusterAutoScaler (in one namespace, or all); [] when the CRD is missing."""
        try:
            if namespace:
                resp = self.custom.list_namespaced_custom_object(GROUP, VERSION, namespace, TAC_PLURAL)
            else:
                resp = self.custom.list_cluster_custom_object(GROUP, VERSION, TAC_PLURAL)
        except ApiException as e:
            if e.status == 404:
                return []
            raise
        return list(resp.get("items") or [])

    def get(self, plural: str, namespace: str, name: str) -> Obj | None:
        try:
            return dict(self.custom.get_namespaced_custom_object(GROUP, VERSION, namespace, plural, name))
        except ApiException as e:
            if e.status == 404:
                return None
            raise

    def secret_data(self, namespace: str, name: str) -> dict[str, str] | None:
        """A Secret's `data` (base64 values), None when it does not exist. Callers keep the
        bytes inside the activity: they never go to history or logs."""
        try:
            secret = self.core.read_namespaced_secret(name, namespace)
        except ApiException as e:
            if e.status == 404:
                return None
            raise
        return dict(secret.data or {})

    def list_clusters(self, namespace: str, label_selector: str = "") -> list[Obj]:
        try:
            resp = self.custom.list_namespaced_custom_object(
                GROUP, VERSION, namespace, TC_PLURAL, label_selector=label_selector
            )
        except ApiException as e:
            if e.status == 404:
                return []
            raise
        return list(resp.get("items") or [])

    def pods(self, namespace: str, label_selector: str) -> list[Obj]:
        return raw_list(self.core.list_namespaced_pod, namespace=namespace, label_selector=label_selector)

    def all_pods(self) -> list[Obj]:
        return raw_list(self.core.list_pod_for_all_namespaces)

    def nodes(self) -> list[Obj]:
        return raw_list(self.core.list_node)

    # ---- status --------------------------------------------------------------------------
    def replace_status(self, plural: str, namespace: str, name: str, status: Obj) -> bool:
        """Make the object's status exactly `status`; False when the object is gone."""
        for _ in range(STATUS_RETRIES):
            current = self.get(plural, namespace, name)
            if current is None:
                return False
            if (current.get("status") or {}) == status:
                return True
            body = {**current, "status": status}
            try:
                try:
                    self.custom.replace_namespaced_custom_object_status(GROUP, VERSION, namespace, plural, name, body)
                except ApiException as e:
                    if e.status != 404:
                        raise
                    # No status subresource (tidb-operator's CRDs), or the object just went.
                    self.custom.replace_namespaced_custom_object(GROUP, VERSION, namespace, plural, name, body)
                return True
            except ApiException as e:
                if e.status == 404:
                    return False
                if e.status != 409:
                    raise
                # Someone wrote in between (a user editing the spec): read again and retry.
        raise RuntimeError(f"{plural} {namespace}/{name}: status kept conflicting after {STATUS_RETRIES} tries")

    # ---- TidbCluster writes --------------------------------------------------------------
    def set_replicas(self, namespace: str, name: str, component: str, replicas: int) -> Obj | None:
        """Patch spec.<component>.replicas; None when the cluster is gone."""
        try:
            return dict(
                self.custom.patch_namespaced_custom_object(
                    GROUP, VERSION, namespace, TC_PLURAL, name, {"spec": {component: {"replicas": int(replicas)}}}
                )
            )
        except ApiException as e:
            if e.status == 404:
                return None
            raise

    def create_cluster(self, namespace: str, body: Obj) -> tuple[Obj, bool]:
        """Create, or answer the existing object of that name: (object, created)."""
        name = body["metadata"]["name"]
        try:
            return dict(self.custom.create_namespaced_custom_object(GROUP, VERSION, namespace, TC_PLURAL, body)), True
        except ApiException as e:
            if e.status != 409:
                raise
        existing = self.get(TC_PLURAL, namespace, name)
        if existing is None:  # deleted between our create and read: create again
            return dict(self.custom.create_namespaced_custom_object(GROUP, VERSION, namespace, TC_PLURAL, body)), True
        return existing, False

    def delete_cluster(self, namespace: str, name: str, uid: str | None = None) -> bool:
        """Delete (the given incarnation, when uid is set); False when it was already gone."""
        body = client.V1DeleteOptions(preconditions=client.V1Preconditions(uid=uid)) if uid else None
        try:
            self.custom.delete_namespaced_custom_object(GROUP, VERSION, namespace, TC_PLURAL, name, body=body)
            return True
        except ApiException as e:
            if e.status == 404:
                return False
            if e.status == 409 and uid:  # another object now has that name: ours is gone
                return False
            raise

    # ---- events --------------------------------------------------------------------------
    def autoscaler_event(
        self, namespace: str, name: str, uid: str, reason: str, message: str, type: str = "Normal", key: str = ""
    ) -> None:
        ref = client.V1ObjectReference(
            api_version=f"{GROUP}/{VERSION}", kind=TAC_KIND, namespace=namespace, name=name, uid=uid or None
        )
        create_event(self.core, namespace, ref, reason, message, type, self.component, key)
