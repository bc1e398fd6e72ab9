"""The three PATCH flavours of the apiserver: JSON merge patch, JSON patch and strategic merge patch.

Pure functions on JSON values; inputs are never mutated. Failures raise ApiError with the real server's status:
a JSON patch whose `test` fails or whose path is missing is 422 "the server rejected our request due to an error in
our request" (nodes.json). Strategic merge patch knows the list merge keys of the built-in types that migplan and
kubectl touch (see MERGE_KEYS); lists without a merge key are replaced, as the real server does for atomic lists
such as `spec.taints` and `spec.tolerations`.
"""

from __future__ import annotations

import copy
from typing import Any

from .errors import ApiError

# Field name -> merge key, for lists declared `patchStrategy:"merge"` in k8s.io/api (core, apps, meta).
# A value of "" marks a list of primitives merged as a set (e.g. metadata.finalizers).
MERGE_KEYS: dict[str, str] = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "env": "name",
    "volumes": "name",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
    "ports": "containerPort",
    "imagePullSecrets": "name",
    "hostAliases": "ip",
    "conditions": "type",
    "addresses": "type",
    "ownerReferences": "uid",
    "finalizers": "",
    "topologySpreadConstraints": "topologyKey",
    "resourceClaims": "name",
}

_REJECTED = "the server rejected our request due to an error in our request"


def _rejected() -> ApiError:
    return ApiError(422, "Invalid", _REJECTED, {})


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


def _unescape(token: str) -> str:
    return token.replace("~1", "/").replace("~0", "~")


def _split(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise _rejected()
    return [_unescape(t) for t in path[1:].split("/")]


def _index(container: list[Any], token: str, *, for_add: bool) -> int:
    if token == "-" and for_add:
        return len(container)
    if not token.isdigit() or (len(token) > 1 and token[0] == "0"):
        raise _rejected()
    idx = int(token)
    limit = len(container) if for_add else len(container) - 1
    if idx > limit:
        raise _rejected()
    return idx


def _parent(doc: Any, tokens: list[str]) -> Any:
    cur = doc
    for tok in tokens[:-1]:
        if isinstance(cur, dict):
            if tok not in cur:
                raise _rejected()
            cur = cur[tok]
        elif isinstance(cur, list):
            cur = cur[_index(cur, tok, for_add=False)]
        else:
            raise _rejected()
    return cur


def _get(doc: Any, tokens: list[str]) -> Any:
    if not tokens:
        return doc
    parent = _parent(doc, tokens)
    last = tokens[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise _rejected()
        return parent[last]
    if isinstance(parent, list):
        return parent[_index(parent, last, for_add=False)]
    raise _rejected()


def _remove(doc: Any, tokens: list[str]) -> Any:
    if not tokens:
        raise _rejected()
    parent = _parent(doc, tokens)
    last = tokens[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise _rejected()
        return parent.pop(last)
    if isinstance(parent, list):
        return parent.pop(_index(parent, last, for_add=False))
    raise _rejected()


def _add(doc: Any, tokens: list[str], value: Any) -> Any:
    if not tokens:
        return value
    parent = _parent(doc, tokens)
    last = tokens[-1]
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        parent.insert(_index(parent, last, for_add=True), value)
    else:
        raise _rejected()
    return doc


def json_patch(target: Any, ops: Any) -> Any:
    """RFC 6902 JSON patch; any failing operation rejects the whole patch (422)."""
    if not isinstance(ops, list):
        raise ApiError(
            400,
            "BadRequest",
            "error decoding patch: json: cannot unmarshal object into Go value of type []handlers.jsonPatchOp",
        )
    doc = copy.deepcopy(target)
    for op in ops:
        if not isinstance(op, dict) or "op" not in op or "path" not in op:
            raise _rejected()
        name, tokens = op["op"], _split(op["path"])
        if name == "add":
            doc = _add(doc, tokens, copy.deepcopy(op.get("value")))
        elif name == "remove":
            _remove(doc, tokens)
        elif name == "replace":
            _get(doc, tokens)
            if not tokens:
                doc = copy.deepcopy(op.get("value"))
            else:
                _remove(doc, tokens)
                doc = _add(doc, tokens, copy.deepcopy(op.get("value")))
        elif name in ("move", "copy"):
            src = _split(op.get("from", ""))
            value = _remove(doc, src) if name == "move" else copy.deepcopy(_get(doc, src))
            doc = _add(doc, tokens, value)
        elif name == "test":
            if _get(doc, tokens) != op.get("value"):
                raise _rejected()
        else:
            raise _rejected()
    return doc


def strategic_merge_patch(target: Any, patch: Any) -> Any:
    """Strategic merge patch for built-in types (directives $patch, $retainKeys, $deleteFromPrimitiveList)."""
    if not isinstance(patch, dict):
        raise ApiError(400, "BadRequest", "error decoding patch: strategic merge patch must be a JSON object")
    return _smp_map(target if isinstance(target, dict) else {}, patch)


def _smp_map(target: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    directive = patch.get("$patch")
    if directive == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if k != "$patch"}
    if directive == "delete":
        return {}
    result = dict(target)
    retain = patch.get("$retainKeys")
    for key, value in patch.items():
        if key in ("$patch", "$retainKeys") or key.startswith("$setElementOrder/"):
            continue
        if key.startswith("$deleteFromPrimitiveList/"):
            field = key.split("/", 1)[1]
            if isinstance(result.get(field), list) and isinstance(value, list):
                result[field] = [v for v in result[field] if v not in value]
            continue
        if value is None:
            result.pop(key, None)
        elif isinstance(value, dict):
            cur = result.get(key)
            if value.get("$patch") == "delete":
                result.pop(key, None)
            else:
                result[key] = _smp_map(cur if isinstance(cur, dict) else {}, value)
        elif isinstance(value, list) and key in MERGE_KEYS and isinstance(result.get(key), list):
            result[key] = _smp_list(result[key], value, MERGE_KEYS[key])
        else:
            result[key] = copy.deepcopy(_strip_directives(value))
    if isinstance(retain, list):
        result = {k: v for k, v in result.items() if k in retain}
    return result


def _strip_directives(value: Any) -> Any:
    if isinstance(value, list):
        return [_strip_directives(v) for v in value if not (isinstance(v, dict) and v.get("$patch") == "delete")]
    if isinstance(value, dict):
        return {k: _strip_directives(v) for k, v in value.items() if not k.startswith("$")}
    return value


def _smp_list(target: list[Any], patch: list[Any], key: str) -> list[Any]:
    if any(isinstance(p, dict) and p.get("$patch") == "replace" for p in patch):
        return [_strip_directives(p) for p in patch if not (isinstance(p, dict) and p.get("$patch") == "replace")]
    if key == "":
        merged = list(target)
        for p in patch:
            if p not in merged:
                merged.append(p)
        return merged
    result = [copy.deepcopy(t) for t in target]
    for p in patch:
        if not isinstance(p, dict) or key not in p:
            raise ApiError(400, "BadRequest", f"map: {p} does not contain declared merge key: {key}")
        idx = next((i for i, t in enumerate(result) if isinstance(t, dict) and t.get(key) == p[key]), None)
        if p.get("$patch") == "delete":
            if idx is not None:
                result.pop(idx)
            continue
        if idx is None:
            result.append(_strip_directives(p))
        else:
            result[idx] = _smp_map(result[idx], p)
    return result
