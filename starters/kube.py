"""Small helpers the starters use to talk to a cluster through the official client."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from kubernetes import client, config
from kubernetes.client.rest import ApiException

from scaling.nodes.models import CRD_GROUP, CRD_VERSION

DEPLOY = Path(__file__).resolve().parent.parent / "deploy"


def kube_client(kubeconfig: str | Path) -> client.ApiClient:
    return config.new_client_from_config(config_file=str(kubeconfig))


def apply_crds(api: client.ApiClient) -> None:
    ext = client.ApiextensionsV1Api(api)
    for path in sorted((DEPLOY / "crds").glob("*.yaml")):
        body = yaml.safe_load(path.read_text())
        if body.get("kind") != "CustomResourceDefinition":
            continue  # deploy/crds/kustomization.yaml lists them for kustomize
        try:
            ext.create_custom_resource_definition(body)
        except ApiException as e:
            if e.status != 409:
                raise


def apply_node_group(api: client.ApiClient, obj: dict[str, Any]) -> None:
    custom = client.CustomObjectsApi(api)
    try:
        custom.create_cluster_custom_object(CRD_GROUP, CRD_VERSION, "nodegroupswithpriority", obj)
    except ApiException as e:
        if e.status != 409:
            raise
        current = custom.get_cluster_custom_object(
            CRD_GROUP, CRD_VERSION, "nodegroupswithpriority", obj["metadata"]["name"]
        )
        obj = {**obj, "metadata": {**obj["metadata"], "resourceVersion": current["metadata"]["resourceVersion"]}}
        custom.replace_cluster_custom_object(
            CRD_GROUP, CRD_VERSION, "nodegroupswithpriority", obj["metadata"]["name"], obj
        )


def node_group(name: str, pools: list[dict[str, Any]], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": f"{CRD_GROUP}/{CRD_VERSION}",
        "kind": "NodeGroupWithPriority",
        "metadata": {"name": name},
        "spec": {"pools": pools, **spec},
    }


def deployment(
    name: str, replicas: int, cpu: str, memory: str, namespace: str = "default", **pod_spec: Any
) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "containers": [
                        {
                            "name": "app",
                            "image": "registry.k8s.io/pause:3.9",
                            "resources": {"requests": {"cpu": cpu, "memory": memory}},
                        }
                    ],
                    **pod_spec,
                },
            },
        },
    }
