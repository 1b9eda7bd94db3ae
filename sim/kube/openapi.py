"""Just enough OpenAPI for kubectl's create/apply without --validate=false.

What kubectl (1.27+) does with it, measured with `kubectl -v=8` against this server:
- it reads /openapi/v3, then the document of the object's group-version, and looks for a PATCH
  operation tagged with the object's group/version/kind that takes the `fieldValidation` query
  parameter. Found: the server validates (kubectl sends `fieldValidation=Strict`), so kubectl
  needs no schema of its own. Every served resource is listed here that way.
- `kubectl apply` computes a strategic merge patch from the v3 schema only when the PATCH
  operation lists `application/strategic-merge-patch+json`. It is left out on purpose: the
  schemas here have no patch-merge keys, so kubectl uses the ones compiled into it.
- /openapi/v2 is asked for as protobuf (gnostic's Document). An empty Document (no
  definitions) is valid protobuf, and kubectl then falls back to its compiled-in types too.
CRD schemas (openAPIV3Schema) are served as they are, so `kubectl explain` shows their fields.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from typing import Any

from sim.kube.store import ResourceType

Obj = dict[str, Any]
OPENAPI_V2_PROTOBUF = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"
# gnostic openapi_v2.Document{swagger: "2.0", info: {title: "Kubernetes", version: "v1.31.0"}}
V2_PROTOBUF = b"\x0a\x032.0" + b"\x12\x15" + b"\x0a\x0aKubernetes" + b"\x12\x07v1.31.0"
FIELD_VALIDATION = {
    "name": "fieldValidation",
    "in": "query",
    "schema": {"type": "string"},
    "description": "Ignore, Warn or Strict: how the server treats unknown or duplicate fields",
}
_OBJECT_META = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}


def gv_path(group: str, version: str) -> str:
    return f"apis/{group}/{version}" if group else f"api/{version}"


def schema_name(rt: ResourceType) -> str:
    if not rt.builtin:
        return ".".join(reversed(rt.group.split("."))) + f".{rt.version}.{rt.kind}"
    if rt.group == "apiextensions.k8s.io":
        return f"io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.{rt.version}.{rt.kind}"
    return f"io.k8s.api.{rt.group.split('.')[0] or 'core'}.{rt.version}.{rt.kind}"


def _gvk(rt: ResourceType) -> list[Obj]:
    return [{"group": rt.group, "version": rt.version, "kind": rt.kind}]


def _schema(rt: ResourceType, crd_schema: Obj | None) -> Obj:
    base: Obj = dict(crd_schema or {"type": "object", "x-kubernetes-preserve-unknown-fields": True})
    props = dict(base.get("properties") or {})
    props.setdefault("apiVersion", {"type": "string"})
    props.setdefault("kind", {"type": "string"})
    props.setdefault("metadata", _OBJECT_META)
    base.update({"type": "object", "properties": props, "x-kubernetes-group-version-kind": _gvk(rt)})
    return base


def _operation(
    rt: ResourceType, action: str, ref: str, *, body: list[str] | None = None, validates: bool = False
) -> Obj:
    op: Obj = {
        "operationId": f"{action}{rt.kind}",
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": _gvk(rt)[0],
        "parameters": [FIELD_VALIDATION] if validates else [],
        "responses": {"200": {"description": "OK", "content": {"application/json": {"schema": {"$ref": ref}}}}},
    }
    if body:
        op["requestBody"] = {"content": {t: {"schema": {"$ref": ref}} for t in body}, "required": True}
    return op


def group_version_doc(types: Iterable[ResourceType], crd_schemas: dict[tuple[str, str, str], Obj]) -> Obj:
    """The OpenAPI v3 document of one group-version: paths and schemas of its resources."""
    paths: Obj = {}
    schemas: Obj = {}
    for rt in sorted(types, key=lambda t: t.plural):
        name = schema_name(rt)
        ref = f"#/components/schemas/{name}"
        schemas[name] = _schema(rt, crd_schemas.get((rt.group, rt.version, rt.plural)))
        prefix = "/" + gv_path(rt.group, rt.version)
        collection = f"{prefix}/namespaces/{{namespace}}/{rt.plural}" if rt.namespaced else f"{prefix}/{rt.plural}"
        json_body = ["application/json"]
        patches = ["application/json-patch+json", "application/merge-patch+json", "application/apply-patch+yaml"]
        paths[collection] = {
            "get": _operation(rt, "list", ref),
            "post": _operation(rt, "post", ref, body=json_body, validates=True),
        }
        paths[f"{collection}/{{name}}"] = {
            "get": _operation(rt, "get", ref),
            "put": _operation(rt, "put", ref, body=json_body, validates=True),
            "patch": _operation(rt, "patch", ref, body=patches, validates=True),
            "delete": _operation(rt, "delete", ref),
        }
        if rt.status_subresource:
            paths[f"{collection}/{{name}}/status"] = {
                "get": _operation(rt, "get", ref),
                "put": _operation(rt, "put", ref, body=json_body, validates=True),
                "patch": _operation(rt, "patch", ref, body=patches, validates=True),
            }
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "v1.31.0"},
        "paths": paths,
        "components": {"schemas": schemas},
    }


def doc_hash(doc: Obj) -> str:
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:32].upper()


def v3_root(docs: dict[str, Obj]) -> Obj:
    """/openapi/v3: where each group-version's document is, with a hash that changes with it."""
    return {
        "paths": {
            path: {"serverRelativeURL": f"/openapi/v3/{path}?hash={doc_hash(doc)}"}
            for path, doc in sorted(docs.items())
        }
    }


def v2_json(docs: dict[str, Obj]) -> Obj:
    """/openapi/v2 as JSON (kubectl asks for protobuf; this is for people and other clients)."""
    definitions: Obj = {}
    for doc in docs.values():
        definitions.update(doc["components"]["schemas"])
    return {
        "swagger": "2.0",
        "info": {"title": "Kubernetes", "version": "v1.31.0"},
        "paths": {},
        "definitions": definitions,
    }
