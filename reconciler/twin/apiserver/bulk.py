"""Bulk load: the stored form of many objects of one shape from one object that took the whole create path.

A twin of 5,000 nodes starts with about 150,000 objects, most of them pods that differ only in their name and
node (the pods holding the partitions, the operator's daemon pods). Taking each through decoding, defaulting,
admission, validation and managedFields costs minutes; the result differs from one object to the next only where
the input differs or the server generates a value. So `Store.load` takes one object of each *shape* through the
whole path (the exemplar) and builds the others from its stored form (the template), here:

* the shape of an object is all of it but its *identity*: `metadata.name` and the kind's per-object fields
  (`IDENTITY_PATHS`: a pod's `spec.nodeName`), whose presence still counts. Labels, annotations, owners, status
  and everything else are part of the shape. Only the kinds of `IDENTITY_PATHS` are templated; any other kind
  takes the whole path object by object;
* what the server generates per object: `uid`, `creationTimestamp`, `resourceVersion`, every managedFields
  `time`, and a pod's service account token volume `kube-api-access-<5 random characters>` (admission.py
  `service_account`), drawn again per object from the store's generator, as admission would draw it;
* a template is only made when the exemplar's stored form carries each identity value at its own path, and
  nowhere else, whole or inside another string (no defaulter or admission plugin copied it, no managedFields key
  names it): otherwise every object of that shape takes the whole path. What validation reads of the identity
  is checked per object by the kind's own metadata rules (`Strategy.validate_metadata`: the name's format); the
  twin validates nothing else of it (ASSUMPTIONS.md).

Pure functions over JSON values; the store (store.py `Store.load`) holds the lock and commits.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson

__all__ = ["IDENTITY_PATHS", "Identity", "Template", "identity", "make_template", "shape_key"]

# The kinds whose objects are built from a template, and their per-object fields beside metadata.name.
IDENTITY_PATHS: dict[str, tuple[tuple[str | int, ...], ...]] = {
    "pods": (("spec", "nodeName"),),
    # Not Leases: each is owned by its node, whose uid managedFields repeats inside a key (`k:{"uid":...}`).
}
SA_VOLUME = re.compile(rb'"(kube-api-access-[a-z0-9]{5})"')
_MARK = "\x00bulk\x00"  # a slot's text; `identity` refuses values with a NUL, `make_template` exemplars with a slot


def _slot(name: str) -> bytes:
    return orjson.dumps(f"{_MARK}{name}")


_ABSENT = object()


def _get(obj: Any, path: Sequence[str | int]) -> Any:
    cur = obj
    for part in path:
        if isinstance(part, int):
            if not isinstance(cur, list) or part >= len(cur):
                return _ABSENT
        elif not isinstance(cur, dict) or part not in cur:
            return _ABSENT
        cur = cur[part]
    return cur


@dataclass(frozen=True, slots=True)
class Identity:
    """What differs between objects of one shape: the name, then the kind's identity paths (None: absent)."""

    name: str
    values: tuple[str | None, ...]

    def slots(self) -> dict[str, str]:
        out = {"name": self.name}
        out.update({f"id{i}": v for i, v in enumerate(self.values) if v is not None})
        return out


def identity(resource: str, obj: Any) -> Identity | None:
    """The object's identity, or None when it cannot be templated (another kind, a value that is not a plain
    string, a generated name): such an object takes the whole create path."""
    paths = IDENTITY_PATHS.get(resource)
    if paths is None or not isinstance(obj, dict) or not isinstance(obj.get("spec"), dict):
        return None
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        return None
    name = meta.get("name")
    if not isinstance(name, str) or not name or "\x00" in name:
        return None
    values: list[str | None] = []
    for path in paths:
        value = _get(obj, path)
        if value is _ABSENT:
            values.append(None)
        elif isinstance(value, str) and value and "\x00" not in value:
            values.append(value)
        else:
            return None
    return Identity(name, tuple(values))


