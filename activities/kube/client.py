"""Building the official Kubernetes client from settings (kubeconfig or in-cluster)."""

from __future__ import annotations

import json
from typing import Any

from kubernetes import client, config

from activities.settings import KubeSettings


def api_client(settings: KubeSettings) -> client.ApiClient:
    cfg = client.Configuration()
    if settings.in_cluster:
        config.load_incluster_config(client_configuration=cfg)
    else:
        config.load_kube_config(
            config_file=settings.kubeconfig, context=settings.context, client_configuration=cfg
        )
    # Activities run in a thread pool; allow that many concurrent connections.
    cfg.connection_pool_maxsize = 32
    return client.ApiClient(cfg)


def raw_list(call: Any, **kwargs: Any) -> list[dict[str, Any]]:
    """Call a list_* method and return the items as plain JSON dicts (camelCase, as the API sends).

    Skipping the client's model deserialisation is several times faster on big lists, and
    scaling/ works on plain dicts anyway."""
    resp = call(_preload_content=False, **kwargs)
    return json.loads(resp.data)["items"]


def create_event(
    core: client.CoreV1Api,
    namespace: str,
    involved: client.V1ObjectReference,
    reason: str,
    message: str,
    type: str = "Normal",
    component: str = "growth",
) -> None:
    """Write one core/v1 Event about `involved`, as `kubectl describe` shows them."""
    from datetime import datetime, timezone

    from kubernetes.client.rest import ApiException

    now = datetime.now(timezone.utc)
    body = client.CoreV1Event(
        metadata=client.V1ObjectMeta(generate_name=f"{involved.name}.", namespace=namespace),
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
        if e.status != 404:  # the namespace went away: nothing to report on
            raise
