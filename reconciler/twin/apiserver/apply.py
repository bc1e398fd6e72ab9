"""Server-side apply (`application/apply-patch+yaml`): merge an applied configuration and settle ownership.

Follows sigs.k8s.io/structured-merge-diff merge/update.go `Updater.Apply`, as the apiserver's field manager calls
it (k8s.io/apimachinery pkg/util/managedfields/internal: structuredMergeManager.Apply, FieldManager.Apply):

1. The configuration is merged into the live object (typed/merge.go): maps field by field, associative lists item
   by item on their keys, sets by value, atomic maps and lists replaced whole; the order of a merged list keeps the
   live items, inserting new items before the next item both sides share (mergingWalker.visitListItems).
2. Fields the write changes (added or modified) that another manager owns are conflicts: 409 with one
   `FieldManagerConflict` cause per field, unless `force=true`, which takes them from their owners. A field set to
   the value it already has is shared, never a conflict.
3. The applier's set becomes exactly the fields of its configuration. Fields it applied last time and no longer
   applies are removed from the object unless another manager owns them (Updater.prune).
4. Removed fields leave every other manager's set; the applier's entry (operation Apply, one per manager whatever
   the apiVersion) gets the time when the object changed or the entry is new (managedFieldsUpdater.Apply).

Fields the subresource resets are left out of the configuration (the strategies' GetResetFields: `status` through
the main resource, `spec` through /status). Pure: values in, values out.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from typing import Any

import yaml

from . import fieldmanager, fieldpaths
from .errors import ApiError
from .fieldmanager import Managed
from .fieldpaths import Path
from .fieldschema import Shape

_TOP = ("apiVersion", "kind", "metadata")


def merge(lhs: Any, rhs: Any, shape: Shape) -> Any:
    """typed/merge.go: rhs (the configuration) over lhs (the live value). Nulls in rhs remove the field."""
    if isinstance(lhs, dict) and isinstance(rhs, dict) and not shape.atomic():
        out = dict(lhs)
        for key, value in rhs.items():
            if value is None:
                out.pop(key, None)
            else:
                out[key] = merge(lhs.get(key), value, shape.field(key))
        return out
    if isinstance(lhs, list) and isinstance(rhs, list):
        left, right = fieldpaths.elements(lhs, shape), fieldpaths.elements(rhs, shape)
        if left is not None and right is not None:
            return _merge_items(lhs, left, rhs, right, shape.item())
    return _clean(rhs)


def _clean(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_clean(v) for v in value]
    return copy.deepcopy(value)


def _merge_items(lhs: list[Any], left: list[str], rhs: list[Any], right: list[str], item: Shape) -> list[Any]:
    lmap, rmap = dict(zip(left, lhs, strict=True)), dict(zip(right, rhs, strict=True))
    out: list[Any] = []
    done: set[str] = set()
    r = 0
    for elem in left:
        if elem not in rmap:
            out.append(copy.deepcopy(lmap[elem]))
            continue
        while r < len(right) and elem not in done:
            pe = right[r]
            r += 1
            if pe not in done:
                out.append(merge(lmap.get(pe), rmap[pe], item))
                done.add(pe)
    out.extend(merge(lmap.get(pe), rmap[pe], item) for pe in right[r:] if pe not in done)
    return out


def _sort_key(path: Path) -> tuple[tuple[int, str], ...]:
    order = {"f": 0, "k": 1, "v": 2, "i": 3}
    return tuple((order.get(e[:1], 4), e) for e in path)


def _describe(m: Managed) -> str:
    """printManager."""
    text = f'"{m.manager}"'
    if m.subresource:
        text += f' with subresource "{m.subresource}"'
    if m.operation == "Update":
        text += f" using {m.api_version}"
    return text


def conflict_error(conflicts: list[tuple[Managed, set[Path]]]) -> ApiError:
    """NewConflictError / getConflictMessage: 409 with one FieldManagerConflict cause per field."""
    ordered = sorted(conflicts, key=lambda c: c[0].identity)
    pairs = [(m, p) for m, paths in ordered for p in sorted(paths, key=_sort_key)]
    causes = [
        {"reason": "FieldManagerConflict", "message": f"conflict with {_describe(m)}", "field": fieldpaths.dotted(p)}
        for m, p in pairs
    ]
    if len(pairs) == 1:
        m, p = pairs[0]
        message = f"Apply failed with 1 conflict: conflict with {_describe(m)}: {fieldpaths.dotted(p)}"
    else:
        lines: list[str] = []
        for m, paths in ordered:
            lines.append(f"conflicts with {_describe(m)}:")
            lines.extend(f"- {fieldpaths.dotted(p)}" for p in sorted(paths, key=_sort_key))
        message = f"Apply failed with {len(pairs)} conflicts: " + "\n".join(lines)
    return ApiError(409, "Conflict", message, {"causes": causes})


def _remove(obj: Any, path: Path, shape: Shape) -> None:
    """Delete the value at path, if present."""
    node, parent_shape = obj, shape
    for depth, element in enumerate(path):
        last = depth == len(path) - 1
        if element.startswith("f:") and isinstance(node, dict):
            name = element[2:]
            if name not in node:
                return
            if last:
                del node[name]
                return
            node, parent_shape = node[name], parent_shape.field(name)
        elif isinstance(node, list):
            elems = fieldpaths.elements(node, parent_shape)
            if elems is None or element not in elems:
                return
            idx = elems.index(element)
            if last:
                del node[idx]
                return
            node, parent_shape = node[idx], parent_shape.item()
        else:
            return


def _under(path: Path, owned: Iterable[Path]) -> bool:
    return any(o[: len(path)] == path for o in owned)


def apply(
    key: str,
    shape: Shape,
    managers: list[Managed],
    live: dict[str, Any] | None,
    config: dict[str, Any],
    *,
    manager: str,
    api_version: str,
    subresource: str,
    reset: tuple[str, ...],
    force: bool,
    now: str,
) -> dict[str, Any]:
    """The object after applying `config` as `manager`, with its managedFields; raises the 409 on conflicts.

    `live` is None for an apply that creates the object. `reset`: top-level fields this subresource never writes."""
    config = {k: v for k, v in config.items() if k not in reset}
    cfg_meta = {k: v for k, v in (config.get("metadata") or {}).items() if k != "managedFields"}
    body = {k: v for k, v in config.items() if k not in _TOP}
    applied = fieldmanager.strip_meta(fieldpaths.members({"metadata": cfg_meta, **body}, shape))
    base = fieldmanager.comparable(key, live) if live is not None else fieldmanager.zero(key)
    start = copy.deepcopy(live) if live is not None else {}
    start.setdefault("metadata", {}).pop("managedFields", None)
    merged: dict[str, Any] = merge(start, {"metadata": cfg_meta, **body}, shape)
    added, modified, _ = fieldpaths.compare(base, fieldmanager.comparable(key, merged), shape)
    changed = fieldmanager.strip_meta(added | modified)
    ident = (manager, "Apply", "", subresource)
    mine = next((m for m in managers if m.identity == ident), None)
    others = [m for m in managers if m.identity != ident]
    conflicts = [(m, m.fields & changed) for m in others if m.fields & changed]
    if conflicts and not force:
        raise conflict_error(conflicts)
    for m, taken in conflicts:
        m.fields -= taken
    owned = set(applied).union(*(m.fields for m in others))
    if mine is not None:
        stale = sorted((p for p in mine.fields if p not in owned and not _under(p, owned)), key=len)
        for path in stale:
            _remove(merged, path, shape)
    final = fieldmanager.comparable(key, merged)
    _, _, removed = fieldpaths.compare(base, final, shape)
    kept = [m for m in others if m.fields - removed]
    for m in kept:
        m.fields -= removed
    object_changed = fieldpaths.compare(base, final, shape) != (set(), set(), set())
    when = now if (mine is None or object_changed) else mine.time
    if applied:
        kept.append(Managed(manager, "Apply", api_version, subresource, when, applied))
    fieldmanager.store_entries(merged, fieldmanager.cap_update_managers(kept))
    return merged


MAX_DEPTH = 250  # the twin's own limit (orjson serialises 254 levels); the real decoder allows 10000
MAX_NODES = 1_000_000  # YAML aliases can make a small body a huge tree (go-yaml refuses such "billion laughs")


def decode_config(body: bytes) -> Any:
    """The applied configuration (YAML, JSON being YAML); 400 `error decoding YAML: ...` as the apply patcher says.

    Deeper than MAX_DEPTH is refused here with a 400 (deviation: a real server accepts up to 10000 levels)."""
    try:
        config = yaml.load(body.decode("utf-8"), Loader=yaml.CSafeLoader)
    except (yaml.YAMLError, UnicodeDecodeError, RecursionError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ApiError(400, "BadRequest", f"error decoding YAML: {first}") from exc
    depth = _depth(config)
    if depth > MAX_DEPTH:
        raise ApiError(400, "BadRequest", f"error decoding YAML: nested deeper than {MAX_DEPTH} levels")
    return config


def _depth(value: Any) -> int:
    """Nesting depth, without recursion; 400 past MAX_NODES values (aliases expanded)."""
    deepest = 0
    seen = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, level = stack.pop()
        seen += 1
        if seen > MAX_NODES:
            raise ApiError(400, "BadRequest", "error decoding YAML: excessive aliasing")
        deepest = max(deepest, level)
        if isinstance(node, dict):
            stack.extend((v, level + 1) for v in node.values())
        elif isinstance(node, list):
            stack.extend((v, level + 1) for v in node)
    return deepest
