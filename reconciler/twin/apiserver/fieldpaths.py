"""Field paths and field sets as structured-merge-diff defines them, and their `FieldsV1` encoding.

A path is a tuple of encoded path elements: `f:name` (a field or map key), `k:{"name":"cuda"}` (an item of an
associative list, its key fields as compact JSON sorted by name), `v:"x"` (an item of a set), `i:3` (an item of
an atomic-less list without keys). A field set holds paths; a path that is a member and also has members below it
is written `".": {}` in FieldsV1 (sigs.k8s.io/structured-merge-diff fieldpath/serialize.go, serialize-pe.go).

`compare` follows typed/compare.go: a value present only on the right is Added with everything below it, only on
the left Removed with everything below it, and a leaf (or an atomic map or list) whose value differs is Modified;
maps and keyed lists present on both sides are walked, and are never themselves Modified.

Pure: no I/O.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

import orjson

from .fieldschema import Shape

Path = tuple[str, ...]
_ABSENT: Any = object()
_ORDER = {"f": 0, "k": 1, "v": 2, "i": 3}
_SCALARS = (str, int, float, bool)  # JSON leaves: equal values of one of these types compare as the same value


def _compact(value: Any) -> str:
    """Compact JSON with sorted keys, UTF-8 as is (how a key or a set value is written in a path element)."""
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()


def _item_elements(items: list[Any], shape: Shape) -> list[str] | None:
    """Path elements of a keyed list's or a set's items; None when the list cannot be keyed (then it is a leaf)."""
    kind = shape.list_type()
    out: list[str] = []
    for idx, item in enumerate(items):
        if kind == "map":
            if not isinstance(item, Mapping):
                return None
            keys = shape.list_keys(item)
            present = {k: item[k] for k in keys if k in item and item[k] is not None}
            out.append("k:" + _compact(present) if present else f"i:{idx}")
        elif kind == "set":
            if isinstance(item, (dict, list)):
                return None
            out.append("v:" + _compact(item))
        else:
            return None
    if len(set(out)) != len(out):
        return None  # duplicate keys: structured-merge-diff refuses to key such a list; it stays one value
    return out


def elements(value: list[Any], shape: Shape) -> list[str] | None:
    """Public form of _item_elements (used by the apply merge)."""
    return _item_elements(value, shape)


def members(value: Any, shape: Shape, prefix: Path = ()) -> set[Path]:
    """Every path below (not including) `prefix` that `value` sets: what an applied configuration owns."""
    out: set[Path] = set()
    _members(value, shape, prefix, out)
    return out


def _members(value: Any, shape: Shape, prefix: Path, out: set[Path]) -> None:
    if isinstance(value, dict) and not shape.atomic():
        for key, child in value.items():
            path = (*prefix, "f:" + key)
            out.add(path)
            if child is not None:
                _members(child, shape.field(key), path, out)
    elif isinstance(value, list):
        elems = _item_elements(value, shape)
        if elems is None:
            return
        item_shape = shape.item()
        for elem, child in zip(elems, value, strict=True):
            path = (*prefix, elem)
            out.add(path)
            _members(child, item_shape, path, out)


def compare(lhs: Any, rhs: Any, shape: Shape) -> tuple[set[Path], set[Path], set[Path]]:
    """(added, modified, removed) from lhs to rhs, both whole objects (see the module docstring)."""
    added: set[Path] = set()
    modified: set[Path] = set()
    removed: set[Path] = set()
    _compare(lhs, rhs, shape, (), added, modified, removed)
    return added, modified, removed


def _compare(
    lhs: Any, rhs: Any, shape: Shape, path: Path, added: set[Path], modified: set[Path], removed: set[Path]
) -> None:
    if lhs is _ABSENT and rhs is _ABSENT:
        return
    if lhs is _ABSENT:
        if path:
            added.add(path)
        _members(rhs, shape, path, added)
        return
    if rhs is _ABSENT:
        if path:
            removed.add(path)
        _members(lhs, shape, path, removed)
        return
    if isinstance(lhs, dict | list) and type(lhs) is type(rhs) and _identical(lhs, rhs):
        return  # an unchanged map or list holds no added, modified or removed path (most of an object on a write)
    # null is a value (a nil slice, map or pointer Go writes as null): walked as an empty map or list
    both_null = lhs is None and rhs is None
    if isinstance(lhs, dict | None) and isinstance(rhs, dict | None) and not both_null and not shape.atomic():
        lmap, rmap = lhs or {}, rhs or {}
        for key in {**lmap, **rmap}:
            lval, rval = lmap.get(key, _ABSENT), rmap.get(key, _ABSENT)
            if type(lval) is type(rval) and type(lval) in _SCALARS and lval == rval:
                continue  # an unchanged leaf (most labels of a relabelled node): the walk would find no path
            sub = (*path, "f:" + key)
            _compare(lval, rval, shape.field(key), sub, added, modified, removed)
        return
    if isinstance(lhs, list | None) and isinstance(rhs, list | None) and not both_null:
        left, right = _item_elements(lhs or [], shape), _item_elements(rhs or [], shape)
        if left is not None and right is not None:
            lmap, rmap = dict(zip(left, lhs or [], strict=True)), dict(zip(right, rhs or [], strict=True))
            item_shape = shape.item()
            for elem in {**lmap, **rmap}:
                sub = (*path, elem)
                _compare(lmap.get(elem, _ABSENT), rmap.get(elem, _ABSENT), item_shape, sub, added, modified, removed)
            return
    if not same(lhs, rhs) and path:
        modified.add(path)


def _identical(a: Any, b: Any) -> bool:
    """The same JSON, types included (true is not 1, 1 is not 1.0), so walking it could find no path: Python's
    equality first (C speed, but True == 1 == 1.0), then the type-exact bytes only where that holds. Not
    behaviour, only a shortcut: a value orjson cannot write, or bytes that differ, is walked as before."""
    if a != b:
        return False
    try:
        # equal bytes in insertion order are identical JSON (most writes: both sides decoded from the same
        # stored bytes); only when the orders differ are the key-sorted bytes needed
        return orjson.dumps(a) == orjson.dumps(b) or (
            orjson.dumps(a, option=orjson.OPT_SORT_KEYS) == orjson.dumps(b, option=orjson.OPT_SORT_KEYS)
        )
    except orjson.JSONEncodeError:
        return False


def same(a: Any, b: Any) -> bool:
    """JSON equality (1 == 1.0, but True is not 1)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    return type(a) is type(b) and bool(a == b)


