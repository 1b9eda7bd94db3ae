"""The three PATCH flavours the apiserver accepts for JSON bodies.

Strategic merge patch is approximated: it is a JSON merge patch, except that lists of
objects the Kubernetes types declare with a merge key (conditions by "type", containers by
"name", ...) are merged item by item, and `$patch: delete|replace` directives are honoured.
Lists without a known merge key are replaced, as for most fields in the real types.
"""

from __future__ import annotations

import copy
from typing import Any

# Field name -> merge key, from the patchMergeKey tags of the core/apps types.
MERGE_KEYS: dict[str, str] = {
    "conditions": "type",
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "env": "name",
    "volumes": "name",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
    "ports": "containerPort",
    "ownerReferences": "uid",
    "imagePullSecrets": "name",
    "addresses": "type",
    "containerStatuses": "name",
    "initContainerStatuses": "name",
}
# Primitive lists with patchStrategy=merge (set union).
MERGE_PRIMITIVE_LISTS = {"finalizers"}


class PatchError(ValueError):
    """The patch cannot be applied: the apiserver answers 422 (or 400 when malformed)."""


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def strategic_merge_patch(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    if patch.get("$patch") == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if not k.startswith("$")}
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if key.startswith("$"):
            continue
        if value is None:
            result.pop(key, None)
        elif isinstance(value, list) and key in MERGE_KEYS and isinstance(result.get(key), list):
            result[key] = _merge_list(result[key], value, MERGE_KEYS[key])
        elif isinstance(value, list) and key in MERGE_PRIMITIVE_LISTS and isinstance(result.get(key), list):
            result[key] = list(result[key]) + [v for v in value if v not in result[key]]
        elif isinstance(value, dict):
            result[key] = strategic_merge_patch(result.get(key), value)
        else:
            result[key] = copy.deepcopy(value)
    return result


def _merge_list(current: list[Any], patch: list[Any], merge_key: str) -> list[Any]:
    if any(isinstance(item, dict) and item.get("$patch") == "replace" for item in patch):
        return [copy.deepcopy(i) for i in patch if not (isinstance(i, dict) and "$patch" in i)]
    out = [copy.deepcopy(i) for i in current]
    for item in patch:
        if not isinstance(item, dict) or merge_key not in item:
            out.append(copy.deepcopy(item))
            continue
        index = next(
            (
                n
                for n, existing in enumerate(out)
                if isinstance(existing, dict) and existing.get(merge_key) == item[merge_key]
            ),
            None,
        )
        if item.get("$patch") == "delete":
            if index is not None:
                out.pop(index)
        elif index is None:
            out.append({k: v for k, v in item.items() if not k.startswith("$")})
        else:
            out[index] = strategic_merge_patch(out[index], item)
    return out


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise PatchError(f"invalid JSON pointer {path!r}")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _resolve(doc: Any, tokens: list[str]) -> Any:
    for token in tokens:
        if isinstance(doc, dict):
            if token not in doc:
                raise PatchError(f"missing value at /{'/'.join(tokens)}")
            doc = doc[token]
        elif isinstance(doc, list):
            try:
                doc = doc[int(token)]
            except (ValueError, IndexError):
                raise PatchError(f"invalid index {token!r}") from None
        else:
            raise PatchError(f"cannot traverse into {token!r}")
    return doc


def _add(doc: Any, tokens: list[str], value: Any, replace: bool) -> Any:
    if not tokens:
        return copy.deepcopy(value)
    parent = _resolve(doc, tokens[:-1])
    last = tokens[-1]
    if isinstance(parent, dict):
        if replace and last not in parent:
            raise PatchError(f"replace of missing key {last!r}")
        parent[last] = copy.deepcopy(value)
    elif isinstance(parent, list):
        if last == "-":
            if replace:
                raise PatchError("replace needs an index")
            parent.append(copy.deepcopy(value))
        else:
            try:
                index = int(last)
            except ValueError:
                raise PatchError(f"invalid index {last!r}") from None
            if replace:
                if not 0 <= index < len(parent):
                    raise PatchError(f"index {index} out of range")
                parent[index] = copy.deepcopy(value)
            else:
                if not 0 <= index <= len(parent):
                    raise PatchError(f"index {index} out of range")
                parent.insert(index, copy.deepcopy(value))
    else:
        raise PatchError(f"cannot add into {type(parent).__name__}")
    return doc


def _remove(doc: Any, tokens: list[str]) -> Any:
    if not tokens:
        raise PatchError("cannot remove the whole document")
    parent = _resolve(doc, tokens[:-1])
    last = tokens[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise PatchError(f"remove of missing key {last!r}")
        return parent.pop(last)
    if isinstance(parent, list):
        try:
            return parent.pop(int(last))
        except (ValueError, IndexError):
            raise PatchError(f"invalid index {last!r}") from None
    raise PatchError("cannot remove from a scalar")


def json_patch(target: Any, operations: Any) -> Any:
    """RFC 6902 JSON patch (add, remove, replace, move, copy, test)."""
    if not isinstance(operations, list):
        raise PatchError("a JSON patch must be a list of operations")
    doc = copy.deepcopy(target)
    for op in operations:
        if not isinstance(op, dict) or "op" not in op or "path" not in op:
            raise PatchError(f"invalid operation {op!r}")
        kind, tokens = op["op"], _pointer(op["path"])
        if kind == "add":
            doc = _add(doc, tokens, op.get("value"), replace=False)
        elif kind == "replace":
            doc = _add(doc, tokens, op.get("value"), replace=True)
        elif kind == "remove":
            _remove(doc, tokens)
        elif kind in ("move", "copy"):
            source = _pointer(op.get("from", ""))
            value = copy.deepcopy(_resolve(doc, source))
            if kind == "move":
                _remove(doc, source)
            doc = _add(doc, tokens, value, replace=False)
        elif kind == "test":
            if _resolve(doc, tokens) != op.get("value"):
                raise PatchError(f"test failed at {op['path']}")
        else:
            raise PatchError(f"unknown operation {kind!r}")
    return doc