def _blank(obj: Any, path: Sequence[str | int]) -> Any:
    """A copy of `obj` along `path` (shallow elsewhere) whose value there is True."""
    if not path:
        return True
    head, rest = path[0], path[1:]
    if isinstance(obj, dict):
        return {**obj, str(head): _blank(obj[head], rest)}
    assert isinstance(head, int)
    out = list(obj)
    out[head] = _blank(obj[head], rest)
    return out


def shape_key(resource: str, obj: dict[str, Any], ident: Identity, namespace: str | None, status: Any) -> bytes:
    """All of the object but its identity (whose presence still counts), with its namespace and status."""
    out: Any = _blank(obj, ("metadata", "name"))
    for path, value in zip(IDENTITY_PATHS[resource], ident.values, strict=True):
        if value is not None:
            out = _blank(out, path)
    return orjson.dumps([namespace, out, status])


_SLOT = re.compile(rb'"\\u0000bulk\\u0000(\w+)"')


@dataclass(frozen=True, slots=True)
class Template:
    """An exemplar's stored item bytes (list-item form) cut at its slots: parts[0] slot[0] parts[1] ... parts[-1]."""

    parts: tuple[bytes, ...]
    slots: tuple[str, ...]
    sa_volume: bool  # a service account token volume name to draw per object

    @classmethod
    def of(cls, item: bytes, sa_volume: bool) -> Template:
        pieces = _SLOT.split(item)
        return cls(tuple(pieces[0::2]), tuple(p.decode() for p in pieces[1::2]), sa_volume)

    def fill(self, ident: Identity, *, uid: str, rv: int, now: str, sa_volume: str | None) -> bytes:
        """The object's item bytes: every slot replaced by its JSON string."""
        values = ident.slots()
        values.update(uid=uid, rv=str(rv), now=now)
        if sa_volume is not None:
            values["sa"] = sa_volume
        out = [self.parts[0]]
        for slot, part in zip(self.slots, self.parts[1:], strict=True):
            out.append(orjson.dumps(values[slot]))
            out.append(part)
        return b"".join(out)


def _put(obj: Any, path: Sequence[str | int], expected: Any, slot: str) -> bool:
    """Replace the value at `path` by a slot if it is `expected`; False when it is not."""
    parent = _get(obj, path[:-1])
    if parent is _ABSENT or _get(parent, path[-1:]) is _ABSENT or _get(parent, path[-1:]) != expected:
        return False
    parent[path[-1]] = f"{_MARK}{slot}"
    return True


def make_template(resource: str, stored_item: bytes, ident: Identity, sent_volumes: Sequence[str]) -> Template | None:
    """The template of a shape from its exemplar's stored list-item bytes, or None when a per-object value is not
    where the input put it or shows up anywhere else."""
    if b"\\u0000" in stored_item:
        return None
    obj: dict[str, Any] = orjson.loads(stored_item)
    checks: list[tuple[Sequence[str | int], str, str]] = [(("metadata", "name"), ident.name, "name")]
    for i, (id_path, value) in enumerate(zip(IDENTITY_PATHS[resource], ident.values, strict=True)):
        if value is not None:
            checks.append((id_path, value, f"id{i}"))
    for path, value, slot in checks:
        if not _put(obj, path, value, slot):
            return None
    meta = obj["metadata"]
    for key, slot in (("uid", "uid"), ("resourceVersion", "rv"), ("creationTimestamp", "now")):
        if key in meta:
            meta[key] = f"{_MARK}{slot}"
    for entry in meta.get("managedFields") or ():
        if isinstance(entry, dict) and "time" in entry:
            entry["time"] = f"{_MARK}now"
    item = orjson.dumps(obj)
    # A generated token volume: a `kube-api-access-*` name the stored form has and the input did not send.
    found = {m.group(1).decode() for m in SA_VOLUME.finditer(item)} - set(sent_volumes)
    if len(found) > 1:
        return None
    if found:
        item = item.replace(orjson.dumps(next(iter(found))), _slot("sa"))
    # Nothing else may carry an identity value, whole or inside another string (a defaulter or admission plugin
    # that copied it, managedFields keys such as `k:{"uid":"..."}`): the whole path then.
    if any(orjson.dumps(value)[1:-1] in item for _, value, _ in checks):
        return None
    return Template.of(item, bool(found))
