"""The twin's object store: the semantics of kube-apiserver + etcd for the resources the twin serves.

Thread-safe, in memory, no I/O. One global resourceVersion counter across all types (as etcd's revision);
metadata.generation on spec changes only; 409 on a stale resourceVersion; status only through the status
subresource; per-kind defaulting/validation (kinds.py) and CRD schema handling (schema.py) run for Python callers
and HTTP alike. Objects are kept as JSON dicts that are never mutated once committed, each with its serialised bytes
cached (orjson), so large paginated lists are served by joining bytes.

Notification contract (used by the GPU Operator simulator): `subscribe(cb)`; after every committed write,
`cb(event_type, obj_copy)` runs in the writing thread, after the lock is released, in global commit order. Writes
made from inside a callback are queued and delivered once the current delivery round finishes.
Watches (HTTP) read the event log kept here (bounded; older resourceVersions answer 410 Expired).
"""

from __future__ import annotations

import base64
import bisect
import functools
import gc
import random
import sys
import threading
import uuid
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import orjson

from . import (
    admission,
    apply,
    bulk,
    defaults,
    fieldmanager,
    kinds,
    knownfields,
    limitranger,
    nodelifecycle,
    quota,
    registry,
    schema,
    strategies,
)
from .errors import (
    ApiError,
    already_exists,
    bad_request,
    conflict,
    expired,
    invalid,
    not_found,
    unsupported_media_type,
)
from .fieldschema import Shape, root_shape
from .patch import json_patch, merge_patch, strategic_merge_patch
from .resources import BUILTINS, ResourceType
from .selectors import FieldSelector, LabelSelector, field_value, parse_field_selector, parse_label_selector

Callback = Callable[[str, dict[str, Any]], None]
_List = list  # `Store.list` shadows the builtin inside the class body
WATCH_CACHE_SIZE = 100  # kube-apiserver's --default-watch-cache-size: events kept per resource for watches
_EVENTS_V1 = "events.events.k8s.io"
_SORTED_KEYS = orjson.OPT_SORT_KEYS
PYTHON_MANAGER = "twin"  # the field manager of writes made through the Python API without one
_NO_TEMPLATE = bulk.Template((), (), False)  # a shape not seen yet in a load


class _Entry:
    """A committed object, kept as serialised bytes only (few Python objects: cheap GC and memory at 40k pods),
    plus the small index that label and field selectors need."""

    __slots__ = ("fields", "head", "item", "labels", "rv")

    def __init__(self, rt: ResourceType, obj: dict[str, Any], item: bytes) -> None:
        self.item = item  # serialised as a list item (built-ins omit kind/apiVersion there, like the real server)
        self.head = None if rt.is_custom else (obj.get("kind", rt.kind), obj.get("apiVersion", rt.api_version))
        meta = obj.get("metadata") or {}
        self.rv = int(meta.get("resourceVersion", 0))
        labels = meta.get("labels")
        self.labels: dict[str, str] | None = (
            {sys.intern(k): sys.intern(v) for k, v in labels.items()} if labels else None
        )
        defaults = rt.field_defaults
        getters = rt.field_getters
        values = []
        for path, parts in rt.field_paths:
            cur: Any = obj
            getter = getters.get(path) if getters else None
            if getter is not None:
                cur = getter(obj)
            else:
                for part in parts:
                    cur = cur.get(part) if isinstance(cur, dict) else None
            if cur is None or cur == "":
                values.append(defaults.get(path, ""))
            elif isinstance(cur, bool):
                values.append("true" if cur else "false")
            else:
                values.append(sys.intern(str(cur)))
        self.fields = tuple(values)

    @classmethod
    def like(cls, proto: _Entry, item: bytes, rv: int, fields: tuple[str, ...]) -> _Entry:
        """An entry of the same shape as `proto` (a bulk load's template): its labels are shared, never mutated."""
        entry = cls.__new__(cls)
        entry.item, entry.head, entry.rv, entry.labels, entry.fields = item, proto.head, rv, proto.labels, fields
        return entry

    @property
    def obj(self) -> dict[str, Any]:
        """A fresh dict of the full object (the caller may mutate it)."""
        body: dict[str, Any] = orjson.loads(self.item)
        if self.head is None:
            return body
        return {"kind": self.head[0], "apiVersion": self.head[1], **body}


@dataclass
class _Table:
    rt: ResourceType
    items: dict[str, _Entry] = field(default_factory=dict)  # sort key "ns/name" (or "name") -> entry
    keys: list[str] = field(default_factory=list)  # sorted sort keys, for pagination


@dataclass(frozen=True, slots=True)
class _Shape:
    """A bulk load's template with what its objects share in the store (Store._shape_of)."""

    template: bulk.Template
    proto: _Entry
    per_object: tuple[tuple[int, int], ...]  # (index in the entry's fields, identity value: -1 name, else its path)
    wanted: bool  # a subscriber is told of these objects
    namespace: str | None


@dataclass(frozen=True)
class WatchEvent:
    rv: int
    storage: str
    type: str
    namespace: str
    obj: dict[str, Any]
    prev: dict[str, Any] | None = None  # the object before a MODIFIED (for selector transitions in watches)


@dataclass(frozen=True)
class ListPage:
    items: list[bytes]
    resource_version: int
    continue_token: str | None
    remaining: int | None


Wants = Callable[[dict[str, Any]], bool]  # which committed objects a subscriber is told about (reads only)


def _of_kinds(kinds: Iterable[str]) -> Wants:
    wanted = frozenset(kinds)

    def wants(obj: dict[str, Any]) -> bool:
        kind = obj.get("kind")
        return isinstance(kind, str) and kind in wanted

    return wants


def _namespaced(obj: dict[str, Any]) -> bool:
    meta = obj.get("metadata")
    return isinstance(meta, dict) and bool(meta.get("namespace"))


