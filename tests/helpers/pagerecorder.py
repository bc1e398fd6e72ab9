"""What the consumers of a LIST page read, and what a pruned shape keeps (reconciler/adapters/kube/shapes.py).

`record(obj)` wraps a decoded object in dict and list subclasses that note every key path a consumer reads:
`.get`/`[]`/`in` note the key (absent or not), iterating, `len`, `.items()`/`.keys()`/`.values()` and copying note
the whole mapping ("*"); list items are "[]". Truthiness (`x or {}`) notes nothing: a pruned object is falsy only
when every key it had is dropped, and the consumers then read `{}` through the same `or {}` as for a missing one.
`dropped(path, kind)` says whether the shape of a kind (shapes.Pod, shapes.Node) loses that path; `project(obj,
kind)` is the full object cut down to what the shape keeps (the typed decode must equal it exactly).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from msgspec import inspect

Path = tuple[str, ...]
WHOLE = "*"
ITEM = "[]"


class _RecDict(dict):  # type: ignore[type-arg]
    def __init__(self, raw: dict[str, Any], path: Path, log: set[Path]) -> None:
        super().__init__(raw)
        self._path, self._log = path, log

    def _child(self, key: Any) -> Any:
        return _wrap(dict.__getitem__(self, key), (*self._path, str(key)), self._log)

    def __getitem__(self, key: Any) -> Any:
        self._log.add((*self._path, str(key)))
        return self._child(key)

    def get(self, key: Any, default: Any = None) -> Any:
        self._log.add((*self._path, str(key)))
        return self._child(key) if dict.__contains__(self, key) else default

    def __contains__(self, key: object) -> bool:
        self._log.add((*self._path, str(key)))
        return dict.__contains__(self, key)

    def _whole(self) -> None:
        self._log.add((*self._path, WHOLE))

    def __iter__(self) -> Iterator[Any]:
        self._whole()
        return dict.__iter__(self)

    def __len__(self) -> int:
        self._whole()
        return dict.__len__(self)

    def __bool__(self) -> bool:
        return dict.__len__(self) > 0

    def keys(self) -> Any:
        self._whole()
        return dict.keys(self)

    def values(self) -> Any:
        self._whole()
        return [self._child(k) for k in dict.keys(self)]

    def items(self) -> Any:
        self._whole()
        return [(k, self._child(k)) for k in dict.keys(self)]

    def __eq__(self, other: object) -> bool:
        self._whole()
        return dict.__eq__(self, other)

    __hash__ = None  # type: ignore[assignment]


class _RecList(list):  # type: ignore[type-arg]
    def __init__(self, raw: list[Any], path: Path, log: set[Path]) -> None:
        super().__init__(raw)
        self._path, self._log = path, log

    def _item(self, value: Any) -> Any:
        return _wrap(value, (*self._path, ITEM), self._log)

    def __iter__(self) -> Iterator[Any]:
        self._log.add((*self._path, ITEM))
        return (self._item(v) for v in list.__iter__(self))

    def __getitem__(self, index: Any) -> Any:
        self._log.add((*self._path, ITEM))
        got = list.__getitem__(self, index)
        return [self._item(v) for v in got] if isinstance(index, slice) else self._item(got)


def _wrap(value: Any, path: Path, log: set[Path]) -> Any:
    if type(value) is dict:
        return _RecDict(value, path, log)
    if type(value) is list:
        return _RecList(value, path, log)
    return value


def record(obj: dict[str, Any], log: set[Path]) -> Any:
    """`obj` (a decoded API object) wrapped so that every key path read on it lands in `log`."""
    return _wrap(obj, (), log)


def _strip(t: inspect.Type) -> list[inspect.Type]:
    """The branches of a field's type that hold a value (None is no shape; inspect leaves UNSET out)."""
    branches = t.types if isinstance(t, inspect.UnionType) else (t,)
    return [b for b in branches if not isinstance(b, inspect.NoneType)]


def dropped(path: Path, kind: Any) -> str | None:
    """None when the shape keeps everything `path` reads, else where it stops keeping it."""
    t: inspect.Type = inspect.type_info(kind)
    for i, key in enumerate(path):
        (t,) = _strip(t)
        if isinstance(t, inspect.AnyType):
            return None  # kept whole below here
        where = ".".join(path[: i + 1])
        if isinstance(t, inspect.ListType):
            if key != ITEM:
                return f"{where}: a list read as {key!r}"
            t = t.item_type
            continue
        assert isinstance(t, inspect.StructType | inspect.TypedDictType), t
        if key == WHOLE:
            return f"{where}: every key of an object the shape prunes"
        fields = {f.encode_name: f for f in t.fields}
        if key not in fields:
            return where
        t = fields[key].type
    return None


def project(obj: Any, kind: Any) -> Any:
    """`obj` cut down to what the shape keeps, as the typed decode must give it (a value that does not fit the
    shape is left as it is: the typed decode refuses such a page, and the full one is used)."""
    return _project(obj, inspect.type_info(kind))


def _project(obj: Any, t: inspect.Type) -> Any:
    for b in _strip(t):
        if isinstance(b, inspect.AnyType):
            return obj
        if isinstance(b, inspect.ListType) and type(obj) is list:
            return [_project(v, b.item_type) for v in obj]
        if isinstance(b, inspect.StructType | inspect.TypedDictType) and type(obj) is dict:
            return {f.encode_name: _project(obj[f.encode_name], f.type) for f in b.fields if f.encode_name in obj}
    return obj
