"""Server-side field validation of custom resources (`?fieldValidation=Strict|Warn|Ignore`).

kubectl leaves validation to the server when the OpenAPI says it can (sim/kube/openapi.py), and
then sends `fieldValidation=Strict`: a field the CRD's structural schema does not know is
refused with 400 ("strict decoding error: unknown field ..."), as kube-apiserver does. Warn
answers with a Warning header instead. Simplification: fields are not pruned, so without
Strict an unknown field is stored (a real apiserver drops it); built-in kinds are not checked
(their schemas are not served here).
"""

from __future__ import annotations

from typing import Any

Obj = dict[str, Any]
_ALWAYS = {"apiVersion", "kind", "metadata"}


def unknown_fields(value: Any, schema: Obj | None, path: str = "", top: bool = True) -> list[str]:
    """Dotted paths of the fields in `value` that `schema` does not declare."""
    if not schema or schema.get("x-kubernetes-preserve-unknown-fields") or value is None:
        return []
    found: list[str] = []
    if isinstance(value, dict):
        props = schema.get("properties")
        extra = schema.get("additionalProperties")
        for key, item in value.items():
            where = f"{path}.{key}" if path else key
            if (top or schema.get("x-kubernetes-embedded-resource")) and key in _ALWAYS:
                continue
            if props is not None and key in props:
                found += unknown_fields(item, props[key], where, top=False)
            elif isinstance(extra, dict):
                found += unknown_fields(item, extra, where, top=False)
            elif props is not None or extra is False:
                found.append(where)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(value):
            found += unknown_fields(item, schema["items"], f"{path}[{i}]", top=False)
    return found
