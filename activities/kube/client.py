"""Building the official Kubernetes client from settings (kubeconfig or in-cluster), one per
cluster a worker serves."""

from __future__ import annotations

import hashlib
import json
import threading
from datetime import UTC
from typing import Any

from kubernetes import client, config
from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.settings import KubeSettings, Settings, SettingsError


def api_client(settings: KubeSettings) -> client.ApiClient:
    cfg = client.Configuration()
    if settings.in_cluster:
        config.load_incluster_config(client_configuration=cfg)
    else:
        config.load_kube_config(config_file=settings.kubeconfig, context=settings.context, client_configuration=cfg)
    # Activities run in a thread pool; allow that many concurrent connections.
    cfg.connection_pool_maxsize = 32
    return client.ApiClient(cfg)


class ClusterClients:
    """The ApiClient of each cluster this worker serves, built on first use and cached.

    Activities take the cluster name in their input and ask for its client here, so one worker
    can serve many clusters. Thread-safe: activities run in a thread pool."""

    def __init__(self, settings: Settings | None = None, *, shared: client.ApiClient | None = None) -> None:
        self.settings = settings or Settings.model_construct(clusters={})
        self._shared = shared  # set: every cluster name is answered by this one client
        self._clients: dict[str, client.ApiClient] = {}
        self._lock = threading.Lock()
        self._caches: Any = None

    @property
    def caches(self) -> Any:
        """The watch-fed cache of each cluster (activities.kube.cache), shared by the activities
        built on these clients and closed with them."""
        with self._lock:
            if self._caches is None:
                from activities.kube.cache import ClusterCaches

                self._caches = ClusterCaches(self.api)
            return self._caches

    def api(self, cluster: str) -> client.ApiClient:
        if self._shared is not None:
            return self._shared
        with self._lock:
            cached = self._clients.get(cluster)
            if cached is not None:
                return cached
            kube = self.settings.kube_for(cluster)
            if kube is None:
                # A workflow for a cluster this worker was not configured for: retrying cannot help.
                known = ", ".join(sorted(self.settings.clusters)) or "none"
                raise ApplicationError(
                    f"cluster {cluster!r} is not in this worker's settings (clusters: {known})",
                    type="UnknownCluster",
                    non_retryable=True,
                )
            if not self.settings.clusters:
                # One cluster serves every name: share one client (and its connection pool).
                cached = self._clients.get("") or api_client(kube)
                self._clients[""] = cached
            else:
                cached = api_client(kube)
            self._clients[cluster] = cached
            return cached

    def preload(self) -> None:
        """Build every configured cluster's client now, so a bad kubeconfig stops the worker at
        start with the cluster named, not at its first activity."""
        for name in sorted(self.settings.clusters) or [""]:
            try:
                self.api(name)
            except Exception as err:  # noqa: BLE001 - reported with the cluster's name
                field = f"clusters.{name}" if name else "kubernetes"
                raise SettingsError(f"{field}: cannot build a Kubernetes client: {err}") from err

    def close(self) -> None:
        if self._caches is not None:
            self._caches.close()
        with self._lock:
            for api in {id(a): a for a in self._clients.values()}.values():
                api.close()
            self._clients.clear()


def cluster_clients(source: ClusterClients | client.ApiClient) -> ClusterClients:
    """Activities accept either; a bare ApiClient serves every cluster name."""
    return source if isinstance(source, ClusterClients) else ClusterClients(shared=source)


def raw_list(call: Any, **kwargs: Any) -> list[dict[str, Any]]:
    """Call a list_* method and return the items as plain JSON dicts (camelCase, as the API sends).

    Skipping the client's model deserialisation is several times faster on big lists, and
    scaling/ works on plain dicts anyway."""
    resp = call(_preload_content=False, **kwargs)
    return json.loads(resp.data)["items"]


def attempts_key(*parts: object) -> str:
    """A `create_event` key that every attempt of this activity draws alike (its run, its id and
    `parts`, e.g. the Event's index in its batch): a retried attempt writes each Event once.
    "" outside an activity: a generated name."""
    if not activity.in_activity():
        return ""
    info = activity.info()
    text = "/".join([info.workflow_run_id or "", info.activity_id, *map(str, parts)])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def create_event(
    core: client.CoreV1Api,
    namespace: str,
    involved: client.V1ObjectReference,
    reason: str,
    message: str,
    type: str = "Normal",
    component: str = "growth",
    key: str = "",
) -> None:
    """Write one core/v1 Event about `involved`, as `kubectl describe` shows them. With a `key`
    the Event is named `<involved>.<key>` (client-go names its Events `<involved>.<hex>`), so an
    attempt made again writes it once: AlreadyExists is the earlier attempt's Event."""
    from datetime import datetime

    from kubernetes.client.rest import ApiException

    now = datetime.now(UTC)
    meta = (
        # A name is at most 253 characters: the object's part gives way, as generateName's does.
        client.V1ObjectMeta(name=f"{involved.name[: 252 - len(key)]}.{key}", namespace=namespace)
        if key
        else client.V1ObjectMeta(generate_name=f"{involved.name}.", namespace=namespace)
    )
    body = client.CoreV1Event(
        metadata=meta,
        involved_object=involved,
        reason=reason,
        message=message[:1024],
        type=type,
        source=client.V1EventSource(component=component),
        first_timestamp=now,
        last_timestamp=now,
        count=1,
    )
    try:
        core.create_namespaced_event(namespace, body)
    except ApiException as e:
        if e.status == 409 and key:
            return  # written by an earlier attempt
        if e.status != 404:  # the namespace went away: nothing to report on
            raise