def strip_prefixes(paths: Iterable[Path], prefixes: Iterable[Path]) -> set[Path]:
    """Paths that are neither one of `prefixes` nor below one (RecursiveDifference)."""
    heads = tuple(prefixes)
    return {p for p in paths if not any(p[: len(h)] == h for h in heads)}


def element_order(element: str) -> tuple[int, str]:
    """How serialize.go orders path elements: fields, then keys, values, indices."""
    return (_ORDER.get(element[:1], 4), element)


# Memos of encode and decode. A fleet's objects of one kind share a handful of field sets (FieldsV1 holds the
# field names and keys, not the values: every node relabelled by the same manager has the same set), and every
# write re-encodes all of an object's managers, so most calls are repeats. Bounded; each hit returns a fresh
# copy (callers mutate sets and objects), so a memo is never observable.
_MEMO_SIZE = 4096
_ENCODED: dict[frozenset[Path], bytes] = {}
_DECODED: dict[bytes, frozenset[Path]] = {}


def _remember(memo: dict[Any, Any], key: Any, value: Any) -> None:
    if len(memo) >= _MEMO_SIZE:
        memo.clear()  # a fleet's working set is small: starting over is cheaper than tracking recency
    memo[key] = value


def encode(paths: Iterable[Path]) -> dict[str, Any]:
    """The FieldsV1 JSON of a field set: nested `f:`/`k:`/`v:`/`i:` objects, `"."` marking a member with children."""
    key = frozenset(paths)
    raw = _ENCODED.get(key)
    if raw is None:
        raw = orjson.dumps(_encode(key))
        _remember(_ENCODED, key, raw)
    out: dict[str, Any] = orjson.loads(raw)
    return out


def _encode(paths: Iterable[Path]) -> dict[str, Any]:
    tree: dict[str, Any] = {}
    member_marks: set[Path] = set()
    for path in paths:
        node = tree
        for element in path:
            node = node.setdefault(element, {})
        member_marks.add(path)
    return _ordered(tree, (), member_marks)


def _ordered(node: dict[str, Any], path: Path, marks: set[Path]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if node and path in marks:
        out["."] = {}
    for element in sorted(node, key=element_order):
        out[element] = _ordered(node[element], (*path, element), marks)
    return out


def decode(fields_v1: Any) -> set[Path]:
    """The field set of a FieldsV1 JSON object; ValueError when it is not one."""
    if not isinstance(fields_v1, dict):
        raise ValueError("fieldsV1 must be an object")
    try:
        key = orjson.dumps(fields_v1)
    except (orjson.JSONEncodeError, TypeError):
        return _decode(fields_v1)  # not JSON (a Python caller's object): decoded (and refused) as it is
    hit = _DECODED.get(key)
    if hit is None:
        hit = frozenset(_decode(fields_v1))  # a ValueError is raised here, never remembered
        _remember(_DECODED, key, hit)
    return set(hit)


def _decode(fields_v1: dict[str, Any]) -> set[Path]:
    out: set[Path] = set()
    stack: list[tuple[Path, dict[str, Any]]] = [((), fields_v1)]
    while stack:
        path, node = stack.pop()
        for element, child in node.items():
            if element == ".":
                if path:
                    out.add(path)
                continue
            if element[:2] not in ("f:", "k:", "v:", "i:") or not isinstance(child, dict):
                raise ValueError(f"invalid path element {element!r}")
            sub = (*path, element)
            if child:
                stack.append((sub, child))
            else:
                out.add(sub)
    return out


def dotted(path: Path) -> str:
    """A path as fieldpath.Path.String() writes it in conflict messages: `.spec.containers[name="x"].image`."""
    parts: list[str] = []
    for element in path:
        kind, body = element[:1], element[2:]
        if kind == "f":
            parts.append("." + body)
        elif kind == "k":
            try:
                keys = json.loads(body)
            except ValueError:
                keys = {}
            parts.append("[" + ",".join(f"{k}={_go_value(v)}" for k, v in sorted(keys.items())) + "]")
        elif kind == "v":
            try:
                parts.append(f"[={_go_value(json.loads(body))}]")
            except ValueError:
                parts.append(f"[={body}]")
        else:
            parts.append(f"[{body}]")
    return "".join(parts)


def _go_value(value: Any) -> str:
    """value.ToString: strings quoted, numbers and booleans bare."""
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    return str(value)