def _json_type(value: Any) -> str:
    """How encoding/json names a JSON value's type in an UnmarshalTypeError."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, dict):
        return "object"
    return "array" if isinstance(value, list) else "string"


def _dumps(obj: Any, sort: bool = False) -> bytes:
    return orjson.dumps(obj, option=_SORTED_KEYS) if sort else orjson.dumps(obj)


def _clone(obj: Any) -> Any:
    return orjson.loads(orjson.dumps(obj))


def _clone_obj(obj: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = orjson.loads(orjson.dumps(obj))
    return out


class Store:
    """In-memory API storage with the real server's write semantics. See the module docstring."""

    def __init__(
        self, *, bare: bool = False, seed: int | None = None, watch_cache_size: int = WATCH_CACHE_SIZE
    ) -> None:
        self.watch_cache_size = watch_cache_size
        self.bare = bare  # True: behave like the transcripts' server with no controllers at all
        self._lock = threading.RLock()
        self._cond = threading.Condition(self._lock)
        self._rv = 1
        self._types: dict[str, ResourceType] = {}
        self._tables: dict[str, _Table] = {}
        self._logs: dict[str, list[WatchEvent]] = {}  # per storage: the watch cache window
        self._floors: dict[str, int] = {}  # per storage: watches from an RV below this get 410 Expired
        # each callback with the test of the events it is told about (None: every event) and whether it gets its
        # own copy (every subscriber does, but the store's own read-only node lifecycle controller)
        self._subscribers: list[tuple[Callback, Wants | None, bool]] = []
        self._pending: deque[tuple[str, dict[str, Any]]] = deque()  # a bulk load queues 100,000s at once
        self._dispatch_lock = threading.Lock()
        self._local = threading.local()
        self._pod_logs: dict[tuple[str, str, str], str] = {}  # (namespace, pod, container) -> text
        self._rng = random.Random(seed)
        for rt in BUILTINS:
            self.register(rt)
        if not bare:
            # the node lifecycle controller (nodelifecycle.py) and the resource quota controller (quota.py), each
            # told only of what it acts on (nodes; objects in a namespace)
            self._subscribers.append((self._node_lifecycle, _of_kinds(("Node",)), False))
            self._subscribers.append((self._quota_controller, self._in_quota_namespace, True))

    # ------------------------------------------------------------ registry

    def register(self, rt: ResourceType) -> None:
        """Serve a resource type (the built-ins, a CRD's versions once it is created)."""
        self._types[rt.key] = rt
        storage = self._storage_key(rt)
        if storage not in self._tables:
            self._tables[storage] = _Table(rt)

    def unregister(self, rt: ResourceType) -> None:
        """Stop serving a resource type and drop its objects (a deleted CRD's versions)."""
        self._types.pop(rt.key, None)
        self._tables.pop(rt.key, None)

    @property
    def rng(self) -> random.Random:
        """The seeded source of generated names (generateName, pod suffixes)."""
        return self._rng

    def exists(self, resource: str, namespace: str | None, name: str) -> bool:
        """Whether the object is stored. Lock held."""
        return self._get_entry(resource, namespace, name) is not None

    def count(self, resource: str) -> int:
        """How many objects of a resource are stored (every namespace), none of them decoded."""
        rt = self.resource_type(resource)
        with self._lock:
            return len(self._table(rt).items)

    @staticmethod
    def _storage_key(rt: ResourceType) -> str:
        return "events" if rt.key == _EVENTS_V1 else rt.key

    def resource_types(self) -> list[ResourceType]:
        with self._lock:
            return list(self._types.values())

    def resource_type(self, resource: str) -> ResourceType:
        rt = self._types.get(resource)
        if rt is None:
            raise ApiError(404, "NotFound", "the server could not find the requested resource", {})
        return rt

    def find_type(self, group: str, version: str, plural: str) -> ResourceType | None:
        rt = self._types.get(f"{plural}.{group}" if group else plural)
        if rt is not None and rt.version == version:
            return rt
        return None

    @property
    def resource_version(self) -> int:
        with self._lock:
            return self._rv

    # ------------------------------------------------------------ helpers

    def _table(self, rt: ResourceType) -> _Table:
        return self._tables[self._storage_key(rt)]

    @staticmethod
    def _sort_key(rt: ResourceType, namespace: str | None, name: str) -> str:
        return f"{namespace}/{name}" if rt.namespaced else name

    def _ns(self, rt: ResourceType, namespace: str | None) -> str | None:
        if not rt.namespaced:
            return None
        if not namespace:
            raise bad_request("the server could not find the requested resource: namespace is required")
        return namespace

    def _to_view(self, rt: ResourceType, obj: dict[str, Any]) -> dict[str, Any]:
        if rt.key == _EVENTS_V1:
            return kinds.event_core_to_v1(obj)
        return obj

    def _fresh_view(self, rt: ResourceType, entry: _Entry) -> dict[str, Any]:
        """A stored object as its type's view, in new dicts the caller may mutate: entry.obj is decoded afresh from
        the stored bytes on each call, so only a view built over it (events.k8s.io) is copied again."""
        if rt.key == _EVENTS_V1:
            return _clone_obj(self._to_view(rt, entry.obj))
        return entry.obj

    def _item_bytes(self, rt: ResourceType, obj: dict[str, Any]) -> bytes:
        if rt.is_custom:
            raw = _dumps(obj, sort=True)
        else:
            raw = _dumps({k: v for k, v in obj.items() if k not in ("kind", "apiVersion")})
        # orjson's result keeps its growth buffer (~10x the payload); a stored copy is compact
        return bytes(memoryview(raw))

    def object_bytes(self, rt: ResourceType, obj: dict[str, Any]) -> bytes:
        """How the server serialises a single object of this type (CRs: sorted keys, like unstructured JSON)."""
        if rt.is_custom:
            return _dumps(obj, sort=True)
        head = {"kind": obj.get("kind", rt.kind), "apiVersion": obj.get("apiVersion", rt.api_version)}
        head.update({k: v for k, v in obj.items() if k not in ("kind", "apiVersion")})
        return _dumps(head)

    def _next_rv(self) -> int:
        self._rv += 1
        return self._rv

    def _commit(
        self,
        rt: ResourceType,
        event_type: str,
        obj: dict[str, Any],
        *,
        remove: bool = False,
        prev: dict[str, Any] | None = None,
    ) -> None:
        """Store (or remove) a finished object, log the event and queue notifications. Lock held."""
        table = self._table(rt)
        meta = obj["metadata"]
        key = self._sort_key(rt, meta.get("namespace"), meta["name"])
        if remove:
            table.items.pop(key, None)
            idx = bisect.bisect_left(table.keys, key)
            if idx < len(table.keys) and table.keys[idx] == key:
                table.keys.pop(idx)
        else:
            if key not in table.items:
                bisect.insort(table.keys, key)
            table.items[key] = _Entry(table.rt, obj, self._item_bytes(table.rt, obj))
        storage = self._storage_key(rt)
        ev = WatchEvent(int(meta["resourceVersion"]), storage, event_type, meta.get("namespace", ""), obj, prev)
        log = self._logs.setdefault(storage, [])
        log.append(ev)
        if len(log) > self.watch_cache_size:  # keep the newest `watch_cache_size` events, like the watch cache
            del log[0]
            self._floors[storage] = log[0].rv - 1
        self._pending.append((event_type, obj))
        self._cond.notify_all()

    # ------------------------------------------------------------ notifications

    def subscribe(
        self, callback: Callback, kinds: Iterable[str] | None = None, wants: Wants | None = None
    ) -> Callable[[], None]:
        """Receive (event_type, object copy) after every committed write - of one of `kinds` only when given, and
        only those `wants(obj)` accepts when given (a read-only test of the committed object, run before the copy:
        a controller that would ignore the others is spared their copies); returns an unsubscribe function."""
        test = None if kinds is None else _of_kinds(kinds)
        if wants is not None:
            of_kind = test
            test = wants if of_kind is None else (lambda obj: of_kind(obj) and wants(obj))
        entry = (callback, test, True)
        with self._lock:
            self._subscribers.append(entry)

        def unsubscribe() -> None:
            with self._lock:
                if entry in self._subscribers:
                    self._subscribers.remove(entry)

        return unsubscribe

    def _dispatch(self) -> None:
        if getattr(self._local, "dispatching", False):
            return  # nested write from a callback: the outer loop delivers it in order
        with self._dispatch_lock:
            self._local.dispatching = True
            try:
                while True:
                    with self._lock:
                        if not self._pending:
                            return
                        event_type, obj = self._pending.popleft()
                        subscribers = list(self._subscribers)
                    raw = b""  # serialised once per event, if anyone wants it; each subscriber decodes its own copy
                    for cb, wants, copies in subscribers:
                        if wants is not None and not wants(obj):
                            continue
                        if not copies:
                            cb(event_type, obj)  # committed objects are never mutated; this reader does not either
                            continue
                        raw = raw or orjson.dumps(obj)
                        cb(event_type, orjson.loads(raw))
            finally:
                self._local.dispatching = False

    # ------------------------------------------------------------ reads

    def get(self, resource: str, name: str, namespace: str | None = None) -> dict[str, Any]:
        rt = self.resource_type(resource)
        with self._lock:
            entry = self._table(rt).items.get(self._sort_key(rt, self._ns(rt, namespace), name))
            if entry is None:
                raise not_found(rt.plural, rt.group, name)
            return self._fresh_view(rt, entry)

    def get_bytes(self, resource: str, name: str, namespace: str | None = None) -> bytes:
        rt = self.resource_type(resource)
        with self._lock:
            entry = self._table(rt).items.get(self._sort_key(rt, self._ns(rt, namespace), name))
            if entry is None:
                raise not_found(rt.plural, rt.group, name)
            return self.object_bytes(rt, self._to_view(rt, entry.obj))

    def list(
        self,
        resource: str,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> _List[dict[str, Any]]:
        """All matching objects (fresh copies), ordered like the real server (by namespace, name)."""
        page = self.list_page(resource, namespace, label_selector, field_selector)
        rt = self.resource_type(resource)
        out: _List[dict[str, Any]] = []
        for raw in page.items:
            obj = orjson.loads(raw)
            if not rt.is_custom:
                obj = {"kind": rt.kind, "apiVersion": rt.api_version, **obj}
            out.append(obj)
        return out

    def list_page(
        self,
        resource: str,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        *,
        limit: int = 0,
        continue_token: str | None = None,
        resource_version: str | None = None,
        resource_version_match: str | None = None,
    ) -> ListPage:
        rt = self.resource_type(resource)
        labels = parse_label_selector(label_selector)
        fields = parse_field_selector(field_selector, rt.field_selectors, rt.field_aliases)
        start = ""
        with self._lock:
            list_rv = self._rv
            if continue_token:
                start, list_rv = self._decode_continue(continue_token)
            elif resource_version not in (None, "", "0"):
                self._check_list_rv(resource_version or "", resource_version_match, limit)
            table = self._table(rt)
            keys = table.keys
            prefix = f"{namespace}/" if (rt.namespaced and namespace) else ""
            lo = bisect.bisect_left(keys, max(prefix, start)) if (prefix or start) else 0
            if start:
                lo = bisect.bisect_right(keys, start)
                lo = max(lo, bisect.bisect_left(keys, prefix)) if prefix else lo
            hi = bisect.bisect_left(keys, prefix[:-1] + "0") if prefix else len(keys)  # '0' sorts right after '/'
            selecting = bool(labels.requirements or fields.requirements or rt.key == _EVENTS_V1)
            items: _List[bytes] = []
            last_key = ""
            idx = lo
            while idx < hi:
                key = keys[idx]
                idx += 1
                entry = table.items[key]
                if selecting:
                    if rt.key == _EVENTS_V1:
                        view = self._to_view(rt, entry.obj)
                        if not self._matches(rt, view, labels, fields):
                            continue
                        items.append(self._item_bytes(rt, view))
                    elif self._entry_matches(rt, entry, labels, fields):
                        items.append(entry.item)
                    else:
                        continue
                else:
                    items.append(entry.item)
                last_key = key
                if limit and len(items) >= limit:
                    break
            more = bool(limit) and idx < hi and self._has_more(rt, table, keys, idx, hi, labels, fields, selecting)
            token = self._encode_continue(list_rv, last_key) if more else None
            remaining = (hi - idx) if (more and not selecting) else None
            return ListPage(items, list_rv, token, remaining)

    def _has_more(
        self,
        rt: ResourceType,
        table: _Table,
        keys: _List[str],
        idx: int,
        hi: int,
        labels: LabelSelector,
        fields: FieldSelector,
        selecting: bool,
    ) -> bool:
        if not selecting:
            return idx < hi
        if rt.key == _EVENTS_V1:
            return any(
                self._matches(rt, self._to_view(rt, table.items[keys[i]].obj), labels, fields) for i in range(idx, hi)
            )
        return any(self._entry_matches(rt, table.items[keys[i]], labels, fields) for i in range(idx, hi))

    @staticmethod
    def _entry_matches(rt: ResourceType, entry: _Entry, labels: LabelSelector, fields: FieldSelector) -> bool:
        if labels.requirements and not labels.matches(entry.labels):
            return False
        if fields.requirements:
            order = rt.field_index
            return fields.matches(lambda path: entry.fields[order[path]])
        return True

    def _matches(self, rt: ResourceType, obj: dict[str, Any], labels: LabelSelector, fields: FieldSelector) -> bool:
        if labels.requirements and not labels.matches((obj.get("metadata") or {}).get("labels")):
            return False
        if fields.requirements:
            defaults = rt.field_defaults

            def lookup(path: str) -> str:
                getter = rt.field_getters.get(path)
                value = str(getter(obj)) if getter is not None else field_value(obj, path)
                return value if value != "" else defaults.get(path, "")

            return fields.matches(lookup)
        return True

    @staticmethod
    def _encode_continue(rv: int, last_key: str) -> str:
        raw = orjson.dumps({"v": "meta.k8s.io/v1", "rv": rv, "start": last_key + "\u0000"})
        return base64.urlsafe_b64encode(raw).decode().rstrip("=")

    def _decode_continue(self, token: str) -> tuple[str, int]:
        try:
            data = orjson.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
            start, rv = str(data["start"]), int(data["rv"])
        except (ValueError, KeyError, TypeError) as exc:
            raise bad_request(f"continue key is not valid: {exc}") from exc
        if rv < 0:
            raise expired(
                "The provided continue parameter is too old to display a consistent list result. You can start a "
                "new list without the continue parameter, or use the continue token in this response to retrieve "
                "the remainder of the results. Continuing with the provided token results in an inconsistent list - "
                "objects that were created, modified, or deleted between the time the first chunk was returned and "
                "now may show up in the list."
            )
        return start.rstrip("\u0000").lstrip("/"), rv

    def _check_list_rv(self, rv_text: str, match: str | None, limit: int) -> None:
        try:
            rv = int(rv_text)
        except ValueError as exc:
            raise bad_request(f'strconv.ParseUint: parsing "{rv_text}": invalid syntax') from exc
        if rv > self._rv:
            raise ApiError(
                504,
                "Timeout",
                f"Too large resource version: {rv}, current: {self._rv}",
                {
                    "causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}],
                    "retryAfterSeconds": 1,
                },
            )
        # The twin keeps no old snapshots: an exact (or paginated) list at an older RV is answered like a
        # compacted one (ASSUMPTIONS.md); NotOlderThan is served from the current state.
        if rv < self._rv and (match == "Exact" or limit):
            raise expired("The resourceVersion for the provided list is too old.")

    # ------------------------------------------------------------ watch support

    def events_since(self, storage: str, rv: int) -> tuple[_List[WatchEvent], int]:
        """Logged events of one storage after rv, and the current RV; raises 410 when rv is older than the log."""
        with self._lock:
            floor = self._floors.get(storage, 0)
            if rv < floor:
                raise expired(f"too old resource version: {rv} ({floor})")
            log = self._logs.get(storage, [])
            idx = bisect.bisect_right(log, rv, key=lambda e: e.rv)
            return log[idx:], self._rv

    def wait_for_events(self, after_rv: int, timeout: float) -> None:
        with self._cond:
            if self._rv <= after_rv:
                self._cond.wait(timeout)

    def snapshot(self, resource: str, namespace: str | None) -> tuple[_List[dict[str, Any]], int]:
        """Every object (in key order) of a resource, optionally one namespace, and the RV they are current at."""
        rt = self.resource_type(resource)
        with self._lock:
            table = self._table(rt)
            prefix = f"{namespace}/" if (rt.namespaced and namespace) else ""
            objs = [table.items[k].obj for k in table.keys if k.startswith(prefix)]
            return objs, self._rv

    def each(self, resource: str) -> Iterator[dict[str, Any]]:
        """Every object of a resource as it is now (in key order), decoded one at a time as the caller goes: an
        informer's first LIST of 100,000 pods without holding them all at once. Committed entries are never
        changed, so the snapshot taken under the lock stays what it was."""
        rt = self.resource_type(resource)
        with self._lock:
            table = self._table(rt)
            entries = [table.items[k] for k in table.keys]
        for entry in entries:
            yield self._fresh_view(rt, entry)

    def each_lazy(self, resource: str) -> Iterator[tuple[bytes, Callable[[], dict[str, Any]]]]:
        """Every object of a resource as it is now (in key order): its stored JSON (a built-in kind's without
        `kind` and `apiVersion`, which its type fixes) and a function decoding it whole, as `each` gives it. For
        a reader that needs a few fields of most objects and all of a few: the operator's first read of every
        pod of a fleet (operator/informer.py)."""
        rt = self.resource_type(resource)
        with self._lock:
            table = self._table(rt)
            entries = [table.items[k] for k in table.keys]
        for entry in entries:
            yield entry.item, functools.partial(self._fresh_view, rt, entry)

    def view(self, rt: ResourceType, obj: dict[str, Any]) -> dict[str, Any]:
        return self._to_view(rt, obj)

    def matches(self, rt: ResourceType, obj: dict[str, Any], labels: LabelSelector, fields: FieldSelector) -> bool:
        return self._matches(rt, self._to_view(rt, obj), labels, fields)

    # ------------------------------------------------------------ writes

    def create(
        self,
        resource: str,
        obj: dict[str, Any],
        namespace: str | None = None,
        *,
        dry_run: bool = False,
        strict: bool = False,
        warnings: _List[str] | None = None,
        field_manager: str | None = None,
    ) -> dict[str, Any]:
        rt = self.resource_type(resource)
        new, ns = self._prepare_create(rt, obj, namespace, strict, warnings)
        with self._lock:
            stored = self._admit_and_validate(
                rt, new, ns, (), field_manager or PYTHON_MANAGER, charges={} if dry_run else None
            )
            if dry_run:
                return _clone_obj(self._to_view(rt, self._order(rt, stored)))
            stored["metadata"]["resourceVersion"] = str(self._next_rv())
            stored = self._order(rt, stored)
            self._commit(rt, "ADDED", stored)
            after = self._after_create(rt, stored)
            result = _clone_obj(self._to_view(rt, stored))
        self._dispatch()
        if after is not None:
            after()
        return result

    def create_many(self, resource: str, objs: Iterable[dict[str, Any]], namespace: str | None = None) -> int:
        """Create many objects of one resource under one lock, with create's defaulting and validation.

        All or nothing: every object is checked (including duplicates within the batch) before any is stored, so a
        bad one raises ApiError and changes nothing. Subscribers and watches see one ADDED per object, in order.
        Returns the number created."""
        rt = self.resource_type(resource)
        # A bulk load allocates hundreds of thousands of acyclic objects; letting the cyclic GC rescan the whole
        # store for them costs more than the work itself, so it is paused for the batch.
        gc_was_enabled = gc.isenabled()
        gc.disable()
        try:
            return self._create_many(rt, objs, namespace)
        finally:
            if gc_was_enabled:
                gc.enable()

    def _create_many(self, rt: ResourceType, objs: Iterable[dict[str, Any]], namespace: str | None) -> int:
        prepared = [self._prepare_create(rt, obj, namespace, False, None) for obj in objs]
        afters: _List[Callable[[], None]] = []
        with self._lock:
            batch: set[str] = set()
            ready = []
            charges: dict[tuple[str, str], dict[str, str]] = {}
            for new, ns in prepared:
                stored = self._admit_and_validate(rt, new, ns, batch, PYTHON_MANAGER, charges=charges)
                batch.add(self._sort_key(rt, ns, stored["metadata"]["name"]))
                ready.append(stored)
            for (qns, qname), used in charges.items():
                self._charge_quota(qns, qname, used)
            for stored in ready:
                stored["metadata"]["resourceVersion"] = str(self._next_rv())
                stored = self._order(rt, stored)
                self._commit(rt, "ADDED", stored)
                after = self._after_create(rt, stored)
                if after is not None:
                    afters.append(after)
        self._dispatch()
        for after in afters:
            after()
        return len(ready)

    def load(
        self,
        resource: str,
        items: Iterable[tuple[dict[str, Any], dict[str, Any] | None]],
        namespace: str | None = None,
    ) -> _List[str]:
        """Bulk load: store many objects of one resource as if each were created through the API (`create`, then,
        when its status is not None, a merge patch of that status on the status subresource, both by the `twin`
        manager), under one lock and with one resourceVersion each, in order.

        The stored form, the checks and the events are create's (+ patch's): decoding, defaulting, admission,
        validation and managedFields run whole for one object of each shape and are reused for the others of the
        shape, whose identity (name, node) is checked per object (bulk.py). All or nothing: a bad object raises
        ApiError before anything is stored. Watches and subscribers see one ADDED per object, at its final form
        (the status write is part of the load, not an event of its own). Returns the stored objects' names, in order."""
        rt = self.resource_type(resource)
        gc_was_enabled = gc.isenabled()
        gc.disable()  # hundreds of thousands of acyclic objects: the cyclic GC would rescan the store for each batch
        afters: _List[Callable[[], None]] = []
        try:
            with self._lock:
                out = self._load(rt, _List(items), namespace, afters)
        finally:
            if gc_was_enabled:
                gc.enable()
        self._dispatch()
        for after in afters:
            after()
        return out

    def _load(
        self,
        rt: ResourceType,
        items: _List[tuple[dict[str, Any], dict[str, Any] | None]],
        namespace: str | None,
        afters: _List[Callable[[], None]],
    ) -> _List[str]:
        """Check every item (templates made on the way), then commit them all. Lock held."""
        strategy = registry.strategy_for(rt)
        table = self._table(rt)
        templates: dict[bytes, bulk.Template | None] = {}
        admitted: dict[str | None, bool] = {}  # namespace -> no quota or limit range there (templates allowed)
        batch: set[str] = set()
        charges: dict[tuple[str, str], dict[str, str]] = {}
        # each: a finished object (the whole path), or a shape with the object's identity and token volume
        ready: _List[dict[str, Any] | tuple[_Shape, bulk.Identity, str | None]] = []
        shapes: dict[bytes, _Shape] = {}
        for obj, status in items:
            ident = bulk.identity(rt.key, obj)
            ns = namespace or ((obj.get("metadata") or {}).get("namespace") if isinstance(obj, dict) else None)
            if ident is not None and rt.namespaced and ns not in admitted:
                admitted[ns] = not (
                    self._any_in_namespace("resourcequotas", ns) or self._any_in_namespace("limitranges", ns)
                )
            if ident is None or (rt.namespaced and not admitted[ns]):
                ready.append(self._load_whole(rt, obj, namespace, status, batch, charges))
                continue
            key = bulk.shape_key(rt.key, obj, ident, namespace, status)
            template = templates.get(key, _NO_TEMPLATE)
            if template is _NO_TEMPLATE or template is None:
                stored = self._load_whole(rt, obj, namespace, status, batch, charges)
                ready.append(stored)
                if template is _NO_TEMPLATE:
                    sent = [v.get("name") for v in obj["spec"].get("volumes") or () if isinstance(v, dict)]
                    made = bulk.make_template(rt.key, self._item_bytes(rt, stored), ident, [str(v) for v in sent])
                    templates[key] = made
                    if made is not None:
                        shapes[key] = self._shape_of(rt, made, ident, stored)
                continue
            assert isinstance(template, bulk.Template)
            errors = strategy.validate_metadata({"metadata": {"name": ident.name}}, None)
            if errors:
                raise invalid(rt.kind, self._error_group(rt), ident.name, errors)
            sort_key = self._sort_key(rt, ns, ident.name)
            if sort_key in table.items or sort_key in batch:
                raise already_exists(rt.plural, rt.group, ident.name)
            batch.add(sort_key)
            volume = f"kube-api-access-{kinds.random_suffix(self._rng)}" if template.sa_volume else None
            ready.append((shapes[key], ident, volume))
        for (qns, qname), used in charges.items():
            self._charge_quota(qns, qname, used)
        return self._commit_loaded(rt, ready, afters)

    def _load_whole(
        self,
        rt: ResourceType,
        obj: dict[str, Any],
        namespace: str | None,
        status: dict[str, Any] | None,
        batch: set[str],
        charges: dict[tuple[str, str], dict[str, str]],
    ) -> dict[str, Any]:
        """One item of a load through create's whole path, then its status write's, not committed. Lock held."""
        new, ns = self._prepare_create(rt, obj, namespace, False, None)
        stored = self._admit_and_validate(rt, new, ns, batch, PYTHON_MANAGER, charges=charges)
        batch.add(self._sort_key(rt, ns, stored["metadata"]["name"]))
        stored["metadata"]["resourceVersion"] = "0"  # its own is given at commit
        stored = self._order(rt, stored)
        if status is not None:
            patched = merge_patch(self._to_view(rt, stored), {"status": status})
            if not isinstance(patched, dict):
                raise bad_request("the patched object is not a JSON object")
            decoded = self._decode(rt, patched, False, None)
            stored = self._order(
                rt, self._write_update(rt, stored, self._from_view(rt, decoded), "status", True, PYTHON_MANAGER)
            )
        return stored

    def _shape_of(
        self, rt: ResourceType, template: bulk.Template, ident: bulk.Identity, stored: dict[str, Any]
    ) -> _Shape:
        """What every object of a template's shape shares in the store: its entry but for the identity's fields,
        and whether any subscriber is told of it (the subscribers' tests read only kind and namespace, which the
        shape fixes)."""
        proto = _Entry(rt, stored, b"")
        paths = {("metadata", "name"): -1, **{tuple(p): i for i, p in enumerate(bulk.IDENTITY_PATHS[rt.key])}}
        per_object = tuple(
            (n, paths[tuple(parts)]) for n, (path, parts) in enumerate(rt.field_paths) if tuple(parts) in paths
        )
        wanted = any(wants is None or wants(stored) for _, wants, _ in self._subscribers)
        return _Shape(template, proto, per_object, wanted, stored["metadata"].get("namespace"))

    def _commit_loaded(
        self,
        rt: ResourceType,
        ready: _List[dict[str, Any] | tuple[_Shape, bulk.Identity, str | None]],
        afters: _List[Callable[[], None]],
    ) -> _List[str]:
        """Commit checked items in order: what `_commit` does for each, with the sorted keys and the watch log's
        window brought up to date once. Objects built from a template are decoded only where someone reads them
        (the watch log's window, a subscriber that wants their kind). Lock held. Returns the names, in order."""
        table = self._table(rt)
        storage = self._storage_key(rt)
        head = {"kind": rt.kind, "apiVersion": rt.api_version}
        log = self._logs.setdefault(storage, [])
        logged_from = len(ready) - self.watch_cache_size
        fresh: _List[str] = []
        names: _List[str] = []
        for n, item in enumerate(ready):
            rv = self._next_rv()
            obj: dict[str, Any] | None
            if isinstance(item, dict):
                obj = item
                obj["metadata"]["resourceVersion"] = str(rv)
                raw = self._item_bytes(rt, obj)
                name = obj["metadata"]["name"]
                key = self._sort_key(rt, obj["metadata"].get("namespace"), name)
                table.items[key] = _Entry(table.rt, obj, raw)
                after = self._after_create(rt, obj)
                if after is not None:
                    afters.append(after)
            else:
                shape, ident, volume = item
                raw = shape.template.fill(
                    ident, uid=str(uuid.uuid4()), rv=rv, now=kinds.now_rfc3339(), sa_volume=volume
                )
                fields = _List(shape.proto.fields)
                for index, which in shape.per_object:
                    value = ident.name if which < 0 else ident.values[which]
                    fields[index] = value if value is not None else shape.proto.fields[index]
                name = ident.name
                key = self._sort_key(rt, shape.namespace, name)
                table.items[key] = _Entry.like(shape.proto, raw, rv, tuple(fields))
                obj = None
                if shape.wanted or n >= logged_from:
                    obj = orjson.loads(raw) if rt.is_custom else {**head, **orjson.loads(raw)}
            fresh.append(key)
            names.append(name)
            if obj is not None:
                if n >= logged_from:
                    log.append(WatchEvent(rv, storage, "ADDED", obj["metadata"].get("namespace", ""), obj, None))
                if isinstance(item, dict) or item[0].wanted:
                    self._pending.append(("ADDED", obj))
        table.keys.extend(fresh)
        table.keys.sort()
        if len(log) > self.watch_cache_size or logged_from > 0:  # the newest events, as one by one leaves them
            del log[: max(0, len(log) - self.watch_cache_size)]
            self._floors[storage] = log[0].rv - 1
        self._cond.notify_all()
        return names

    def _any_in_namespace(self, resource: str, namespace: str | None) -> bool:
        """Whether any object of a namespaced resource is stored in `namespace`. Lock held."""
        if namespace is None:
            return False
        keys = self._table(self._types[resource]).keys
        idx = bisect.bisect_left(keys, f"{namespace}/")
        return idx < len(keys) and keys[idx].startswith(f"{namespace}/")

    def _in_quota_namespace(self, obj: dict[str, Any]) -> bool:
        """Which writes the resource quota controller is told of: those in a namespace that has a quota (it does
        nothing for the others)."""
        if not _namespaced(obj):
            return False
        with self._lock:
            return self._any_in_namespace("resourcequotas", obj["metadata"]["namespace"])

    def _prepare_create(
        self, rt: ResourceType, obj: dict[str, Any], namespace: str | None, strict: bool, warnings: _List[str] | None
    ) -> tuple[dict[str, Any], str | None]:
        """Decoding and namespace checks of a create, before the lock."""
        if rt.namespaced and not namespace:
            namespace = (obj.get("metadata") or {}).get("namespace")
        ns = self._ns(rt, namespace)
        new = self._decode(rt, obj, strict, warnings)
        meta = new.setdefault("metadata", {})
        if rt.namespaced:
            if meta.get("namespace") and meta["namespace"] != ns:
                raise bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request"
                )
            meta["namespace"] = ns
        else:
            meta.pop("namespace", None)
        return new, ns

    def _admit_and_validate(
        self,
        rt: ResourceType,
        new: dict[str, Any],
        ns: str | None,
        pending: Iterable[str] | set[str],
        manager: str,
        applied: _List[dict[str, Any]] | None = None,
        charges: dict[tuple[str, str], dict[str, str]] | None = None,
    ) -> dict[str, Any]:
        """Admission, defaulting, validation and the AlreadyExists check of a create. Lock held.

        The creator's managedFields are recorded (fieldmanager.on_create), or `applied` ones kept (server-side
        apply that creates). ResourceQuota usage is charged at once when `charges` is None, else collected
        there (batches, dry runs)."""
        meta = new["metadata"]
        if ns is not None:
            ns_entry = self._get_entry("namespaces", None, ns)
            if ns_entry is None:
                raise not_found("namespaces", "", ns)
            if ns_entry.obj["metadata"].get("deletionTimestamp"):
                raise ApiError(
                    403,
                    "Forbidden",
                    f'{rt.plural} "{meta.get("name", "")}" is forbidden: unable to create new content in namespace '
                    f"{ns} because it is being terminated",
                    {
                        "name": meta.get("name", ""),
                        "kind": rt.plural,
                        "causes": [
                            {
                                "reason": "NamespaceTerminating",
                                "message": f"namespace {ns} is being terminated",
                                "field": "metadata.namespace",
                            }
                        ],
                    },
                )
        # What the client sent, for the creator's managedFields: admission's additions are not the creator's.
        sent = _clone_obj(new) if applied is None else new
        self._admit_create(rt, new, ns)  # mutating admission runs before the registry generates the name
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = meta["generateName"] + kinds.random_suffix(self._rng)
            if sent is not new:
                sent["metadata"]["name"] = meta["name"]
        errors = self._validate(rt, new, None)
        if errors:
            raise invalid(rt.kind, self._error_group(rt), meta.get("name", ""), errors)
        charged = self._validating_admission(rt, new, ns, charges or {}) if ns is not None else {}
        if self._get_entry(rt.key, ns, meta["name"]) is not None or self._sort_key(rt, ns, meta["name"]) in pending:
            raise already_exists(rt.plural, rt.group, meta["name"])
        if charges is not None:
            charges.update(charged)
        else:
            for (qns, qname), used in charged.items():
                self._charge_quota(qns, qname, used)
        for key in ("resourceVersion", "deletionTimestamp", "deletionGracePeriodSeconds"):
            meta.pop(key, None)
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = kinds.now_rfc3339()
        if rt.tracks_generation:
            meta["generation"] = 1
            registry.strategy_for(rt).on_generation(new, None)
        if applied is None:
            fieldmanager.on_create(rt.key, self._shape(rt), sent, new, manager, rt.api_version, kinds.now_rfc3339())
        else:
            meta["managedFields"] = applied
        return self._from_view(rt, new)

    @staticmethod
    def _shape(rt: ResourceType) -> Shape:
        return root_shape(rt.schema)

    def bind(
        self, namespace: str, name: str, node: str, *, annotations: dict[str, str] | None = None
    ) -> dict[str, Any]:
        """The pods/binding subresource (what a scheduler calls): sets spec.nodeName and PodScheduled=True.

        409 if the pod is already bound or being deleted, as the real BindingREST answers."""
        rt = self.resource_type("pods")
        with self._lock:
            entry = self._get_entry("pods", namespace, name)
            if entry is None:
                raise not_found("pods", "", name)
            old = entry.obj
            bound = (old.get("spec") or {}).get("nodeName")
            reason = None
            if old["metadata"].get("deletionTimestamp"):
                reason = f"pod {name} is being deleted, cannot be assigned to a host"
            elif bound:
                reason = f'pod {name} is already assigned to node "{bound}"'
            if reason is not None:
                raise ApiError(
                    409,
                    "Conflict",
                    f'Operation cannot be fulfilled on pods/binding "{name}": {reason}',
                    {"name": name, "kind": "pods/binding"},
                )
            new = _clone_obj(old)
            new["spec"]["nodeName"] = node
            if annotations:
                new["metadata"].setdefault("annotations", {}).update(annotations)
            conditions = new.setdefault("status", {}).setdefault("conditions", [])
            scheduled = {
                "type": "PodScheduled",
                "status": "True",
                "lastProbeTime": None,
                "lastTransitionTime": kinds.now_rfc3339(),
            }
            for i, cond in enumerate(conditions):
                if cond.get("type") == "PodScheduled":
                    conditions[i] = scheduled
                    break
            else:
                conditions.append(scheduled)
            new["metadata"]["resourceVersion"] = str(self._next_rv())
            self._commit(rt, "MODIFIED", new, prev=old)
            result = _clone_obj(new)
        self._dispatch()
        return result

    def update(
        self,
        resource: str,
        obj: dict[str, Any],
        namespace: str | None = None,
        *,
        subresource: str | None = None,
        name: str | None = None,
        dry_run: bool = False,
        strict: bool = False,
        warnings: _List[str] | None = None,
        field_manager: str | None = None,
    ) -> dict[str, Any]:
        """PUT: a stale metadata.resourceVersion gives 409; no resourceVersion means an unconditional update."""
        rt = self.resource_type(resource)
        ns = self._ns(rt, namespace or (obj.get("metadata") or {}).get("namespace"))
        new = self._decode(rt, obj, strict, warnings)
        meta = new.setdefault("metadata", {})
        target = name or meta.get("name", "")
        if name is not None and meta.get("name") != name:
            raise bad_request(
                f"the name of the object ({meta.get('name', '')}) does not match the name on the URL ({name})"
            )
        if rt.namespaced and meta.get("namespace") and meta["namespace"] != ns:
            raise bad_request("the namespace of the provided object does not match the namespace sent on the request")
        rv_text = meta.get("resourceVersion")
        if rv_text not in (None, ""):
            try:
                int(str(rv_text))
            except ValueError as exc:
                raise ApiError(500, "", f'strconv.ParseUint: parsing "{rv_text}": invalid syntax') from exc
        with self._lock:
            entry = self._get_entry(rt.key, ns, target)
            if entry is not None:
                if rv_text not in (None, "") and int(str(rv_text)) != entry.rv:
                    raise conflict(rt.plural, rt.group, target)
                result = self._write_update(
                    rt, entry.obj, self._from_view(rt, new), subresource, dry_run, field_manager or PYTHON_MANAGER
                )
        if entry is None:
            # leases and events allow create-on-update (AllowCreateOnUpdate in their registry strategies)
            if registry.strategy_for(rt).allow_create_on_update and subresource is None:
                meta.pop("resourceVersion", None)
                return self.create(resource, new, ns, dry_run=dry_run, field_manager=field_manager)
            raise not_found(rt.plural, rt.group, target)
        self._dispatch()
        return result

    def patch(
        self,
        resource: str,
        name: str,
        patch: Any,
        namespace: str | None = None,
        *,
        patch_type: str = "merge",
        subresource: str | None = None,
        dry_run: bool = False,
        strict: bool = False,
        warnings: _List[str] | None = None,
        field_manager: str | None = None,
    ) -> dict[str, Any]:
        """PATCH with patch_type 'merge' (RFC 7386), 'strategic' (built-ins only, 415 on CRs) or 'json' (RFC 6902).

        Server-side apply is `apply()`."""
        rt = self.resource_type(resource)
        ns = self._ns(rt, namespace)
        if patch_type == "strategic" and rt.is_custom:
            raise unsupported_media_type(
                "the body of the request was in an unknown format - accepted media types include: "
                "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml"
            )
        if patch_type not in ("merge", "strategic", "json"):
            raise unsupported_media_type()
        with self._lock:
            entry = self._get_entry(rt.key, ns, name)
            if entry is None:
                raise not_found(rt.plural, rt.group, name)
            current = self._fresh_view(rt, entry)
            # a merge patch builds new dicts along its own paths only and the result is copied by _decode, so
            # `current` comes out unchanged and is the update's old object too (one decode less); other patch
            # types, and views, decode the stored object again
            old = current if patch_type == "merge" and rt.key != _EVENTS_V1 else None
            if patch_type == "merge":
                if not isinstance(patch, dict):
                    raise bad_request("error decoding patch: json: cannot unmarshal into Go value of type map")
                patched = merge_patch(current, patch)
            elif patch_type == "strategic":
                patched = strategic_merge_patch(current, patch)
            else:
                patched = json_patch(current, patch)
            if not isinstance(patched, dict):
                raise bad_request("the patched object is not a JSON object")
            pmeta = patched.setdefault("metadata", {})
            if str(pmeta.get("resourceVersion", entry.rv)) != str(entry.rv):
                raise conflict(rt.plural, rt.group, name)
            if pmeta.get("name") != name:
                raise bad_request(
                    f"the name of the object ({pmeta.get('name', '')}) does not match the name on the URL ({name})"
                )
            new = self._decode(rt, patched, strict, warnings)
            result = self._write_update(
                rt,
                entry.obj if old is None else old,
                self._from_view(rt, new),
                subresource,
                dry_run,
                field_manager or PYTHON_MANAGER,
            )
        self._dispatch()
        return result

    def apply(
        self,
        resource: str,
        name: str,
        config: Any,
        namespace: str | None = None,
        *,
        field_manager: str,
        force: bool = False,
        subresource: str | None = None,
        dry_run: bool = False,
        strict: bool = False,
        warnings: _List[str] | None = None,
    ) -> tuple[dict[str, Any], bool]:
        """Server-side apply (apply.py) of `config` as `field_manager`; (object, created). 409 on conflicts unless
        `force`; an object that does not exist is created (201 over HTTP), as the apply patcher allows."""
        rt = self.resource_type(resource)
        ns = self._ns(rt, namespace)
        if not isinstance(config, dict):
            raise bad_request("error decoding YAML: the applied configuration must be an object")
        version = config.get("apiVersion")
        if version != rt.api_version:
            raise bad_request(
                "Incorrect version specified in apply patch. Specified patch version: "
                f"{version or ''}, expected: {rt.api_version}"
            )
        cmeta = config.get("metadata")
        if isinstance(cmeta, dict) and cmeta.get("managedFields") is not None:
            raise bad_request("metadata.managedFields must be nil")
        if not isinstance(cmeta, dict) or cmeta.get("name", name) != name:
            given = cmeta.get("name", "") if isinstance(cmeta, dict) else ""
            raise bad_request(f"the name of the object ({given}) does not match the name on the URL ({name})")
        keep = ("apiVersion", "kind", "metadata", "status")
        if subresource == "status":
            reset = tuple(k for k in config if k not in keep)
            if rt.is_custom:
                config = {**config, "metadata": {"name": name}}
        else:
            reset = ("status",) if not rt.status_in_main else ()
        with self._lock:
            entry = self._get_entry(rt.key, ns, name)
            if entry is None and subresource:
                raise not_found(rt.plural, rt.group, name)
            live = self._to_view(rt, entry.obj) if entry is not None else None
            if live is not None and cmeta.get("namespace") not in (None, ns):
                raise bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request"
                )
            merged = apply.apply(
                rt.key,
                self._shape(rt),
                fieldmanager.live_entries(live) if live is not None else [],
                _clone_obj(live) if live is not None else None,
                config,
                manager=field_manager,
                api_version=rt.api_version,
                subresource=subresource or "",
                reset=reset,
                force=force,
                now=kinds.now_rfc3339(),
            )
            entries = merged["metadata"].get("managedFields") or []
            if entry is not None:
                new = self._decode(rt, merged, strict, warnings)
                new["metadata"]["managedFields"] = entries
                result = self._write_update(
                    rt, entry.obj, self._from_view(rt, new), subresource, dry_run, field_manager, applied=entries
                )
        if entry is not None:
            self._dispatch()
            return result, False
        new, ns = self._prepare_create(rt, merged, ns, strict, warnings)
        with self._lock:
            stored = self._admit_and_validate(rt, new, ns, (), field_manager, applied=entries)
            if dry_run:
                return _clone_obj(self._to_view(rt, self._order(rt, stored))), True
            stored["metadata"]["resourceVersion"] = str(self._next_rv())
            stored = self._order(rt, stored)
            self._commit(rt, "ADDED", stored)
            after = self._after_create(rt, stored)
            created = _clone_obj(self._to_view(rt, stored))
        self._dispatch()
        if after is not None:
            after()
        return created, True

    def delete(
        self,
        resource: str,
        name: str,
        namespace: str | None = None,
        *,
        grace_period_seconds: int | None = None,
        dry_run: bool = False,
        preconditions: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Remove the object and return its last state, or only mark it for deletion where the kind's strategy
        says so (registry.py: a pod bound to a node unless grace_period_seconds=0, as with no kubelet in pods.json;
        a namespace with finalizers). `preconditions` (DeleteOptions: uid, resourceVersion) that do not match give
        the real 409."""
        rt = self.resource_type(resource)
        ns = self._ns(rt, namespace)
        strategy = registry.strategy_for(rt)
        after: registry.After | None = None
        with self._lock:
            entry = self._get_entry(rt.key, ns, name)
            if entry is None:
                raise not_found(rt.plural, rt.group, name)
            old = entry.obj
            strategy.check_delete(name)
            strategies.check_delete_preconditions(rt.kind, self._error_group(rt), self._to_view(rt, old), preconditions)
            marked = strategy.mark_for_deletion(old, grace_period_seconds)
            if marked is not None:
                if old["metadata"].get("deletionTimestamp"):
                    return _clone_obj(old)  # already marked: deleting again changes nothing
                if dry_run:
                    return marked
                marked["metadata"]["resourceVersion"] = str(self._next_rv())
                self._commit(rt, "MODIFIED", marked, prev=old)
                result = _clone_obj(marked)
                after = strategy.after_marked(self, marked)
            else:
                gone = _clone_obj(old)
                strategy.final_state(gone)
                if dry_run:
                    return _clone_obj(self._to_view(rt, gone))
                gone["metadata"]["resourceVersion"] = str(self._next_rv())
                self._commit(rt, "DELETED", gone, remove=True)
                result = _clone_obj(self._to_view(rt, gone))
                strategy.on_removed(self, old)
        self._dispatch()
        if after is not None:
            after()
        return result

    def finish_deletion(
        self, resource: str, namespace: str | None, name: str, finalize: Callable[[dict[str, Any]], None]
    ) -> None:
        """Remove an object marked for deletion once `finalize` has cleared what kept it (its finalizers)."""
        rt = self._types[resource]
        with self._lock:
            entry = self._get_entry(resource, namespace, name)
            if entry is not None:
                gone = entry.obj
                finalize(gone)
                gone["metadata"]["resourceVersion"] = str(self._next_rv())
                self._commit(rt, "DELETED", gone, remove=True)
        self._dispatch()

    def namespace_contents(self, namespace: str) -> _List[tuple[ResourceType, dict[str, Any]]]:
        """Every stored object in a namespace, with its type. Lock held."""
        out: _List[tuple[ResourceType, dict[str, Any]]] = []
        for table in self._tables.values():
            if table.rt.namespaced:
                out.extend((table.rt, e.obj) for k, e in table.items.items() if k.startswith(f"{namespace}/"))
        return out

    def forget_pod_logs(self, namespace: str, name: str) -> None:
        """Drop the logs of a removed pod. Lock held."""
        for key in [k for k in self._pod_logs if k[:2] == (namespace, name)]:
            del self._pod_logs[key]

    # ------------------------------------------------------------ pod logs

    def set_pod_log(self, namespace: str, name: str, text: str, container: str | None = None) -> None:
        """Text served by GET /api/v1/namespaces/NS/pods/NAME/log (the simulated container's output).

        Without `container` the text belongs to the pod's only (or first) container."""
        with self._lock:
            self._pod_logs[(namespace, name, container or "")] = text

    def pod_log(
        self,
        namespace: str,
        name: str,
        container: str | None = None,
        tail_lines: int | None = None,
        *,
        strict: bool = False,
    ) -> str:
        """The log as the kubelet would serve it. strict=True (HTTP) also answers like the real server when no
        container is named for a pod with several (400); Python callers get the first container's log then."""
        with self._lock:
            entry = self._get_entry("pods", namespace, name)
            if entry is None:
                raise not_found("pods", "", name)
            names = [c.get("name", "") for c in (entry.obj.get("spec") or {}).get("containers") or []]
            if container is None:
                if len(names) > 1 and strict:
                    raise bad_request(
                        f"a container name must be specified for pod {name}, choose one of: [{' '.join(names)}]"
                    )
                container = names[0] if names else ""
            elif container not in names:
                raise bad_request(f"container {container} is not valid for pod {name}")
            text = self._pod_logs.get((namespace, name, container))
            if text is None and names and container == names[0]:
                text = self._pod_logs.get((namespace, name, ""))
        text = text or ""
        if tail_lines is not None:
            lines = text.splitlines(keepends=True)
            text = "".join(lines[-tail_lines:]) if tail_lines > 0 else ""
        return text

    # ------------------------------------------------------------ internals

    def _get_entry(self, resource: str, namespace: str | None, name: str) -> _Entry | None:
        rt = self._types[resource]
        return self._table(rt).items.get(self._sort_key(rt, namespace, name))

    def _from_view(self, rt: ResourceType, obj: dict[str, Any]) -> dict[str, Any]:
        if rt.key == _EVENTS_V1:
            return kinds.event_v1_to_core(obj)
        return obj

    def _decode(self, rt: ResourceType, obj: Any, strict: bool, warnings: _List[str] | None) -> dict[str, Any]:
        """What the real decoder does before admission: kind check, pruning, quantities and times (400s)."""
        if not isinstance(obj, dict):
            raise bad_request(f"the object provided is unrecognized (must be of type {rt.kind})")
        new: dict[str, Any] = _clone(obj)
        kind = new.get("kind")
        if kind and kind != rt.kind:
            raise bad_request(
                f'{kind} in version "{rt.version}" cannot be handled as a {rt.kind}: converting '
                f"({rt.version}.{kind}) to ({rt.group or 'core'}.{rt.kind}): unknown conversion"
            )
        new["kind"] = rt.kind
        new["apiVersion"] = rt.api_version
        if not isinstance(new.get("metadata"), dict):
            new["metadata"] = {}
        for key in ("name", "generateName", "namespace"):  # ObjectMeta's string fields: the decoder refuses others
            value = new["metadata"].get(key)
            if value is not None and not isinstance(value, str):
                raise bad_request(
                    f'{rt.kind} in version "{rt.version}" cannot be handled as a {rt.kind}: json: cannot unmarshal '
                    f"{_json_type(value)} into Go struct field ObjectMeta.metadata.{key} of type string"
                )
        if rt.schema is not None:
            new, unknown = schema.prune(new, rt.schema)
        else:
            unknown = knownfields.prune_unknown(rt.key, new)
        if unknown:
            if strict:
                listed = ", ".join(f'unknown field "{u}"' for u in unknown)
                raise bad_request(
                    f'{rt.kind} in version "{rt.version}" cannot be handled as a {rt.kind}: strict decoding '
                    f"error: {listed}"
                )
            if warnings is not None:
                warnings.extend(f'unknown field "{u}"' for u in unknown)
        if rt.schema is not None:
            new = schema.apply_defaults(new, rt.schema)
        else:
            defaults.apply(rt.key, rt.kind, rt.version, new)  # the scheme's defaulters and canonical quantities
        registry.strategy_for(rt).decode(new)
        return new

    def _admit_create(self, rt: ResourceType, obj: dict[str, Any], ns: str | None) -> None:
        registry.strategy_for(rt).prepare_for_create(self, rt, obj, ns)

    def _after_create(self, rt: ResourceType, obj: dict[str, Any]) -> Callable[[], None] | None:
        """Follow-up work of controllers that run inside a real apiserver. Lock held."""
        return registry.strategy_for(rt).after_create(self, rt, obj)

    def _validate(
        self, rt: ResourceType, obj: dict[str, Any], old: dict[str, Any] | None, subresource: str | None = None
    ) -> _List[Any]:
        return registry.strategy_for(rt).validate(rt, obj, old, subresource)

    def _write_update(
        self,
        rt: ResourceType,
        old: dict[str, Any],
        new: dict[str, Any],
        subresource: str | None,
        dry_run: bool,
        manager: str,
        applied: _List[dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        """Shared tail of PUT, PATCH and apply. Lock held; the caller dispatches notifications after releasing it.

        managedFields: an Update by `manager` (fieldmanager.on_update) on what this write changes, or the `applied`
        ones server-side apply settled."""
        sent_fields = (new.get("metadata") or {}).get("managedFields")
        meta = new.setdefault("metadata", {})
        old_meta = old["metadata"]
        if subresource == "status" and rt.is_custom:
            # a custom resource's /status keeps nothing but status (clusterpolicy.json patch-spec-via-status)
            merged = _clone_obj(old)
            if "status" in new:
                merged["status"] = new["status"]
            else:
                merged.pop("status", None)
            new = merged
        elif subresource == "status":
            # built-in /status strategies reset spec only: metadata changes stay (nodes.json patch-spec-via-status)
            for key in list(new):
                if key not in ("metadata", "status", "kind", "apiVersion"):
                    new.pop(key)
            for key, value in old.items():
                if key not in ("metadata", "status", "kind", "apiVersion"):
                    new[key] = _clone(value)
        if subresource != "status" or not rt.is_custom:
            if subresource is None and not rt.status_in_main:
                if "status" in old:
                    new["status"] = _clone(old["status"])
                else:
                    new.pop("status", None)
            # immutable or server-owned metadata
            for key in ("uid", "creationTimestamp", "generation", "deletionTimestamp", "deletionGracePeriodSeconds"):
                if key in old_meta:
                    meta[key] = old_meta[key]
                else:
                    meta.pop(key, None)
            meta["name"] = old_meta["name"]
            if "namespace" in old_meta:
                meta["namespace"] = old_meta["namespace"]
        new["kind"], new["apiVersion"] = old.get("kind", rt.kind), old.get("apiVersion", rt.api_version)
        new["metadata"]["resourceVersion"] = old_meta["resourceVersion"]
        strategy = registry.strategy_for(rt)
        strategy.prepare_for_update(new, old, subresource)
        self._manage_fields(rt, old, new, subresource, manager, applied, sent_fields)
        errors = self._validate(rt, self._to_view(rt, new), old, subresource)
        if errors:
            raise invalid(rt.kind, self._error_group(rt), old_meta["name"], errors)
        if kinds.json_equal(new, old):
            # a no-op write: no new resourceVersion and no event, like etcd's GuaranteedUpdate
            return _clone_obj(self._to_view(rt, old))
        if rt.tracks_generation:
            changed = {k: v for k, v in new.items() if k not in ("metadata", "status")} != {
                k: v for k, v in old.items() if k not in ("metadata", "status")
            }
            if changed:
                new["metadata"]["generation"] = int(old_meta.get("generation", 1)) + 1
                strategy.on_generation(new, old)
        if dry_run:
            return _clone_obj(self._to_view(rt, new))
        new["metadata"]["resourceVersion"] = str(self._next_rv())
        new = self._order(rt, new)
        self._commit(rt, "MODIFIED", new, prev=old)
        if rt.is_custom or rt.key == _EVENTS_V1:
            return _clone_obj(self._to_view(rt, new))
        # a built-in's stored bytes decode to the same dict, key order included (kind, apiVersion, then the rest):
        # one decode instead of a serialisation and a decode
        return self._table(rt).items[self._sort_key(rt, new["metadata"].get("namespace"), new["metadata"]["name"])].obj

    def _manage_fields(
        self,
        rt: ResourceType,
        old: dict[str, Any],
        new: dict[str, Any],
        subresource: str | None,
        manager: str,
        applied: _List[dict[str, Any]] | None,
        sent_fields: Any,
    ) -> None:
        """Set new's managedFields for this write (views for events.k8s.io: fields are per apiVersion)."""
        meta = new.setdefault("metadata", {})
        if applied is not None:
            if applied:
                meta["managedFields"] = applied
            else:
                meta.pop("managedFields", None)
            return
        sent = {"metadata": {"managedFields": sent_fields}} if sent_fields is not None else {}
        managers = fieldmanager.entries_for_write(sent, old, subresource)
        fieldmanager.on_update(
            rt.key,
            self._shape(rt),
            managers,
            self._to_view(rt, old),
            self._to_view(rt, new),
            manager,
            rt.api_version,
            subresource or "",
            kinds.now_rfc3339(),
        )

    def namespace_objects(self, resource: str, namespace: str | None) -> _List[dict[str, Any]]:
        """Every stored object of a namespaced resource in one namespace, in key order. Lock held."""
        if namespace is None:
            return []
        table = self._table(self._types[resource])
        lo = bisect.bisect_left(table.keys, f"{namespace}/")
        hi = bisect.bisect_left(table.keys, f"{namespace}0")  # '0' sorts right after '/'
        return [table.items[k].obj for k in table.keys[lo:hi]]

    def _validating_admission(
        self, rt: ResourceType, obj: dict[str, Any], ns: str, pending: dict[tuple[str, str], dict[str, str]]
    ) -> dict[tuple[str, str], dict[str, str]]:
        """The validating LimitRanger and ResourceQuota plugins on a create (limitranger.py, quota.py): the new
        status.used of every quota the object charges, on top of `pending` (earlier objects of a batch). Lock held."""
        if rt.key == "pods":
            for limit_range in self.namespace_objects("limitranges", ns):
                problems = limitranger.validate(limit_range, obj)
                if problems:
                    reason = problems[0] if len(problems) == 1 else "[" + ", ".join(problems) + "]"
                    raise admission.forbidden("pods", obj["metadata"], reason)
        quotas = self.namespace_objects("resourcequotas", ns)
        if not quotas:
            return {}
        earlier = {name: used for (qns, name), used in pending.items() if qns == ns}
        try:
            charged = quota.admit(quotas, rt.key, rt.group, self._to_view(rt, obj), datetime.now(UTC), earlier)
        except quota.QuotaRefusal as exc:
            raise admission.forbidden(rt.plural, obj["metadata"], str(exc)) from exc
        return {(ns, name): used for name, used in charged.items()}

    def _charge_quota(self, namespace: str, name: str, used: dict[str, str]) -> None:
        """What the ResourceQuota plugin writes after admitting an object: the quota's new status.used. Lock held."""
        entry = self._get_entry("resourcequotas", namespace, name)
        if entry is None:
            return
        old = entry.obj
        new = _clone_obj(old)
        new.setdefault("status", {})["used"] = used
        self._write_update(self._types["resourcequotas"], old, new, "status", False, "kube-apiserver")

    def _quota_controller(self, event_type: str, obj: dict[str, Any]) -> None:
        """The resource quota controller: status.hard from spec.hard and status.used recomputed after any write in a
        namespace that has quotas (embedded cluster only)."""
        ns = (obj.get("metadata") or {}).get("namespace")
        if not ns:
            return
        with self._lock:
            quotas = self.namespace_objects("resourcequotas", ns)
            if not quotas:
                return
            now = datetime.now(UTC)
            rt = self._types["resourcequotas"]
            for q in quotas:
                objects = [
                    (t.key, t.group, self._to_view(t, o))
                    for t in self._quota_kinds(q)
                    for o in self.namespace_objects(t.key, ns)
                ]
                status = quota.recompute(q, objects, now)
                if status != q.get("status"):
                    new = _clone_obj(q)
                    new["status"] = status
                    self._write_update(rt, q, new, "status", False, "kube-controller-manager")
        self._dispatch()

    def _quota_kinds(self, resource_quota: dict[str, Any]) -> _List[ResourceType]:
        """The served namespaced kinds a quota's hard resources can count."""
        hard = (resource_quota.get("spec") or {}).get("hard") or {}
        out: _List[ResourceType] = []
        for t in self._types.values():
            if not t.namespaced or t.key == _EVENTS_V1:
                continue
            if quota.limited_resources(t.key, hard):
                out.append(t)
        return out

    def _node_lifecycle(self, event_type: str, obj: dict[str, Any]) -> None:
        """The node lifecycle controller's NoSchedule pass after a node write (embedded cluster only)."""
        if event_type == "DELETED" or obj.get("kind") != "Node" or obj.get("apiVersion") != "v1":
            return
        rt = self._types["nodes"]
        with self._lock:
            entry = self._get_entry("nodes", None, obj["metadata"]["name"])
            if entry is None:
                return
            # `obj` is the committed node itself (read only, never changed here), unless a later write replaced it
            current = obj if str(entry.rv) == str(obj["metadata"].get("resourceVersion")) else entry.obj
            taints = nodelifecycle.reconciled_taints(current, kinds.now_rfc3339())
            if taints is None:
                return
            new = _clone_obj(current)
            if taints:
                new.setdefault("spec", {})["taints"] = taints
            else:
                new.setdefault("spec", {}).pop("taints", None)  # omitempty
            self._write_update(rt, current, new, None, False, "kube-controller-manager")
        self._dispatch()

    @staticmethod
    def _error_group(rt: ResourceType) -> str:
        # events.k8s.io objects are validated as the internal core Event: messages name "Event", no group
        return "" if rt.key == _EVENTS_V1 else rt.group

    @staticmethod
    def _order(rt: ResourceType, obj: dict[str, Any]) -> dict[str, Any]:
        """kind, apiVersion, metadata, then the rest (Go struct order for the top level)."""
        head = {"kind": obj.get("kind", rt.kind), "apiVersion": obj.get("apiVersion", rt.api_version)}
        head["metadata"] = obj.get("metadata", {})
        for k, v in obj.items():
            if k not in head:
                head[k] = v
        return head

    def install_crd(self, crd: dict[str, Any]) -> dict[str, Any]:
        """Create a CRD (as POST would) and return it once Established."""
        self.create("customresourcedefinitions.apiextensions.k8s.io", crd)
        return self.get("customresourcedefinitions.apiextensions.k8s.io", crd["metadata"]["name"])

    def ensure_namespaces(self, names: Iterable[str]) -> None:
        for ns in names:
            if self._get_entry("namespaces", None, ns) is None:
                self.create("namespaces", {"metadata": {"name": ns}})
